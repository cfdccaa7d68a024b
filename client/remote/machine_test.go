package remote_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// project is the part of s one machine's agent follows: the machine and the
// tasks placed on it (or last placed on it, until deleted).
func project(t *testing.T, s *txn.State, machine uuid.UUID) *txn.State {
	t.Helper()
	r := txn.NewRestorer(s.Revision())
	if m, ok := s.Machine(machine); ok {
		if err := r.Machine(m.Proto()); err != nil {
			t.Fatal(err)
		}
	}
	s.RangeTasks(func(tk *txn.Task) bool {
		if tk.Machine == machine {
			if err := r.Task(tk.Proto(), tk.Version); err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
	out, err := r.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMachineTransport: a client on one machine's part of the cell, under
// a randomized history (claims, evictions, reports, deletions, machines
// coming and going), holds exactly the cell's projection on that machine
// at every revision it syncs to — nothing of other machines' tasks, the
// evictions elsewhere included.
func TestMachineTransport(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
		d := storekit.NewDriver(t, st, seed)
		for st.Snapshot().NumMachines() < 3 {
			d.Step()
		}
		var machine uuid.UUID
		st.Snapshot().RangeMachines(func(m *txn.Machine) bool { machine = m.UID; return false })
		tr, err := remote.Dial(serve(t, st, true))
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c, err := client.New(ctx, tr.ForMachine(machine), client.Config{Component: "agent/x", Clock: testkit.NewClock(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(seed, 1))})
		if err != nil {
			t.Fatal(err)
		}
		others, compared := 0, 0
		for i := range 400 {
			rev := d.Step()
			if i%7 != 0 {
				continue
			}
			if err := c.SyncTo(ctx, rev); err != nil {
				t.Fatalf("seed %d: sync to %d: %v", seed, rev, err)
			}
			got := c.View().State
			if got.Revision() != rev {
				continue // a later revision came in the same batch: compared next time
			}
			compared++
			want := project(t, st.Snapshot(), machine)
			if err := testkit.DiffStates(want, got, testkit.Compare{IgnoreSeq: true}); err != nil {
				t.Fatalf("seed %d, revision %d: %v", seed, rev, err)
			}
			st.Snapshot().RangeTasks(func(tk *txn.Task) bool {
				if tk.Machine != machine {
					others++
				}
				return true
			})
		}
		if others == 0 || compared < 20 {
			t.Fatalf("seed %d: %d comparisons, %d tasks seen elsewhere: the test shows nothing", seed, compared, others)
		}
		c.Cell().Close()
	}
}

// TestMachineTransportTaskLeaves: a task that leaves the machine in a
// transaction that also moves, ends or deletes it — evicted and claimed on
// another machine, evicted and deleted, evicted and ended, deleted while
// placed — leaves the machine's copy, which stays the cell's projection
// (found by review: the filter once kept only a task's current machine and
// every bare eviction, so the copy kept the task and refused the machine's
// release).
func TestMachineTransportTaskLeaves(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for name, leave := range map[string]func(tk *txn.Task, other uuid.UUID) []txn.Op{
		"evict and claim elsewhere": func(tk *txn.Task, other uuid.UUID) []txn.Op {
			return []txn.Op{txn.ForceEvict(tk.UID, tk.Version, "move"), txn.Claim(tk.UID, other, tk.Request(), tk.Version)}
		},
		"evict and delete": func(tk *txn.Task, _ uuid.UUID) []txn.Op {
			return []txn.Op{txn.ForceEvict(tk.UID, tk.Version, "gone"), txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tk.UID, 0)}
		},
		"evict and end": func(tk *txn.Task, _ uuid.UUID) []txn.Op { // arrives as a deletion of an ended task
			return []txn.Op{txn.ForceEvict(tk.UID, tk.Version, "stop"), txn.SetStatus(tk.UID, omegav1.TaskState_TASK_STATE_KILLED, tk.Version, "killed")}
		},
		"delete placed": func(tk *txn.Task, _ uuid.UUID) []txn.Op {
			return []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_TASK, tk.UID, 0)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
			a, b, task := testkit.UID('m', 1, 0), testkit.UID('m', 2, 0), testkit.UID('t', 1, 0)
			res, err := st.Commit(ctx, &txn.Txn{Component: "setup", Ops: []txn.Op{
				txn.CreateMachine(testkit.Machine(a, "a", testkit.Res(4000, 4<<30))),
				txn.CreateMachine(testkit.Machine(b, "b", testkit.Res(4000, 4<<30))),
				txn.CreateTask(testkit.Task(task, uuid.Nil, "t", testkit.Res(1000, 1<<20))),
				txn.Claim(task, a, testkit.Res(1000, 1<<20), 0),
			}})
			if err != nil || res.Committed != 4 {
				t.Fatalf("setup: %+v %v", res, err)
			}
			tr, err := remote.Dial(serve(t, st, false))
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			c, err := client.New(ctx, tr.ForMachine(a), client.Config{Component: "agent/a", Clock: testkit.NewClock(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(1, 1))})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Cell().Close()
			tk, _ := st.Snapshot().Task(task)
			res, err = st.Commit(ctx, &txn.Txn{Component: "x", ViewRevision: st.Revision(), Ops: leave(tk, b)})
			if err != nil || res.Conflicted() {
				t.Fatalf("the task leaves: %+v %v", res, err)
			}
			if err := c.SyncTo(ctx, res.Revision); err != nil {
				t.Fatalf("the machine's copy after the task left: %v", err)
			}
			if err := testkit.DiffStates(project(t, st.Snapshot(), a), c.View().State, testkit.Compare{IgnoreSeq: true}); err != nil {
				t.Fatal(err)
			}
			if _, held := c.View().Task(task); held {
				t.Fatal("the copy still holds the task that left")
			}
		})
	}
}
