package agents

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/omega-cell/omega/internal/minheap"
)

// TestFinishQueueMatchesHeap holds the finish queue to the heap it
// replaced, over random histories: pushes near and far (beyond the ring's
// window, and into the past), pops of what is due at times that creep,
// jump within the window and jump past it, filters, and lookups of the
// first live entry. Entries become stale (dead) as a placement's would, for
// good; the queue may drop stale entries the heap keeps, so what is due is
// compared among the live ones. rapid prints the seed on a failure.
func TestFinishQueueMatchesHeap(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		q := newFinishQueue()
		model := minheap.New(finishLess)
		dead := map[finishEntry]bool{}
		live := func(e finishEntry) bool { return !dead[e] }
		now := int64(rapid.Int64Range(-1e12, 1e12).Draw(rt, "start"))
		var queued []finishEntry // every entry pushed, for picking one to kill
		gen := uint64(0)
		for step := range rapid.IntRange(1, 300).Draw(rt, "steps") {
			switch k := rapid.IntRange(0, 99).Draw(rt, "op"); {
			case k < 45: // push
				var d int64
				switch rapid.IntRange(0, 9).Draw(rt, "horizon") {
				case 0:
					d = -rapid.Int64Range(0, int64(10*time.Second)).Draw(rt, "past")
				case 1, 2:
					d = rapid.Int64Range(0, int64(10*time.Hour)).Draw(rt, "far")
				default:
					d = rapid.Int64Range(0, int64(5*time.Minute)).Draw(rt, "near")
				}
				if rapid.IntRange(0, 9).Draw(rt, "whole second") == 0 {
					d -= (now + d) % int64(time.Second) // on a bucket's edge
				}
				gen++
				var u uuid.UUID
				u[0] = byte(rapid.IntRange(0, 3).Draw(rt, "uid")) // ties on time are broken by uid, then gen
				e := finishEntry{at: now + d, uid: u, gen: gen}
				q.Push(e)
				model.Push(e)
				queued = append(queued, e)
			case k < 75: // what is due
				switch rapid.IntRange(0, 9).Draw(rt, "step") {
				case 0:
					now += rapid.Int64Range(0, int64(30*time.Hour)).Draw(rt, "jump")
				case 1:
					now += rapid.Int64Range(0, int64(30*time.Minute)).Draw(rt, "hop")
				default:
					now += rapid.Int64Range(0, int64(3*time.Second)).Draw(rt, "creep")
				}
				var got, want []finishEntry
				for {
					e, ok := q.popDue(now)
					if !ok {
						break
					}
					if e.at > now {
						rt.Fatalf("step %d: popDue(%d) gave %+v, not due", step, now, e)
					}
					if live(e) {
						got = append(got, e)
					}
				}
				for model.Len() > 0 && model.Peek().at <= now {
					if e := model.Pop(); live(e) {
						want = append(want, e)
					}
				}
				if !slices.Equal(got, want) {
					rt.Fatalf("step %d: due at %d\n got %+v\nwant %+v", step, now, got, want)
				}
			case k < 85: // an entry goes stale
				if len(queued) > 0 {
					dead[queued[rapid.IntRange(0, len(queued)-1).Draw(rt, "kill")]] = true
				}
			case k < 92: // the first live entry
				got, gok := q.first(live)
				var want finishEntry
				wok := false
				rest := slices.Clone(model.Items())
				slices.SortFunc(rest, finishCmp)
				for _, e := range rest {
					if live(e) {
						want, wok = e, true
						break
					}
				}
				if gok != wok || got != want {
					rt.Fatalf("step %d: first = %+v %v, want %+v %v", step, got, gok, want, wok)
				}
			default: // drop the stale ones
				q.Filter(live)
				model.Filter(live)
				if q.Len() != model.Len() {
					rt.Fatalf("step %d: %d entries after a filter, the heap has %d", step, q.Len(), model.Len())
				}
			}
			if q.Len() > model.Len() {
				rt.Fatalf("step %d: %d entries, the heap has %d", step, q.Len(), model.Len())
			}
		}
	})
}
