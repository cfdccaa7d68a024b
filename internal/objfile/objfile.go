// Package objfile reads the objects a user writes by hand — a job file for
// `omega submit -f` — from YAML or JSON (JSON is YAML): the object's
// {meta, spec} in the protobuf JSON mapping (field names in lowerCamel or
// snake_case, enums by name, or by their short name: "batch" for
// JOB_KIND_BATCH), with resources also in Kubernetes quantities
// (cpu: 500m or 0.5 or 2; memory: 256Mi, 1Gi, 100M or bytes). It walks the
// YAML against the message's descriptor, so every error names the file,
// the line and column, and the field's path.
package objfile

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	yaml "sigs.k8s.io/yaml/goyaml.v3"

	"google.golang.org/protobuf/reflect/protoreflect"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Error is a file that does not decode: where and why.
type Error struct {
	File      string
	Line, Col int    // 1-based; 0 when the file as a whole is at fault
	Path      string // the field's path, e.g. spec.template.resources.cpu
	Why       string
}

func (e *Error) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Col)
	}
	if e.Path != "" {
		return fmt.Sprintf("%s: %s: %s", where, e.Path, e.Why)
	}
	return fmt.Sprintf("%s: %s", where, e.Why)
}

// MaxBytes bounds a file.
const MaxBytes = 1 << 20

type decoder struct{ file string }

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) error {
	e := &Error{File: d.file, Path: path, Why: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	return e
}

// Job decodes a job file (one document).
func Job(file string, data []byte) (*omegav1.Job, error) {
	j := &omegav1.Job{}
	if err := Decode(file, data, j.ProtoReflect()); err != nil {
		return nil, err
	}
	return j, nil
}

// Decode decodes one YAML (or JSON) document into m.
func Decode(file string, data []byte, m protoreflect.Message) error {
	d := &decoder{file: file}
	if len(data) > MaxBytes {
		return d.fail(nil, "", "%d bytes, more than %d", len(data), MaxBytes)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			return d.fail(nil, "", "%s", strings.Join(te.Errors, "; "))
		}
		return d.fail(nil, "", "not YAML or JSON: %v", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind == 0 {
		return d.fail(nil, "", "empty")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	return d.message(root, "", m)
}

func lowerCamel(s string) string {
	var b strings.Builder
	up := false
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (d *decoder) message(n *yaml.Node, path string, m protoreflect.Message) error {
	if n.Kind == yaml.AliasNode {
		return d.fail(n, path, "YAML aliases are not supported")
	}
	if n.Kind != yaml.MappingNode {
		return d.fail(n, path, "want a mapping (%s), got %s", m.Descriptor().Name(), kindName(n))
	}
	if m.Descriptor().FullName() == "omega.v1.Resources" {
		return d.resources(n, path, m)
	}
	fields := m.Descriptor().Fields()
	seen := map[protoreflect.FieldNumber]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var fd protoreflect.FieldDescriptor
		for j := range fields.Len() {
			f := fields.Get(j)
			if string(f.Name()) == k.Value || f.JSONName() == k.Value || lowerCamel(string(f.Name())) == k.Value {
				fd = f
				break
			}
		}
		fpath := join(path, k.Value)
		if fd == nil {
			var known []string
			for j := range fields.Len() {
				known = append(known, fields.Get(j).JSONName())
			}
			return d.fail(k, fpath, "unknown field of %s (it has %s)", m.Descriptor().Name(), strings.Join(known, ", "))
		}
		if seen[fd.Number()] {
			return d.fail(k, fpath, "given twice")
		}
		seen[fd.Number()] = true
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue
		}
		if err := d.field(v, fpath, m, fd); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) field(n *yaml.Node, path string, m protoreflect.Message, fd protoreflect.FieldDescriptor) error {
	switch {
	case fd.IsMap():
		if n.Kind != yaml.MappingNode {
			return d.fail(n, path, "want a mapping, got %s", kindName(n))
		}
		mp := m.Mutable(fd).Map()
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key, err := d.scalar(k, path, fd.MapKey())
			if err != nil {
				return err
			}
			val, err := d.value(v, join(path, k.Value), m, fd.MapValue(), func() protoreflect.Value { return mp.NewValue() })
			if err != nil {
				return err
			}
			if mp.Has(key.MapKey()) {
				return d.fail(k, join(path, k.Value), "given twice")
			}
			mp.Set(key.MapKey(), val)
		}
		return nil
	case fd.IsList():
		if n.Kind != yaml.SequenceNode {
			return d.fail(n, path, "want a list, got %s", kindName(n))
		}
		l := m.Mutable(fd).List()
		for i, item := range n.Content {
			v, err := d.value(item, fmt.Sprintf("%s[%d]", path, i), m, fd, func() protoreflect.Value { return l.NewElement() })
			if err != nil {
				return err
			}
			l.Append(v)
		}
		return nil
	}
	v, err := d.value(n, path, m, fd, func() protoreflect.Value { return m.NewField(fd) })
	if err != nil {
		return err
	}
	if why, ok := noZero[fd.FullName()]; ok && v.Int() == 0 {
		return d.fail(n, path, "%s: %s", n.Value, why)
	}
	m.Set(fd, v)
	return nil
}

// noZero are the fields a file may leave out but not give as 0: protobuf
// cannot tell an unset field from a zero, the file can, and a zero given
// there means what the cell cannot do (its readers take 0 as the default).
var noZero = map[protoreflect.FullName]string{
	"omega.v1.JobSpec.replicas": "want at least 1 (a job of no tasks; leave replicas out for one)",
}

// value decodes one value of fd's kind; fresh makes an empty message.
func (d *decoder) value(n *yaml.Node, path string, _ protoreflect.Message, fd protoreflect.FieldDescriptor, fresh func() protoreflect.Value) (protoreflect.Value, error) {
	if fd.Kind() == protoreflect.MessageKind {
		v := fresh()
		if err := d.message(n, path, v.Message()); err != nil {
			return protoreflect.Value{}, err
		}
		return v, nil
	}
	return d.scalar(n, path, fd)
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("%q", n.Value)
}

func (d *decoder) scalar(n *yaml.Node, path string, fd protoreflect.FieldDescriptor) (protoreflect.Value, error) {
	if n.Kind != yaml.ScalarNode {
		return protoreflect.Value{}, d.fail(n, path, "want a %s, got %s", fd.Kind(), kindName(n))
	}
	s := n.Value
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(s), nil
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return protoreflect.Value{}, d.fail(n, path, "want true or false, got %q", s)
		}
		return protoreflect.ValueOfBool(b), nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		i, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return protoreflect.Value{}, d.fail(n, path, "want a whole number that fits 32 bits, got %q", s)
		}
		return protoreflect.ValueOfInt32(int32(i)), nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return protoreflect.Value{}, d.fail(n, path, "want a whole number, got %q", s)
		}
		return protoreflect.ValueOfInt64(i), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		i, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return protoreflect.Value{}, d.fail(n, path, "want a whole number from 0 that fits 32 bits, got %q", s)
		}
		return protoreflect.ValueOfUint32(uint32(i)), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		i, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return protoreflect.Value{}, d.fail(n, path, "want a whole number from 0, got %q", s)
		}
		return protoreflect.ValueOfUint64(i), nil
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		prefix := enumPrefix(fd.Enum())
		var names []string
		for i := range vals.Len() {
			v := vals.Get(i)
			full := string(v.Name())
			short := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(full, prefix), "_", "-"))
			if v.Number() == 0 {
				continue
			}
			names = append(names, short)
			if s == full || strings.EqualFold(s, short) || strings.EqualFold(strings.ReplaceAll(s, "_", "-"), short) {
				return protoreflect.ValueOfEnum(v.Number()), nil
			}
		}
		return protoreflect.Value{}, d.fail(n, path, "want one of %s, got %q", strings.Join(names, ", "), s)
	}
	return protoreflect.Value{}, d.fail(n, path, "fields of kind %s are not supported in files", fd.Kind())
}

// enumPrefix is the common prefix of an enum's value names (JOB_KIND_).
func enumPrefix(e protoreflect.EnumDescriptor) string {
	vals := e.Values()
	if vals.Len() == 0 {
		return ""
	}
	p := string(vals.Get(0).Name())
	for i := 1; i < vals.Len(); i++ {
		n := string(vals.Get(i).Name())
		for !strings.HasPrefix(n, p) {
			p = p[:len(p)-1]
		}
	}
	if i := strings.LastIndexByte(p, '_'); i >= 0 {
		return p[:i+1]
	}
	return ""
}

// resources decodes a Resources mapping: cpu (a quantity of cores, in
// thousandths) or cpuMillis, memory (a quantity of bytes) or memoryBytes,
// and extended.
func (d *decoder) resources(n *yaml.Node, path string, m protoreflect.Message) error {
	r := m.Interface().(*omegav1.Resources)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		fpath := join(path, k.Value)
		dim := map[string]string{"cpu": "cpu", "cpuMillis": "cpu", "cpu_millis": "cpu", "memory": "memory", "memoryBytes": "memory", "memory_bytes": "memory", "extended": "extended"}[k.Value]
		if dim == "" {
			return d.fail(k, fpath, "unknown field of Resources (it has cpu, memory, cpuMillis, memoryBytes, extended)")
		}
		if seen[dim] {
			return d.fail(k, fpath, "%s given twice", dim)
		}
		seen[dim] = true
		if dim == "extended" {
			if err := d.field(v, fpath, m, m.Descriptor().Fields().ByName("extended")); err != nil {
				return err
			}
			continue
		}
		if v.Kind != yaml.ScalarNode {
			return d.fail(v, fpath, "want a quantity, got %s", kindName(v))
		}
		var x int64
		var err error
		switch k.Value {
		case "cpu":
			x, err = quantity(v.Value, 1000) // cores → thousandths
		case "memory":
			x, err = quantity(v.Value, 1)
		default:
			x, err = strconv.ParseInt(v.Value, 10, 64)
			if err != nil {
				err = fmt.Errorf("%s is not a whole number", cut(v.Value))
			}
		}
		if err != nil {
			return d.fail(v, fpath, "%v", err)
		}
		if x < 0 {
			return d.fail(v, fpath, "%s: negative", v.Value)
		}
		if dim == "cpu" {
			r.CpuMillis = x
		} else {
			r.MemoryBytes = x
		}
	}
	return nil
}

var suffixes = map[string]*big.Rat{
	"m": big.NewRat(1, 1000), "k": big.NewRat(1e3, 1), "M": big.NewRat(1e6, 1), "G": big.NewRat(1e9, 1),
	"T": big.NewRat(1e12, 1), "P": big.NewRat(1e15, 1), "E": big.NewRat(1e18, 1),
	"Ki": big.NewRat(1<<10, 1), "Mi": big.NewRat(1<<20, 1), "Gi": big.NewRat(1<<30, 1),
	"Ti": big.NewRat(1<<40, 1), "Pi": big.NewRat(1<<50, 1), "Ei": big.NewRat(1<<60, 1),
}

// Quantity parses a Kubernetes quantity times unit (1000 for cores in
// thousandths, 1 for bytes), which must come out whole.
func Quantity(s string, unit int64) (int64, error) { return quantity(s, unit) }

// quantity parses a Kubernetes quantity (a decimal number and an optional
// suffix: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) and returns it times
// unit, which must come out whole.
func quantity(s string, unit int64) (int64, error) {
	num, suf := s, ""
	for i := len(s); i > 0; i-- {
		if c := s[i-1]; c >= '0' && c <= '9' || c == '.' {
			num, suf = s[:i], s[i:]
			break
		}
	}
	mult := big.NewRat(1, 1)
	if suf != "" {
		var ok bool
		if mult, ok = suffixes[suf]; !ok {
			return 0, fmt.Errorf("%q: unknown suffix %q (want m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi or Ei)", s, suf)
		}
	}
	if rest, neg := strings.CutPrefix(s, "-"); neg {
		if _, err := quantity(rest, unit); err == nil {
			return 0, fmt.Errorf("%s: negative", cut(s))
		}
	}
	x, ok := new(big.Rat).SetString(num)
	if !ok || num == "" || strings.ContainsAny(num, "eE/+-") {
		return 0, fmt.Errorf("%q is not a quantity (a number and an optional suffix such as 500m or 256Mi)", s)
	}
	x.Mul(x, mult).Mul(x, big.NewRat(unit, 1))
	if !x.IsInt() {
		if unit == 1000 {
			return 0, fmt.Errorf("%q is not a whole number of thousandths of a core", s)
		}
		return 0, fmt.Errorf("%q is not a whole number of bytes", s)
	}
	if !x.Num().IsInt64() || x.Num().Int64() > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return x.Num().Int64(), nil
}

// cut is a value a user wrote, as an error names it: whole up to 64
// bytes, else its first 64 and its length (txn.Quote's rule; objfile
// links only the schema).
func cut(s string) string {
	if len(s) <= 64 {
		return s
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:64], len(s))
}
