package alibaba2018

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/omega-cell/omega/bench/trace"
)

// The queue of ends hands them out by time, then in the order they were
// queued, whatever the pushes and pops between (a sorted list as model);
// each comes out whole.
func TestEndsHeapModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h ends
		type queued struct {
			e   trace.Event
			seq int64
		}
		var model []queued
		seq := int64(0)
		for _, pop := range rapid.SliceOfN(rapid.Bool(), 1, 300).Draw(t, "ops") {
			if pop && len(model) > 0 {
				slices.SortStableFunc(model, func(a, b queued) int {
					if a.e.Time != b.e.Time {
						return int(a.e.Time - b.e.Time)
					}
					return int(a.seq - b.seq)
				})
				want := model[0]
				model = model[1:]
				if got := h.pop(); got != want.e {
					t.Fatalf("popped %+v, want %+v", got, want.e)
				}
				continue
			}
			seq++
			e := trace.Event{Time: int64(rapid.IntRange(0, 30).Draw(t, "time")), Job: seq, Name: "t"}
			h.push(e)
			model = append(model, queued{e, seq})
		}
		if h.len() != len(model) {
			t.Fatalf("%d queued, %d in the model", h.len(), len(model))
		}
	})
}
