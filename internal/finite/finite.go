// Package finite finds the figures that JSON cannot hold: the NaN and
// infinite floats in a report, by their JSON path, so that a report is
// refused with the figure named instead of written half (encoding/json
// stops at the first one with "unsupported value").
package finite

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
)

// JSON returns v as indented JSON with a final newline — the form of every
// report the project writes — or, if a figure in it is NaN or infinite, an
// error naming the first (Check) and no bytes.
func JSON(v any) ([]byte, error) {
	if err := Check("", v); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Check reports the first float in v (a struct, slice, array or map of
// them, walked through exported fields and pointers) that is NaN or
// infinite, by its JSON path from root ("schedulers[0].wait_mean_s = NaN").
func Check(root string, v any) error {
	if path := first(reflect.ValueOf(v), root); path != "" {
		return fmt.Errorf("%s: not a finite number", path)
	}
	return nil
}

func first(v reflect.Value, path string) string {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Sprintf("%s = %v", strings.TrimPrefix(path, "."), f)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return first(v.Elem(), path)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if p := first(v.Field(i), path+"."+name); p != "" {
				return p
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if p := first(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			if p := first(v.MapIndex(k), fmt.Sprintf("%s.%v", path, k)); p != "" {
				return p
			}
		}
	}
	return ""
}
