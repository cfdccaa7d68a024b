package replay

import (
	"slices"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"
)

// The ends' heap hands them out in the order a sort by (time, task,
// generation) gives, whatever the pushes and pops between.
func TestExitsHeapModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h exits
		var model []exitAt
		for _, op := range rapid.SliceOfN(rapid.IntRange(0, 3), 1, 200).Draw(t, "ops") {
			if op == 0 && len(model) > 0 {
				slices.SortFunc(model, func(a, b exitAt) int {
					m := exits{a, b}
					switch {
					case m.less(0, 1):
						return -1
					case m.less(1, 0):
						return 1
					}
					return 0
				})
				want := model[0]
				model = model[1:]
				if got := h.pop(); got != want {
					t.Fatalf("popped %+v, want %+v", got, want)
				}
				continue
			}
			var u uuid.UUID
			u[15] = byte(rapid.IntRange(0, 3).Draw(t, "uid"))
			e := exitAt{at: int64(rapid.IntRange(0, 20).Draw(t, "at")), uid: u, gen: uint64(rapid.IntRange(0, 2).Draw(t, "gen"))}
			h.push(e)
			model = append(model, e)
		}
		if len(h) != len(model) {
			t.Fatalf("%d in the heap, %d in the model", len(h), len(model))
		}
	})
}
