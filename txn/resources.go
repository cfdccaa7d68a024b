package txn

import (
	"fmt"
	"maps"
	"slices"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Resources is an amount in every dimension: cpu and memory inline, and named
// extended dimensions (GPUs, ...) in Ext. The common case has no extended
// dimension, so Ext is nil and a fit check is two comparisons.
//
// A Resources value is immutable once shared: Ext is never written after the
// value is built, so copies may share it.
type Resources struct {
	CPU    int64 // thousandths of a core
	Memory int64 // bytes
	Ext    map[string]int64
}

// ResourcesFromProto converts the wire form. A nil message is zero.
func ResourcesFromProto(p *omegav1.Resources) Resources {
	if p == nil {
		return Resources{}
	}
	r := Resources{CPU: p.GetCpuMillis(), Memory: p.GetMemoryBytes()}
	for k, v := range p.GetExtended() {
		if v == 0 {
			continue
		}
		if r.Ext == nil {
			r.Ext = make(map[string]int64, len(p.GetExtended()))
		}
		r.Ext[k] = v
	}
	return r
}

// Proto returns the wire form.
func (r Resources) Proto() *omegav1.Resources {
	p := &omegav1.Resources{CpuMillis: r.CPU, MemoryBytes: r.Memory}
	if len(r.Ext) > 0 {
		p.Extended = maps.Clone(r.Ext)
	}
	return p
}

// owned returns r with an extended map of its own, without zero entries
// (what a reopened store reads back: the stored form keeps no zero
// amount). A claim's Resources come from the caller, who may change its map
// after Commit returns; the state must not share it.
func (r Resources) owned() Resources {
	out := Resources{CPU: r.CPU, Memory: r.Memory}
	for k, v := range r.Ext {
		if v != 0 {
			if out.Ext == nil {
				out.Ext = make(map[string]int64, len(r.Ext))
			}
			out.Ext[k] = v
		}
	}
	return out
}

// IsZero reports whether every dimension is zero.
func (r Resources) IsZero() bool {
	if r.CPU != 0 || r.Memory != 0 {
		return false
	}
	for _, v := range r.Ext {
		if v != 0 {
			return false
		}
	}
	return true
}

// Validate returns an error naming the first negative dimension.
func (r Resources) Validate() error {
	if r.CPU < 0 {
		return fmt.Errorf("cpu_millis %d is negative", r.CPU)
	}
	if r.Memory < 0 {
		return fmt.Errorf("memory_bytes %d is negative", r.Memory)
	}
	negative := false
	for _, v := range r.Ext {
		negative = negative || v < 0
	}
	if !negative {
		return nil
	}
	// Name the first in order, so the error is the same every time.
	for _, k := range slices.Sorted(maps.Keys(r.Ext)) {
		if r.Ext[k] < 0 {
			return fmt.Errorf("extended resource %s = %d is negative", Quote(k), r.Ext[k])
		}
	}
	return nil
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	out := Resources{CPU: r.CPU + o.CPU, Memory: r.Memory + o.Memory}
	out.Ext = combineExt(r.Ext, o.Ext, 1)
	return out
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	out := Resources{CPU: r.CPU - o.CPU, Memory: r.Memory - o.Memory}
	out.Ext = combineExt(r.Ext, o.Ext, -1)
	return out
}

func combineExt(a, b map[string]int64, sign int64) map[string]int64 {
	if len(b) == 0 {
		return a // shared: immutable
	}
	out := make(map[string]int64, len(a)+len(b))
	maps.Copy(out, a)
	for k, v := range b {
		if n := out[k] + sign*v; n != 0 {
			out[k] = n
		} else {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Fits reports whether used + req ≤ capacity in every dimension, and if not,
// names the first dimension that does not fit. It compares req with
// capacity - used, which cannot overflow for non-negative amounts (used + req
// can: a huge declared amount would wrap around and "fit").
func Fits(capacity, used, req Resources) (bool, string) {
	if req.CPU > capacity.CPU-used.CPU {
		return false, "cpu"
	}
	if req.Memory > capacity.Memory-used.Memory {
		return false, "memory"
	}
	fit := true
	for k, v := range req.Ext {
		if v > capacity.Ext[k]-used.Ext[k] {
			fit = false
			break
		}
	}
	if fit {
		return true, ""
	}
	for _, k := range slices.Sorted(maps.Keys(req.Ext)) { // name the first, deterministically
		if req.Ext[k] > capacity.Ext[k]-used.Ext[k] {
			return false, k
		}
	}
	return false, "" // unreachable
}

// exceeds names the first dimension (cpu, memory, then extended ones in
// order) in which r is above o, or "" if none is.
func exceeds(r, o Resources) string {
	if r.CPU > o.CPU {
		return "cpu"
	}
	if r.Memory > o.Memory {
		return "memory"
	}
	keys := slices.Collect(maps.Keys(r.Ext))
	for k := range o.Ext {
		if _, ok := r.Ext[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if r.Ext[k] > o.Ext[k] {
			return k
		}
	}
	return ""
}

// LessEq reports whether r ≤ o in every dimension, an absent extended
// dimension being zero (so a negative amount in o is below r's zero).
func (r Resources) LessEq(o Resources) bool {
	if r.CPU > o.CPU || r.Memory > o.Memory {
		return false
	}
	for k, v := range r.Ext {
		if v > o.Ext[k] {
			return false
		}
	}
	for k, v := range o.Ext {
		if _, ok := r.Ext[k]; !ok && v < 0 {
			return false
		}
	}
	return true
}

// Equal reports whether r and o are equal in every dimension, an absent
// extended dimension being zero.
func (r Resources) Equal(o Resources) bool {
	if r.CPU != o.CPU || r.Memory != o.Memory {
		return false
	}
	for k, v := range r.Ext {
		if o.Ext[k] != v {
			return false
		}
	}
	for k, v := range o.Ext {
		if r.Ext[k] != v {
			return false
		}
	}
	return true
}

func (r Resources) String() string {
	s := fmt.Sprintf("cpu=%dm mem=%d", r.CPU, r.Memory)
	for _, k := range slices.Sorted(maps.Keys(r.Ext)) {
		s += fmt.Sprintf(" %s=%d", k, r.Ext[k])
	}
	return s
}

// atLeastZero returns r with every negative amount raised to zero (and
// dropped, for an extended dimension).
func (r Resources) atLeastZero() Resources {
	out := Resources{CPU: max(r.CPU, 0), Memory: max(r.Memory, 0)}
	neg := false
	for _, v := range r.Ext {
		if v <= 0 {
			neg = true
		}
	}
	if !neg {
		out.Ext = r.Ext
		return out
	}
	for k, v := range r.Ext {
		if v > 0 {
			if out.Ext == nil {
				out.Ext = map[string]int64{}
			}
			out.Ext[k] = v
		}
	}
	return out
}
