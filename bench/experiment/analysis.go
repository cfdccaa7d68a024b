package experiment

import (
	"fmt"
	"strconv"
)

// line is the series of a metric along one axis, over the cells whose
// other axes have the fixed values (name, value pairs), in grid order.
func (res *Results) line(label, axis, metric string, fixed ...string) series {
	s := series{label: label}
	for i := range res.Sweep.Cells {
		c := &res.Sweep.Cells[i]
		match := true
		for k := 0; k+1 < len(fixed); k += 2 {
			if c.Axis(fixed[k]) != fixed[k+1] {
				match = false
			}
		}
		st, ok := res.Stat(c.ID, metric)
		if !match || !ok {
			continue
		}
		x, err := strconv.ParseFloat(c.Axis(axis), 64)
		if err != nil {
			continue
		}
		s.x, s.y = append(s.x, x), append(s.y, st.Median)
		s.lo, s.hi = append(s.lo, st.Min), append(s.hi, st.Max)
	}
	return s
}

// at is the series' value at x (ok false if it has none there).
func (s series) at(x float64) (float64, bool) {
	for i, v := range s.x {
		if v == x {
			return s.y[i], true
		}
	}
	return 0, false
}

// nonDecreasing reports whether the series never falls by more than tol
// (relative) from one point to the next.
func (s series) nonDecreasing(tol float64) bool {
	for i := 1; i < len(s.y); i++ {
		if s.y[i] < s.y[i-1]*(1-tol)-1e-9 {
			return false
		}
	}
	return true
}

// last and first are the series' ends (0 when empty).
func (s series) last() float64 {
	if len(s.y) == 0 {
		return 0
	}
	return s.y[len(s.y)-1]
}

func (s series) first() float64 {
	if len(s.y) == 0 {
		return 0
	}
	return s.y[0]
}

// spreadRatio is the series' largest value over its smallest (over a
// floor, so that a zero does not make it infinite).
func (s series) spreadRatio(floor float64) float64 {
	if len(s.y) == 0 {
		return 1
	}
	lo, hi := s.y[0], s.y[0]
	for _, v := range s.y {
		lo, hi = min(lo, v), max(hi, v)
	}
	return max(hi, floor) / max(lo, floor)
}

// points writes a series as "x: y" pairs, for a finding's measured text.
func (s series) points(unit string, scale float64) string {
	out := ""
	for i := range s.x {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s: %s%s", fmtNum(s.x[i]), fmtNum(s.y[i]*scale), unit)
	}
	return out
}

func verdict(ok bool) string {
	if ok {
		return Reproduced
	}
	return NotReproduced
}

func pct(x float64) string { return fmtNum(100*x) + "%" }
