package schedulers

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// scanEveryTask is the service scheduler's decision as it was before it
// gave up on a class whose task found no machine: every task scanned.
func scanEveryTask(s *Service, v client.View, req Request, env Env) Decision {
	s.idx.Refresh(v)
	p := NewPlacer(v, req.Placed)
	d := Decision{AllOrNothing: req.Job.Gang(), Considered: len(req.Pending)}
	for _, class := range Classes(req.Pending) {
		for _, t := range class.Tasks {
			var best *txn.Machine
			var bestScore float64
			found := 0
			Sample(&s.idx, v, p, env, class.Request, class.Constraints, s.Limit, s.Limit, func(m *txn.Machine) bool {
				score := p.BestFitScore(m, class.Request) + s.SpreadWeight*float64(p.OnDomain(m))
				if best == nil || score < bestScore || (score == bestScore && bytes.Compare(m.UID[:], best.UID[:]) < 0) {
					best, bestScore = m, score
				}
				found++
				return found < s.Candidates || (s.SpreadWeight > 0 && p.OnDomain(best) > 0 && p.DomainsUsed() < s.idx.Domains())
			})
			if best == nil {
				d.Unplaceable++
				continue
			}
			d.Ops = append(d.Ops, txn.Claim(t.UID, best.UID, class.Request, t.Version))
			p.Take(best, class.Request)
		}
	}
	return gangWhole(d)
}

// claimed lists the tasks a decision claims, in order.
func claimed(d Decision) []uuid.UUID {
	var out []uuid.UUID
	for _, op := range d.Ops {
		if op.Kind == txn.OpClaim {
			out = append(out, op.Task)
		}
	}
	return out
}

// In a cell no larger than Limit, a scan covers every machine: once a task
// of a class found none, no later task of the class can (the decision's
// claims only take room), and the service scheduler counts them unplaceable
// without scanning — deciding exactly as when it scanned every task, its
// random source left where the scans would have left it.
func TestServiceGivesUpOnAFullClassExactlyWithinLimit(t *testing.T) {
	forSeeds(t, 20, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		ms := c.addMachines(uniform(30, 4000, 16*gib, 5)...)
		// Five machines with room for one task each, the rest full.
		c.fill(4000, gib, ms[5:]...)
		c.fill(2000, gib, ms[:5]...)
		job, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 40, cpu: 2000, mem: gib})
		v := c.view()
		req := request(t, v, job)
		e1, e2 := env(seed), env(seed)
		got := NewService().Decide(v, req, e1)
		want := scanEveryTask(NewService(), v, req, e2)
		if len(got.Ops) != 5 || got.Unplaceable != 35 {
			t.Fatalf("claims %d, unplaceable %d; want 5 and 35", len(got.Ops), got.Unplaceable)
		}
		if opsString(got.Ops) != opsString(want.Ops) || got.Unplaceable != want.Unplaceable {
			t.Fatalf("decision %s (%d unplaceable); scanning every task: %s (%d)", opsString(got.Ops), got.Unplaceable, opsString(want.Ops), want.Unplaceable)
		}
		if a, b := e1.Rand.Uint64(), e2.Rand.Uint64(); a != b {
			t.Fatalf("random source left at %x; scanning every task leaves it at %x", a, b)
		}
	})
}

// In a cell larger than Limit a scan that found no machine covered only
// part of it, and another task's scan might find one; like Borg, which
// scores one task per equivalence class, the scheduler gives up on the
// class for this attempt: no task of a class is placed after one of it
// found no machine. (Scanning every task, a later task often found the one
// machine with room that the first task's scan missed.)
func TestServiceGivesUpOnAClassLargerThanItsLimit(t *testing.T) {
	laterPlaced := 0
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := newCell(t, seed)
			ms := c.addMachines(uniform(10, 4000, 16*gib, 0)...)
			c.fill(4000, gib, ms[1:]...)
			c.fill(2000, gib, ms[0]) // room for one task
			job, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 20, cpu: 2000, mem: gib})
			v := c.view()
			req := request(t, v, job)
			s := NewService()
			s.Limit = 3
			d := s.Decide(v, req, env(seed))
			cl := claimed(d)
			if len(cl)+d.Unplaceable != 20 || len(cl) > 1 {
				t.Fatalf("claims %d, unplaceable %d of 20 tasks (room for one)", len(cl), d.Unplaceable)
			}
			if len(cl) == 1 && cl[0] != req.Pending[0].UID {
				t.Fatalf("task %s placed after the class's first task found no machine", cl[0])
			}
			old := NewService()
			old.Limit = 3
			if cl := claimed(scanEveryTask(old, v, req, env(seed))); len(cl) == 1 && cl[0] != req.Pending[0].UID {
				laterPlaced++
			}
		})
	}
	if laterPlaced == 0 {
		t.Fatal("scanning every task never placed a later task of the class: the test does not tell the two apart")
	}
}

// The machine index answers for the view it was brought to only: a scheduler
// that found the cell full places tasks once a later view shows room
// (same machines), and its decisions are those of a scheduler without a
// cache, on the same view again or on a new one.
func TestSampleRoomCacheFollowsTheView(t *testing.T) {
	forSeeds(t, 10, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		ms := c.addMachines(uniform(40, 4000, 16*gib, 4)...)
		filler, fills := c.addJob("filler", jobSpec{kind: batchKind, scheduler: "other", tasks: len(ms), cpu: 4000, mem: gib})
		_ = filler
		var ops []txn.Op
		for i, m := range ms {
			ops = append(ops, txn.Claim(fills[i], m, txn.Resources{CPU: 4000, Memory: gib}, c.state().Revision()))
		}
		c.commit(ops...)
		bj, _ := c.addJob("b", jobSpec{kind: batchKind, scheduler: "batch", tasks: 30, cpu: 1000, mem: gib})
		sj, _ := c.addJob("s", jobSpec{kind: serviceKind, scheduler: "service", tasks: 10, cpu: 1000, mem: gib})
		full := c.view()
		for _, sc := range []struct {
			name  string
			fresh func() Scheduler
			job   uuid.UUID
		}{{"batch", func() Scheduler { return NewBatch() }, bj}, {"service", func() Scheduler { return NewService() }, sj}} {
			warm := sc.fresh()
			if d := warm.Decide(full, request(t, full, sc.job), env(seed)); len(d.Ops) != 0 {
				t.Fatalf("%s: %d claims in a full cell", sc.name, len(d.Ops))
			}
			// Same view again: the cache's answers are the view's.
			a := warm.Decide(full, request(t, full, sc.job), env(seed+1))
			b := sc.fresh().Decide(full, request(t, full, sc.job), env(seed+1))
			if opsString(a.Ops) != opsString(b.Ops) || a.Unplaceable != b.Unplaceable {
				t.Fatalf("%s, same view: cached %s; uncached %s", sc.name, opsString(a.Ops), opsString(b.Ops))
			}
		}
		// Half the fillers finish: their machines have room in the new view.
		ops = ops[:0]
		for i := 0; i < len(fills); i += 2 {
			ops = append(ops, txn.SetStatus(fills[i], omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "done"))
		}
		c.commit(ops...)
		roomy := c.view()
		for _, sc := range []struct {
			name string
			warm Scheduler
			job  uuid.UUID
		}{{"batch", NewBatch(), bj}, {"service", NewService(), sj}} {
			sc.warm.Decide(full, request(t, full, sc.job), env(seed))
			a := sc.warm.Decide(roomy, request(t, roomy, sc.job), env(seed+2))
			var b Decision
			if sc.name == "batch" {
				b = NewBatch().Decide(roomy, request(t, roomy, sc.job), env(seed+2))
			} else {
				b = NewService().Decide(roomy, request(t, roomy, sc.job), env(seed+2))
			}
			if len(a.Ops) == 0 {
				t.Fatalf("%s: no claim once the view shows room (the cache answered for the full view)", sc.name)
			}
			if opsString(a.Ops) != opsString(b.Ops) || a.Unplaceable != b.Unplaceable {
				t.Fatalf("%s, new view: cached %s; uncached %s", sc.name, opsString(a.Ops), opsString(b.Ops))
			}
			checkClaimsFit(t, roomy, a)
		}
	})
}

// A runner's job keeps its placed tasks sorted between attempts, and the
// order follows tasks placed and lost.
func TestJobStatePlacedUIDsStaySorted(t *testing.T) {
	ids := newIDs(7)
	j := &jobState{}
	var all []uuid.UUID
	for range 50 {
		u := ids.next()
		all = append(all, u)
		j.place(u)
		j.place(u) // again: no change
		if got := j.placedUIDs(); len(got) != len(all) || !slices.IsSortedFunc(got, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }) {
			t.Fatalf("placed %d, sorted list %d long, sorted %t", len(all), len(got), slices.IsSortedFunc(got, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }))
		}
	}
	r := &Runner{jobs: map[uuid.UUID]*jobState{}}
	job := ids.next()
	j.UID = job
	r.jobs[job] = j
	j.queued = true // Lost does not queue it again
	r.Lost(job, &txn.Task{UID: all[3]}, t0)
	got := j.placedUIDs()
	if len(got) != len(all)-1 || slices.Contains(got, all[3]) {
		t.Fatalf("after a loss: %d placed, lost task listed %t", len(got), slices.Contains(got, all[3]))
	}
	j.forget()
	if got := j.placedUIDs(); len(got) != 0 {
		t.Fatalf("after forget: %d placed", len(got))
	}
}

// placedSeen is the batch scheduler recording how many placed tasks each
// decision was given (it keeps Batch's readsPlaced).
type placedSeen struct {
	*Batch
	seen []int
}

func (s *placedSeen) Decide(v client.View, req Request, env Env) Decision {
	s.seen = append(s.seen, len(req.Placed))
	return s.Batch.Decide(v, req, env)
}

// The runner looks a job's placed tasks up for the batch scheduler only
// when a DIFFERENT_MACHINES constraint makes it read them, and that
// constraint still holds across attempts.
func TestRunnerGivesBatchPlacedTasksOnlyForDifferentMachines(t *testing.T) {
	forSeeds(t, 8, func(t *testing.T, seed uint64) {
		for _, diff := range []bool{false, true} {
			c := newCell(t, seed)
			c.addMachines(uniform(3, 8000, 32*gib, 3)...)
			spec := jobSpec{kind: batchKind, scheduler: "batch", tasks: 4, cpu: 1000, mem: gib}
			if diff {
				spec.constraints = []*omegav1.Constraint{{Operator: omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES}}
			} else {
				spec.cpu = 8000 // three fit, one to a machine
			}
			job, tasks := c.addJob("b", spec)
			s := &placedSeen{Batch: NewBatch()}
			s.Tries = 4 // every machine
			r := c.runner(s, "batch-0", seed, testConfig(), nil)
			r.Submit(job, t0)
			a := begin(t, r, t0)
			if a.Decision.Unplaceable != 1 || len(a.Txn.Ops) != 3 {
				t.Fatalf("different machines %t: first attempt %d claims, %d unplaceable", diff, len(a.Txn.Ops), a.Decision.Unplaceable)
			}
			finish(t, r, a, t0)
			added := c.addMachines(machineSpec{cpu: 8000, mem: 32 * gib, domain: "d0"})
			at := nextReady(t, r)
			a = begin(t, r, at)
			if len(a.Txn.Ops) != 1 || a.Txn.Ops[0].Machine != added[0] {
				t.Fatalf("different machines %t: second attempt %s; want the last task on the new machine %s", diff, opsString(a.Txn.Ops), added[0])
			}
			finish(t, r, a, at)
			want := []int{0, 0}
			if diff {
				want = []int{0, 3}
			}
			if !slices.Equal(s.seen, want) {
				t.Fatalf("different machines %t: placed tasks given %v, want %v", diff, s.seen, want)
			}
			seen := map[uuid.UUID]bool{}
			for _, u := range tasks {
				if m := c.task(u).Machine; seen[m] {
					t.Fatalf("different machines %t: two tasks on %s", diff, m)
				} else {
					seen[m] = true
				}
			}
		}
	})
}

// A scheduler's MachineIndex follows the cell from view to view through what
// the views' tables of machines do not share: over a run of commits (its
// own decisions, fillers claimed, fillers finished, a machine added, a
// machine added), each kind and placement decides on every view what a
// twin whose index is rebuilt from each view decides there with the same
// random source, and the index holds each machine as the view does.
func TestMachineIndexFollowsTheCell(t *testing.T) {
	kinds := []struct {
		name  string
		fresh func() Scheduler
	}{
		{"batch best-fit", func() Scheduler { return NewBatch() }},
		{"batch random-first-fit", func() Scheduler { b := NewBatch(); b.Placement = PlacementRandomFirstFit; return b }},
		{"service best-fit", func() Scheduler { return NewService() }},
		{"service random-first-fit", func() Scheduler { s := NewService(); s.Placement = PlacementRandomFirstFit; return s }},
	}
	forSeeds(t, 6, func(t *testing.T, seed uint64) {
		for _, k := range kinds {
			c := newCell(t, seed)
			ms := c.addMachines(uniform(30, 4000, 16*gib, 3)...)
			// warm's index follows the cell; twin's is rebuilt before every
			// decision (randomized first fit keeps its candidates' order
			// from decision to decision, so the twin has lived as long).
			warm, twin := k.fresh(), k.fresh()
			var fillers []uuid.UUID
			for step := range 24 {
				switch step % 6 {
				case 0, 3:
					// Fillers take most of a third of the machines.
					var on []uuid.UUID
					for i := int(seed+uint64(step)) % 3; i < len(ms); i += 3 {
						if m := c.machine(ms[i]); m.Capacity.CPU-m.Allocated.CPU >= 3000 && m.Capacity.Memory-m.Allocated.Memory >= 12*gib {
							on = append(on, ms[i])
						}
					}
					if len(on) > 0 {
						c.fill(3000, 12*gib, on...)
					}
					v := c.view()
					v.RangeTasks(func(tk *txn.Task) bool {
						if tk.Placed() && !slices.Contains(fillers, tk.UID) {
							fillers = append(fillers, tk.UID)
						}
						return true
					})
				case 1, 4:
					// Half the fillers so far finish.
					var ops []txn.Op
					for i := step % 2; i < len(fillers); i += 2 {
						if tk := c.task(fillers[i]); tk.Placed() {
							ops = append(ops, txn.SetStatus(fillers[i], omegav1.TaskState_TASK_STATE_SUCCEEDED, 0, "done"))
						}
					}
					if len(ops) > 0 {
						c.commit(ops...)
					}
				case 2:
					ms = append(ms, c.addMachines(uniform(1, 4000, 16*gib, 3)...)...)
				case 5:
					// Two idle machines leave the cell (the index merges the
					// set without them).
					var ops []txn.Op
					for i := 0; i < len(ms) && len(ops) < 2; i++ {
						if c.machine(ms[i]).Tasks == 0 {
							ops = append(ops, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, ms[i], 0))
							ms = slices.Delete(ms, i, i+1)
							i--
						}
					}
					if len(ops) > 0 {
						c.commit(ops...)
					}
				}
				job, _ := c.addJob("j", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1 + step%7, cpu: 1500, mem: 2 * gib})
				v := c.view()
				req := request(t, v, job)
				a := warm.Decide(v, req, env(seed*100+uint64(step)))
				index(twin).ok = false // rebuilt from the view
				b := twin.Decide(v, req, env(seed*100+uint64(step)))
				if opsString(a.Ops) != opsString(b.Ops) || a.Unplaceable != b.Unplaceable {
					t.Fatalf("%s, step %d: the scheduler whose index followed the cell decided %s (%d unplaceable), its twin rebuilding it %s (%d)",
						k.name, step, opsString(a.Ops), a.Unplaceable, opsString(b.Ops), b.Unplaceable)
				}
				checkClaimsFit(t, v, a)
				x := index(warm)
				if !x.current(v) || x.Len() != v.NumMachines() {
					t.Fatalf("%s, step %d: index current %t with %d machines, the view has %d", k.name, step, x.current(v), x.Len(), v.NumMachines())
				}
				for i, u := range x.uids {
					if m, ok := v.Machine(u); !ok || x.cur[i] != slotOf(m) {
						t.Fatalf("%s, step %d: index holds machine %s as %+v, the view as %+v", k.name, step, u, x.cur[i], m)
					}
				}
				if len(a.Ops) > 0 && step%2 == 0 {
					c.commitDecision(v, a)
				}
			}
		}
	})
}

// index is a built-in scheduler's MachineIndex.
func index(s Scheduler) *MachineIndex {
	switch s := s.(type) {
	case *Batch:
		return &s.idx
	case *Service:
		return &s.idx
	}
	panic(fmt.Sprintf("no index in %T", s))
}

// Schedulers that share one MachineIndex (Env.Machines, as the simulation's
// runners do) decide, in turn on the cell's successive views, what each
// decides with an index of its own.
func TestSharedMachineIndex(t *testing.T) {
	forSeeds(t, 4, func(t *testing.T, seed uint64) {
		c := newCell(t, seed)
		ms := c.addMachines(uniform(25, 4000, 16*gib, 5)...)
		mk := []func() Scheduler{
			func() Scheduler { return NewBatch() },
			func() Scheduler { s := NewService(); s.Placement = PlacementRandomFirstFit; return s },
			func() Scheduler { b := NewBatch(); b.Placement = PlacementRandomFirstFit; return b },
		}
		shared := new(MachineIndex)
		var with, own []Scheduler
		for _, f := range mk {
			with, own = append(with, f()), append(own, f())
		}
		for step := range 30 {
			k := step % len(mk)
			if step%4 == 3 {
				c.fill(1000, 2*gib, ms[step%len(ms)])
			}
			job, _ := c.addJob("j", jobSpec{kind: batchKind, scheduler: "batch", tasks: 1 + step%5, cpu: 1500, mem: 3 * gib})
			v := c.view()
			req := request(t, v, job)
			e := env(seed*1000 + uint64(step))
			e.Machines = shared
			a := with[k].Decide(v, req, e)
			b := own[k].Decide(v, req, env(seed*1000+uint64(step)))
			if opsString(a.Ops) != opsString(b.Ops) || a.Unplaceable != b.Unplaceable {
				t.Fatalf("step %d, scheduler %d: with the shared index %s (%d unplaceable), with its own %s (%d)",
					step, k, opsString(a.Ops), a.Unplaceable, opsString(b.Ops), b.Unplaceable)
			}
			if !shared.current(v) {
				t.Fatalf("step %d: the shared index is not at the view the decision used", step)
			}
			if len(a.Ops) > 0 {
				c.commitDecision(v, a)
			}
		}
	})
}
