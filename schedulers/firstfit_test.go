package schedulers

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/omega-cell/omega/txn"
)

// Randomized first fit (the paper's simulator's), for every kind that takes
// it, against a simple model: on a cell of machines with random free room,
// a job of identical tasks gets exactly as many placed as fit — the sum
// over machines of how many tasks each one's free room holds, up to the
// job's size — every claim fits its machine, what a decision claims never
// passes a machine's room, and the store commits the decision whole. The
// same seed decides the same claims.
func TestRandomFirstFitPlacesWhatFits(t *testing.T) {
	kinds := map[string]func() Scheduler{
		"batch":      func() Scheduler { b := NewBatch(); b.Placement = PlacementRandomFirstFit; return b },
		"service":    func() Scheduler { s := NewService(); s.Placement = PlacementRandomFirstFit; return s },
		"monolithic": func() Scheduler { m := NewMonolithic(); m.SetPlacement(PlacementRandomFirstFit); return m },
	}
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		kind := rapid.SampledFrom([]string{"batch", "service", "monolithic"}).Draw(rt, "kind")
		n := rapid.IntRange(1, 40).Draw(rt, "machines")
		c := newCell(t, seed)
		ms := c.addMachines(uniform(n, 4000, 4000, 3)...)
		used := make([]int64, n)
		_, fillers := c.addJob("filler", jobSpec{kind: batchKind, scheduler: "other", tasks: n, cpu: 1, mem: 1})
		var ops []txn.Op
		for i, m := range ms {
			used[i] = rapid.Int64Range(0, 4000).Draw(rt, fmt.Sprintf("used%d", i))
			if rapid.IntRange(0, 3).Draw(rt, fmt.Sprintf("full%d", i)) > 0 {
				used[i] = 4000 // most machines full: first fit must look past them
			}
			if used[i] > 0 {
				ops = append(ops, txn.Claim(fillers[i], m, txn.Resources{CPU: used[i], Memory: used[i]}, c.task(fillers[i]).Version))
			}
		}
		if len(ops) > 0 {
			c.commit(ops...)
		}
		size := rapid.Int64Range(100, 2500).Draw(rt, "task")
		tasks := rapid.IntRange(1, 30).Draw(rt, "tasks")
		jk := batchKind
		if kind == "service" || rapid.Bool().Draw(rt, "service job") {
			jk = serviceKind
		}
		job, _ := c.addJob("job", jobSpec{kind: jk, scheduler: kind, tasks: tasks, cpu: size, mem: size})
		fit := 0
		for i := range ms {
			fit += int((4000 - used[i]) / size)
		}
		want := min(fit, tasks)
		decide := func() Decision {
			v := c.view()
			return kinds[kind]().Decide(v, request(t, v, job), env(seed))
		}
		d := decide()
		claims := map[string]int64{}
		var n2 int
		for _, op := range d.Ops {
			if op.Kind != txn.OpClaim {
				continue
			}
			n2++
			claims[op.Machine.String()] += op.Resources.CPU
		}
		if n2 != want || d.Unplaceable != tasks-want {
			rt.Fatalf("seed %d, %s: %d claims and %d unplaceable; the model places %d of %d", seed, kind, n2, d.Unplaceable, want, tasks)
		}
		for i, m := range ms {
			if claims[m.String()] > 4000-used[i] {
				rt.Fatalf("seed %d: %d claimed on machine %d, which has %d free", seed, claims[m.String()], i, 4000-used[i])
			}
		}
		if again := decide(); fmt.Sprint(again.Ops) != fmt.Sprint(d.Ops) {
			rt.Fatalf("seed %d: the same seed decided differently", seed)
		}
		if res := c.commitDecision(c.view(), d); !res.Conflicted() && res.Committed != len(d.Ops) {
			rt.Fatalf("seed %d: %+v", seed, res)
		}
		c.checkInvariants()
	})
}

// Every built-in kind takes the "placement" parameter, and refuses one it
// does not know, naming it.
func TestPlacementParam(t *testing.T) {
	for _, kind := range []string{"batch", "service", "monolithic", "mapreduce"} {
		if _, err := New(kind, Params{"placement": "random-first-fit"}); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		if _, err := New(kind, Params{"placement": "worst-fit"}); err == nil || !strings.Contains(err.Error(), `"worst-fit"`) {
			t.Errorf("%s with worst-fit: %v", kind, err)
		}
	}
}
