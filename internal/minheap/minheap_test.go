package minheap

import (
	"cmp"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

type entry struct {
	at  int64
	key uint8
}

func less(a, b entry) bool { return a.at < b.at || a.at == b.at && a.key < b.key }

// The heap hands its entries out in the order a sort gives, whatever the
// pushes, pops and filters between (a sorted list as the model; keys are
// distinct, as the heap's users make them).
func TestHeapModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := New(less)
		var model []entry
		used := map[entry]bool{}
		for _, op := range rapid.SliceOfN(rapid.IntRange(0, 9), 1, 300).Draw(t, "ops") {
			switch {
			case op == 0 && len(model) > 0: // filter out the odd times
				h.Filter(func(e entry) bool { return e.at%2 == 0 })
				model = slices.DeleteFunc(model, func(e entry) bool { return e.at%2 != 0 })
			case op < 4 && len(model) > 0:
				slices.SortFunc(model, func(a, b entry) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.key, b.key)) })
				if got := h.Peek(); got != model[0] {
					t.Fatalf("peek %+v, want %+v", got, model[0])
				}
				if got := h.Pop(); got != model[0] {
					t.Fatalf("popped %+v, want %+v", got, model[0])
				}
				delete(used, model[0])
				model = model[1:]
			default:
				e := entry{at: int64(rapid.IntRange(0, 20).Draw(t, "at")), key: uint8(rapid.IntRange(0, 255).Draw(t, "key"))}
				if used[e] {
					continue
				}
				used[e] = true
				h.Push(e)
				model = append(model, e)
			}
			if h.Len() != len(model) || len(h.Items()) != len(model) {
				t.Fatalf("%d in the heap, %d in the model", h.Len(), len(model))
			}
		}
	})
}
