package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// configFile is a --config YAML file: a map from a flag's name in
// snake_case (days, t_job, mapreduce_share, ...) to its value. A per-kind
// flag (schedulers, t_job, t_task, route) takes a map ({batch: 1}) or the
// flag's own string form. A flag given on the command line wins over the
// file.
type configFile struct {
	path string
	// from maps a flag set from the file to its field's name.
	from map[string]string
}

// name is how a message names a setting: its flag, or its field in the
// config file when the value came from there.
func (c *configFile) name(flag string) string {
	if key, ok := c.from[flag]; ok {
		return fmt.Sprintf("--config %s: %s", c.path, key)
	}
	return "--" + flag
}

// load reads the file and sets every flag of cmd it holds that the command
// line did not give; skip names the command's flags that are not settings
// (--config, --out, --json). Every problem is reported, each naming its
// field.
func (c *configFile) load(cmd *cobra.Command, skip ...string) error {
	fl := cmd.Flags()
	c.from = map[string]string{}
	b, err := os.ReadFile(c.path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var y map[string]json.RawMessage
	if err := yaml.UnmarshalStrict(b, &y); err != nil {
		return c.syntaxError(b, err)
	}
	var fields []string
	cmd.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !slices.Contains(skip, f.Name) {
			fields = append(fields, strings.ReplaceAll(f.Name, "-", "_"))
		}
	})
	slices.Sort(fields)
	var p problems
	keys := make([]string, 0, len(y))
	for k := range y {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, key := range keys {
		if !slices.Contains(fields, key) {
			p = append(p, fmt.Errorf("--config %s: unknown field %q (the fields: %s)", c.path, key, strings.Join(fields, ", ")))
			continue
		}
		name := strings.ReplaceAll(key, "_", "-")
		raw := bytes.TrimSpace(y[key])
		if fl.Changed(name) || string(raw) == "null" {
			continue // the command line wins; an empty field is absent
		}
		v, err := configValue(raw, fl.Lookup(name).Value.Type())
		if err == nil {
			err = fl.Set(name, v)
		}
		if err != nil {
			p = append(p, fmt.Errorf("--config %s: %s %s: %v", c.path, key, raw, err))
			continue
		}
		c.from[name] = key
	}
	return p.err()
}

// configValue turns a field's JSON (converted from YAML) into the flag's
// string form, refusing what the flag's type cannot hold.
func configValue(raw json.RawMessage, typ string) (string, error) {
	var s string
	isString := json.Unmarshal(raw, &s) == nil
	isNumber := len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
	switch typ {
	case "int", "uint64":
		if !isNumber {
			return "", fmt.Errorf("want a whole number")
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		switch {
		case err != nil || v != math.Trunc(v):
			return "", fmt.Errorf("want a whole number")
		case typ == "uint64":
			if _, err := strconv.ParseUint(string(raw), 10, 64); err != nil {
				return "", fmt.Errorf("want a whole number from 0 to 2^64-1")
			}
		default:
			if _, err := strconv.ParseInt(string(raw), 10, 64); err != nil {
				return "", fmt.Errorf("out of range")
			}
		}
		return string(raw), nil
	case "float64", "float":
		if !isNumber {
			return "", fmt.Errorf("want a number")
		}
		return string(raw), nil
	case "string":
		switch {
		case isString:
			return s, nil
		case isNumber:
			return string(raw), nil
		case len(raw) > 0 && raw[0] == '{':
			return configMap(raw)
		}
		return "", fmt.Errorf("want a string or a map")
	}
	return "", fmt.Errorf("not a setting")
}

// configMap turns {batch: 1, service: 2} into "batch=1,service=2".
func configMap(raw json.RawMessage) (string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	var parts []string
	for k, v := range m {
		if strings.ContainsAny(k, ",=") || strings.TrimSpace(k) == "" {
			return "", fmt.Errorf("key %q: want a kind", k)
		}
		var s string
		switch {
		case json.Unmarshal(v, &s) == nil:
		case len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'):
			s = string(v)
		default:
			return "", fmt.Errorf("%s: want a number or a string, not %s", k, v)
		}
		parts = append(parts, k+"="+s)
	}
	slices.Sort(parts)
	return strings.Join(parts, ","), nil
}

// specialFloat is YAML's NaN or infinity (.nan, -.Inf, ...) as a value.
var specialFloat = regexp.MustCompile(`(^|[\s:,\[{])([-+]?\.(?:inf|Inf|INF|nan|NaN|NAN))\s*($|[,}\]#])`)

// lastKey is the last "key:" of a line's prefix.
var lastKey = regexp.MustCompile(`([A-Za-z0-9_.-]+)\s*:\s*[{\[]?\s*$`)

// syntaxError explains a file the YAML reader refused. YAML's NaN and
// infinities cannot become JSON, so the reader's message names no field;
// find it.
func (c *configFile) syntaxError(b []byte, err error) error {
	switch msg := err.Error(); {
	case strings.Contains(msg, "into Go value of type map"):
		return fmt.Errorf("--config %s: want a map of settings (days: 7, ...), one field per flag", c.path)
	case !strings.Contains(msg, "unsupported value"):
		return fmt.Errorf("--config %s: %w", c.path, err)
	}
	var p problems
	parent := ""
	for i, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#") // not the comment
		if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, " ") && !strings.HasPrefix(line, "\t") {
			parent = ""
			if k, _, ok := strings.Cut(line, ":"); ok {
				parent = strings.TrimSpace(k)
			}
		}
		for _, m := range specialFloat.FindAllStringSubmatchIndex(line, -1) {
			key := "a field"
			if k := lastKey.FindStringSubmatch(line[:m[4]]); k != nil {
				key = k[1]
				if parent != "" && key != parent {
					key = parent + "." + key
				}
			} else if parent != "" {
				key = parent
			}
			p = append(p, fmt.Errorf("--config %s: line %d: %s %s: want a finite number", c.path, i+1, key, line[m[4]:m[5]]))
		}
	}
	if len(p) == 0 {
		return fmt.Errorf("--config %s: every number must be finite (no .nan or .inf): %w", c.path, err)
	}
	return p.err()
}

// explicit reports whether a flag was given on the command line (not set
// from the config file).
func (c *configFile) explicit(cmd *cobra.Command, flag string) bool {
	_, fromFile := c.from[flag]
	return cmd.Flags().Changed(flag) && !fromFile
}
