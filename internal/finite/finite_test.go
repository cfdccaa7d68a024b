package finite

import (
	"math"
	"strings"
	"testing"
)

type inner struct {
	Wait float64 `json:"wait_mean_s"`
	skip float64
}

type report struct {
	Seed       int                `json:"seed"`
	Schedulers []inner            `json:"schedulers"`
	Host       *inner             `json:"host,omitempty"`
	ByName     map[string]float64 `json:"by_name"`
	Ignored    float64            `json:"-"`
}

func TestCheck(t *testing.T) {
	ok := report{Schedulers: []inner{{Wait: 1, skip: math.NaN()}}, Ignored: math.Inf(1), ByName: map[string]float64{"a": 2}}
	if err := Check("", ok); err != nil {
		t.Fatalf("finite report: %v", err)
	}
	for _, tc := range []struct {
		r    report
		want string
	}{
		{report{Schedulers: []inner{{Wait: 1}, {Wait: math.NaN()}}}, "schedulers[1].wait_mean_s = NaN"},
		{report{Host: &inner{Wait: math.Inf(-1)}}, "host.wait_mean_s = -Inf"},
		{report{ByName: map[string]float64{"b": math.Inf(1), "a": math.NaN()}}, "by_name.a = NaN"},
	} {
		err := Check("", tc.r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check: %v, want %q", err, tc.want)
		}
	}
	if err := Check("samples", []float64{0, math.NaN()}); err == nil || !strings.HasPrefix(err.Error(), "samples[1] = NaN") {
		t.Errorf("with a root: %v", err)
	}
}

func TestJSON(t *testing.T) {
	b, err := JSON(inner{Wait: 1.5})
	if err != nil || string(b) != "{\n  \"wait_mean_s\": 1.5\n}\n" {
		t.Fatalf("JSON: %q, %v", b, err)
	}
	b, err = JSON([]inner{{Wait: 1}, {Wait: math.Inf(-1)}})
	if err == nil || b != nil || !strings.Contains(err.Error(), "[1].wait_mean_s") {
		t.Fatalf("JSON of an infinite figure: %q, %v", b, err)
	}
}
