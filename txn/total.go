package txn

import (
	"maps"
	"math"
	"math/bits"
)

// int128 is a two's complement 128-bit integer: the cell's totals are sums of
// int64 amounts over any number of machines, which int64 cannot hold (two
// machines of math.MaxInt64 cpu would sum to a negative capacity). Adding
// and subtracting are exact, so a total kept by adding every machine's
// amount and subtracting it again on removal is always the true sum.
type int128 struct {
	hi int64
	lo uint64
}

func (x int128) add(v int64) int128 {
	lo, carry := bits.Add64(x.lo, uint64(v), 0)
	return int128{hi: x.hi + int64(carry) + v>>63, lo: lo}
}

func (x int128) sub(v int64) int128 {
	lo, borrow := bits.Sub64(x.lo, uint64(v), 0)
	return int128{hi: x.hi - int64(borrow) - v>>63, lo: lo}
}

func (x int128) isZero() bool { return x.hi == 0 && x.lo == 0 }

// int64 returns x, saturated to the int64 range.
func (x int128) int64() int64 {
	switch {
	case x.hi == 0 && x.lo <= math.MaxInt64, x.hi == -1 && x.lo > math.MaxInt64:
		return int64(x.lo)
	case x.hi < 0:
		return math.MinInt64
	}
	return math.MaxInt64
}

// total is a sum of Resources in 128 bits per dimension. Like Resources it
// is immutable once shared: ext is never written after it is built.
type total struct {
	cpu, mem int128
	ext      map[string]int128
}

func (t total) add(r Resources) total { return t.combine(r, false) }
func (t total) sub(r Resources) total { return t.combine(r, true) }

func (t total) combine(r Resources, neg bool) total {
	step := int128.add
	if neg {
		step = int128.sub
	}
	out := total{cpu: step(t.cpu, r.CPU), mem: step(t.mem, r.Memory), ext: t.ext}
	if len(r.Ext) == 0 {
		return out
	}
	out.ext = make(map[string]int128, len(t.ext)+len(r.Ext))
	maps.Copy(out.ext, t.ext)
	for k, v := range r.Ext {
		if n := step(out.ext[k], v); n.isZero() {
			delete(out.ext, k)
		} else {
			out.ext[k] = n
		}
	}
	if len(out.ext) == 0 {
		out.ext = nil
	}
	return out
}

// resources returns the total as Resources, each dimension saturated to the
// int64 range.
func (t total) resources() Resources {
	r := Resources{CPU: t.cpu.int64(), Memory: t.mem.int64()}
	if len(t.ext) > 0 {
		r.Ext = make(map[string]int64, len(t.ext))
		for k, v := range t.ext {
			r.Ext[k] = v.int64()
		}
	}
	return r
}

func (t total) equal(o total) bool {
	return t.cpu == o.cpu && t.mem == o.mem && maps.Equal(t.ext, o.ext)
}

// lessEq reports whether the total is at most r in every dimension (an
// absent dimension being zero).
func (t total) lessEq(r Resources) bool {
	if t.cpu.cmp(r.CPU) > 0 || t.mem.cmp(r.Memory) > 0 {
		return false
	}
	for k, v := range t.ext {
		if v.cmp(r.Ext[k]) > 0 {
			return false
		}
	}
	for k, v := range r.Ext {
		if _, ok := t.ext[k]; !ok && v < 0 {
			return false
		}
	}
	return true
}

// equalResources reports whether the total is exactly r.
func (t total) equalResources(r Resources) bool { return t.equal(total{}.add(r)) }

// cmp compares x with v: -1, 0 or 1.
func (x int128) cmp(v int64) int {
	y := int128{}.add(v)
	switch {
	case x.hi < y.hi || x.hi == y.hi && x.lo < y.lo:
		return -1
	case x == y:
		return 0
	}
	return 1
}

// plus returns x + y.
func (x int128) plus(y int128) int128 {
	lo, carry := bits.Add64(x.lo, y.lo, 0)
	return int128{hi: x.hi + y.hi + int64(carry), lo: lo}
}

// plus returns t + o.
func (t total) plus(o total) total {
	out := total{cpu: t.cpu.plus(o.cpu), mem: t.mem.plus(o.mem), ext: t.ext}
	if len(o.ext) == 0 {
		return out
	}
	out.ext = make(map[string]int128, len(t.ext)+len(o.ext))
	maps.Copy(out.ext, t.ext)
	for k, v := range o.ext {
		if n := out.ext[k].plus(v); n.isZero() {
			delete(out.ext, k)
		} else {
			out.ext[k] = n
		}
	}
	if len(out.ext) == 0 {
		out.ext = nil
	}
	return out
}

// neg returns -x.
func (x int128) neg() int128 {
	lo, borrow := bits.Sub64(0, x.lo, 0)
	return int128{hi: -x.hi - int64(borrow), lo: lo}
}

// minus returns t - o.
func (t total) minus(o total) total {
	n := total{cpu: o.cpu.neg(), mem: o.mem.neg()}
	if len(o.ext) > 0 {
		n.ext = make(map[string]int128, len(o.ext))
		for k, v := range o.ext {
			n.ext[k] = v.neg()
		}
	}
	return t.plus(n)
}

// replace returns t with old taken out and now put in: a machine's new
// version in a sum over machines. Without extended resources (the common
// case) it is a few additions, and nothing when the two are equal.
func (t total) replace(old, now Resources) total {
	if len(old.Ext) == 0 && len(now.Ext) == 0 {
		if old.CPU != now.CPU {
			t.cpu = t.cpu.sub(old.CPU).add(now.CPU)
		}
		if old.Memory != now.Memory {
			t.mem = t.mem.sub(old.Memory).add(now.Memory)
		}
		return t
	}
	return t.sub(old).add(now)
}
