package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
)

// Dist is a distribution of non-negative values. Sample draws from the
// given source only, so the same source state gives the same value; a Dist
// is immutable and safe for concurrent use (the source is not).
type Dist interface {
	Sample(r *rand.Rand) float64
	// Mean is the exact mean of the distribution Sample draws from.
	Mean() float64
}

// Empirical is a distribution given by a piecewise-linear inverse CDF: knots
// (P[i], V[i]) with P running from 0 to 1. Sampling draws u uniform in [0, 1),
// finds the knots below and above it and returns
//
//	below + f*(above-below),  f = (u - P[i]) / (P[i+1] - P[i])
//
// (Google's Omega simulator computed below + f*(below+above), inflating
// every value; TestEmpiricalMeanCatchesSamplerBug guards against that.)
type Empirical struct {
	p, v []float64
}

// NewEmpirical builds the distribution of a set of sample points (in any
// order; the slice is copied). The sorted points x[0..n-1] are the knots at
// their mid-rank probabilities (i+0.5)/n, with x[0] held down to 0 and
// x[n-1] up to 1, so the distribution's mean is exactly the points' mean and
// every point is as likely as every other.
func NewEmpirical(points []float64) (*Empirical, error) {
	if len(points) == 0 {
		return nil, errors.New("empirical: no points")
	}
	x := slices.Clone(points)
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("empirical: point %v is not finite", v)
		}
	}
	slices.Sort(x)
	p, v := hazenKnots(x)
	return &Empirical{p: p, v: v}, nil
}

// hazenKnots returns the knots of the sorted sample x: (0, x0), ((i+0.5)/n,
// x[i]) for every i, (1, x[n-1]).
func hazenKnots(x []float64) (p, v []float64) {
	n := len(x)
	p = make([]float64, 0, n+2)
	v = make([]float64, 0, n+2)
	p, v = append(p, 0), append(v, x[0])
	for i, xi := range x {
		p, v = append(p, (float64(i)+0.5)/float64(n)), append(v, xi)
	}
	p, v = append(p, 1), append(v, x[n-1])
	return p, v
}

// QuantileTable is the literal form of an Empirical: cumulative
// probabilities P (strictly increasing from 0 to 1) and the values V at them
// (non-decreasing).
type QuantileTable struct {
	P, V []float64
}

// Validate checks the table's shape.
func (q QuantileTable) Validate() error {
	n := len(q.P)
	switch {
	case n < 2:
		return fmt.Errorf("quantile table: %d knots, need at least 2", n)
	case len(q.V) != n:
		return fmt.Errorf("quantile table: %d probabilities but %d values", n, len(q.V))
	case q.P[0] != 0 || q.P[n-1] != 1:
		return fmt.Errorf("quantile table: probabilities run from %v to %v, want 0 to 1", q.P[0], q.P[n-1])
	}
	for i := range n {
		if math.IsNaN(q.V[i]) || math.IsInf(q.V[i], 0) {
			return fmt.Errorf("quantile table: value %d (%v) is not finite", i, q.V[i])
		}
		if i > 0 && !(q.P[i] > q.P[i-1]) {
			return fmt.Errorf("quantile table: probability %d (%v) does not increase", i, q.P[i])
		}
		if i > 0 && q.V[i] < q.V[i-1] {
			return fmt.Errorf("quantile table: value %d (%v) decreases", i, q.V[i])
		}
	}
	return nil
}

// Empirical returns the distribution of the table (it shares the slices:
// do not modify them afterwards).
func (q QuantileTable) Empirical() (*Empirical, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return &Empirical{p: q.P, v: q.V}, nil
}

// MustEmpirical is Empirical for tables known to be valid (the fitted
// literals); it panics otherwise.
func (q QuantileTable) MustEmpirical() *Empirical {
	e, err := q.Empirical()
	if err != nil {
		panic(err)
	}
	return e
}

// Table returns the knots (copies).
func (e *Empirical) Table() QuantileTable {
	return QuantileTable{P: slices.Clone(e.p), V: slices.Clone(e.v)}
}

// Sample draws a value by inverse-CDF sampling.
func (e *Empirical) Sample(r *rand.Rand) float64 { return e.Quantile(r.Float64()) }

// Quantile returns the inverse CDF at u (clamped to [0, 1]).
func (e *Empirical) Quantile(u float64) float64 {
	n := len(e.p)
	switch {
	case !(u > 0): // also NaN
		return e.v[0]
	case u >= 1:
		return e.v[n-1]
	}
	// The segment [p[i], p[i+1]) holding u.
	i := sort.SearchFloat64s(e.p, u) // first p[j] >= u
	if i < n && e.p[i] == u {
		return e.v[i]
	}
	i--
	below, above := e.v[i], e.v[i+1]
	f := (u - e.p[i]) / (e.p[i+1] - e.p[i])
	return below + f*(above-below)
}

// CDF returns P(X <= x) (the inverse of Quantile where it is strictly
// increasing).
func (e *Empirical) CDF(x float64) float64 {
	n := len(e.v)
	if x < e.v[0] {
		return 0
	}
	if x >= e.v[n-1] {
		return 1
	}
	// Last knot with v <= x.
	i := sort.Search(n, func(j int) bool { return e.v[j] > x }) - 1
	if e.v[i+1] == e.v[i] {
		return e.p[i+1]
	}
	return e.p[i] + (x-e.v[i])/(e.v[i+1]-e.v[i])*(e.p[i+1]-e.p[i])
}

// Mean returns the exact mean: the area under the inverse CDF.
func (e *Empirical) Mean() float64 {
	m := 0.0
	for i := 0; i+1 < len(e.p); i++ {
		m += (e.p[i+1] - e.p[i]) * (e.v[i] + e.v[i+1]) / 2
	}
	return m
}

// Min and Max return the smallest and largest values Sample can return.
func (e *Empirical) Min() float64 { return e.v[0] }
func (e *Empirical) Max() float64 { return e.v[len(e.v)-1] }

// Exponential is the exponential distribution with the given mean: the
// interarrival time of a Poisson process.
type Exponential struct {
	MeanValue float64
}

// Sample draws by inverse CDF, one uniform per value.
func (d Exponential) Sample(r *rand.Rand) float64 {
	return -d.MeanValue * math.Log1p(-r.Float64()) // 1-u in (0, 1]
}

func (d Exponential) Mean() float64 { return d.MeanValue }

// LognormalPareto is the heavy-tailed runtime model: a lognormal body
// (median Median, log-standard-deviation Sigma) up to its TailFrom quantile
// x_q, spliced there to a Pareto tail with shape Alpha that starts at x_q:
//
//	Q(u) = Median * exp(Sigma * Φ⁻¹(u))              for u < TailFrom
//	Q(u) = x_q * ((1-TailFrom) / (1-u))^(1/Alpha)    for u ≥ TailFrom
//
// then clamped to [Min, Max]. The CDF is continuous at the splice, so the
// model is sampled by inverse CDF with one uniform per value. A smaller
// Alpha is a heavier tail (Alpha ≤ 1 has no mean without Max). Values are
// seconds where it is used for runtimes.
type LognormalPareto struct {
	Median   float64 // > 0
	Sigma    float64 // > 0
	TailFrom float64 // in [0.5, 1): the share of values drawn from the body
	Alpha    float64 // > 0
	Min      float64 // in [0, Median]; smaller values are raised to Min
	Max      float64 // above the tail's start; larger values are cut to Max (e.g. the trace's length)
}

// Validate checks the parameters: a *FieldError naming the first one out
// of range (workload.LognormalPareto.Sigma).
func (d LognormalPareto) Validate() error {
	bad := func(field string, v float64, want string) error {
		return &FieldError{In: "workload.LognormalPareto", Field: field, Value: v, Want: want}
	}
	finitePositive := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) } // false for NaN
	switch {
	case !finitePositive(d.Median):
		return bad("Median", d.Median, "a finite number greater than 0")
	case !finitePositive(d.Sigma):
		return bad("Sigma", d.Sigma, "a finite number greater than 0")
	case !(d.TailFrom >= 0.5 && d.TailFrom < 1):
		return bad("TailFrom", d.TailFrom, "a probability at least 0.5 and less than 1")
	case !finitePositive(d.Alpha):
		return bad("Alpha", d.Alpha, "a finite number greater than 0")
	case !(d.Min >= 0 && d.Min <= d.Median):
		return bad("Min", d.Min, fmt.Sprintf("a number from 0 to Median (%v)", d.Median))
	case math.IsInf(d.splice(), 0):
		return bad("Sigma", d.Sigma, fmt.Sprintf("small enough that the tail starts at a finite value (Median×exp(Sigma×Φ⁻¹(TailFrom)) = %v)", d.splice()))
	case !(d.Max > d.splice()) || math.IsInf(d.Max, 0):
		return bad("Max", d.Max, fmt.Sprintf("a finite number above the tail's start (%v)", d.splice()))
	}
	return nil
}

// normQuantile is Φ⁻¹, the standard normal quantile.
func normQuantile(u float64) float64 { return math.Sqrt2 * math.Erfinv(2*u-1) }

// normCDF is Φ.
func normCDF(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// splice returns x_q, where the tail starts.
func (d LognormalPareto) splice() float64 {
	return d.Median * math.Exp(d.Sigma*normQuantile(d.TailFrom))
}

// Quantile returns the inverse CDF at u in [0, 1].
func (d LognormalPareto) Quantile(u float64) float64 {
	var x float64
	switch {
	case !(u > 0):
		x = 0
	case u < d.TailFrom:
		x = d.Median * math.Exp(d.Sigma*normQuantile(u))
	case u >= 1:
		x = math.Inf(1)
	default:
		x = d.splice() * math.Pow((1-d.TailFrom)/(1-u), 1/d.Alpha)
	}
	return min(max(x, d.Min), d.Max)
}

// Sample draws by inverse CDF.
func (d LognormalPareto) Sample(r *rand.Rand) float64 { return d.Quantile(r.Float64()) }

// Survival returns P(X > x) of the unclamped model (for x in [Min, Max) it
// is also that of the clamped one).
func (d LognormalPareto) Survival(x float64) float64 {
	if x <= 0 {
		return 1
	}
	xq := d.splice()
	if x < xq {
		return 1 - normCDF(math.Log(x/d.Median)/d.Sigma)
	}
	return (1 - d.TailFrom) * math.Pow(xq/x, d.Alpha)
}

// Mean returns the exact mean of the clamped model (d must be valid).
func (d LognormalPareto) Mean() float64 {
	mu, s := math.Log(d.Median), d.Sigma
	xq := d.splice() // >= Median >= Min, < Max (Validate)
	// Body: values below x_q, those below Min raised to Min.
	// E[max(X, Min); X < xq] = Min Φ(z_min) + e^(μ+σ²/2) (Φ(z_q-σ) - Φ(z_min-σ)).
	zq := (math.Log(xq) - mu) / s
	body := math.Exp(mu+s*s/2) * normCDF(zq-s)
	if d.Min > 0 {
		zmin := (math.Log(d.Min) - mu) / s
		body += d.Min*normCDF(zmin) - math.Exp(mu+s*s/2)*normCDF(zmin-s)
	}
	// Tail: density (1-q) α xq^α x^(-α-1) on [xq, Max), mass (1-q)(xq/Max)^α at Max.
	q, a := d.TailFrom, d.Alpha
	var tail float64
	if a == 1 {
		tail = (1 - q) * xq * math.Log(d.Max/xq)
	} else {
		tail = (1 - q) * a / (1 - a) * math.Pow(xq, a) * (math.Pow(d.Max, 1-a) - math.Pow(xq, 1-a))
	}
	tail += (1 - q) * math.Pow(xq/d.Max, a) * d.Max
	return body + tail
}
