package agents

// The Reporter's protocol as scripts (testdata/reporter/*.txt, run by
// internal/script; go test -rewrite writes their outputs anew): an owner
// watches the cell at a revision, adds reports (operations, each with a
// role naming what it stands for) at the versions it watched, and commits
// the batch in one transaction through a real client on an in-memory
// store; other writers move the cell under it, and the transport can be
// told to fail a commit. Objects are named by their names (machines m0,
// m1, ...), times as offsets from t0.
//
// Commands:
//
//	machines n=N                     machines of 4 cores and 16 GiB
//	task name=T on=M                 a task created and claimed on M
//	watch                            the owner's view: the cell as it is now
//	add role=R task=T state=S [msg=X] [expect=any]
//	    a report that T is S (RUNNING, SUCCEEDED, FAILED, LOST) at the
//	    version the view has (expect=any: whatever the version)
//	add role=R machine=M state=S     a report that M is S (UP, DOWN)
//	commit-other task=T state=S      another writer sets T's state
//	commit-other evict=T             another writer evicts T (a drain)
//	commit-other claim=T on=M        another writer creates T and claims it on M
//	fail-next                        the transport fails the next commit
//	commit t=D                       Reporter.Commit, viewed at the watch,
//	                                 stamped t0+D: the transaction sent,
//	                                 and each role's outcome
//	batch                            what the batch holds
//	reset                            Reporter.Reset
//	counters                         Reporter.Counters
//	state                            the machines and tasks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/internal/script"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

func TestReporterScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/reporter/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no reporter scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) {
			const seed = 1
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("uids and the client from seed %d", seed)
				}
			})
			st := openStore(t, 0)
			tr := &brokenLink{Transport: inproc.New(st)}
			cl, err := client.New(context.Background(), tr, client.Config{Component: "agent/m0", Clock: &vclock{now: t0}, Rand: rand.New(rand.NewPCG(seed, 7))})
			if err != nil {
				t.Fatalf("client: %v", err)
			}
			t.Cleanup(cl.Cell().Close)
			h := &reporterScript{st: st, tr: tr, ids: newIDs(seed), rep: NewReporter[string](cl), byName: map[string]uuid.UUID{}, names: map[uuid.UUID]string{}}
			script.Run(t, f, h.do)
		})
	}
}

// brokenLink fails the next commit when told to, before it reaches
// the store (as a connection lost on the way would).
type brokenLink struct {
	client.Transport
	failNext bool
	last     string // the last transaction sent, written out
}

var errLinkLost = errors.New("injected: connection lost before the commit reached the store")

func (f *brokenLink) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	f.last = fmt.Sprintf("sent %d ops viewed at %d, %s, %s, as %s at %s",
		len(tx.Ops), tx.ViewRevision, strings.TrimPrefix(tx.Conflict.String(), "CONFLICT_MODE_"),
		strings.TrimPrefix(tx.Commit.String(), "COMMIT_MODE_"), tx.Component, time.Unix(0, tx.UnixNanos).Sub(t0))
	if f.failNext {
		f.failNext = false
		return txn.Result{}, errLinkLost
	}
	return f.Transport.Commit(ctx, tx)
}

type reporterScript struct {
	st       *store.Store
	tr       *brokenLink
	ids      *ids
	rep      *Reporter[string]
	view     *txn.State // the owner's view (watch)
	machines int
	byName   map[string]uuid.UUID
	names    map[uuid.UUID]string
}

func (h *reporterScript) do(t *testing.T, c *script.Command) string {
	switch c.Name {
	case "machines":
		n := int(c.Int(t, "n", 1))
		var ops []txn.Op
		var names []string
		for range n {
			u := h.ids.next()
			name := fmt.Sprintf("m%d", h.machines)
			h.machines++
			h.nameAs(u, name)
			names = append(names, name)
			ops = append(ops, txn.CreateMachine(testkit.Machine(u, name, res(4000, 16*gib))))
		}
		r := commitAt(t, h.st, t0, ops...)
		return fmt.Sprintf("revision %d: %s", r.Revision, strings.Join(names, " "))
	case "task":
		name := c.String(t, "name", "")
		u := h.ids.next()
		h.nameAs(u, name)
		r := commitAt(t, h.st, t0,
			txn.CreateTask(taskProto(u, name, 500, gib, 0)),
			txn.Claim(u, h.uid(t, c, "on"), res(500, gib), 0))
		return fmt.Sprintf("revision %d: %s ASSIGNED on %s", r.Revision, name, c.String(t, "on", ""))
	case "watch":
		h.view = h.st.Snapshot()
		return fmt.Sprintf("view at %d", h.view.Revision())
	case "add":
		return h.add(t, c)
	case "commit-other":
		return h.other(t, c)
	case "fail-next":
		h.tr.failNext = true
		return ""
	case "commit":
		return h.commit(t, c)
	case "batch":
		return h.batch()
	case "reset":
		h.rep.Reset()
		return h.batch()
	case "counters":
		return fmt.Sprintf("%+v", h.rep.Counters())
	case "state":
		return h.state()
	}
	c.Fatalf(t, "unknown command")
	return ""
}

func (h *reporterScript) nameAs(u uuid.UUID, name string) { h.names[u], h.byName[name] = name, u }

func (h *reporterScript) uid(t *testing.T, c *script.Command, key string) uuid.UUID {
	t.Helper()
	name := c.String(t, key, "")
	u, ok := h.byName[name]
	if !ok {
		c.Fatalf(t, "%s=%q: no such object", key, name)
	}
	return u
}

func (h *reporterScript) name(u uuid.UUID) string {
	if n, ok := h.names[u]; ok {
		return n
	}
	return u.String()[:8]
}

func taskState(t *testing.T, c *script.Command, s string) omegav1.TaskState {
	v, ok := omegav1.TaskState_value["TASK_STATE_"+s]
	if !ok {
		c.Fatalf(t, "state=%q: not a task state", s)
	}
	return omegav1.TaskState(v)
}

func (h *reporterScript) add(t *testing.T, c *script.Command) string {
	if h.view == nil {
		c.Fatalf(t, "watch first: reports are made at the versions of a view")
	}
	role := c.String(t, "role", "")
	state := c.String(t, "state", "")
	switch {
	case c.Has("task"):
		tk, ok := h.view.Task(h.uid(t, c, "task"))
		if !ok {
			c.Fatalf(t, "the view has no task %s", c.String(t, "task", ""))
		}
		version := tk.Version
		if c.String(t, "expect", "") == "any" {
			version = 0
		}
		h.rep.Add(txn.SetStatus(tk.UID, taskState(t, c, state), version, c.String(t, "msg", "")), role)
	case c.Has("machine"):
		m, ok := h.view.Machine(h.uid(t, c, "machine"))
		if !ok {
			c.Fatalf(t, "the view has no machine %s", c.String(t, "machine", ""))
		}
		v, ok := omegav1.MachineState_value["MACHINE_STATE_"+state]
		if !ok {
			c.Fatalf(t, "state=%q: not a machine state", state)
		}
		pm := m.Proto()
		pm.Status.State = omegav1.MachineState(v)
		h.rep.Add(txn.PutMachine(pm, m.Version), role)
	default:
		c.Fatalf(t, "task= or machine= is required")
	}
	return h.batch()
}

// other commits another writer's change straight to the store.
func (h *reporterScript) other(t *testing.T, c *script.Command) string {
	s := h.st.Snapshot()
	var op []txn.Op
	var what string
	switch {
	case c.Has("evict"):
		tk, _ := s.Task(h.uid(t, c, "evict"))
		op = []txn.Op{txn.ForceEvict(tk.UID, tk.Version, "drain")}
		what = h.name(tk.UID) + " evicted"
	case c.Has("claim"):
		name := c.String(t, "claim", "")
		u := h.ids.next()
		h.nameAs(u, name)
		op = []txn.Op{txn.CreateTask(taskProto(u, name, 500, gib, 0)), txn.Claim(u, h.uid(t, c, "on"), res(500, gib), 0)}
		what = fmt.Sprintf("%s ASSIGNED on %s", name, c.String(t, "on", ""))
	case c.Has("task"):
		tk, _ := s.Task(h.uid(t, c, "task"))
		st := taskState(t, c, c.String(t, "state", ""))
		op = []txn.Op{txn.SetStatus(tk.UID, st, tk.Version, "")}
		what = h.name(tk.UID) + " " + c.String(t, "state", "")
	default:
		c.Fatalf(t, "evict=, claim= or task= is required")
	}
	r := commitAt(t, h.st, t0, op...)
	return fmt.Sprintf("revision %d: %s", r.Revision, what)
}

func (h *reporterScript) commit(t *testing.T, c *script.Command) string {
	if h.view == nil {
		c.Fatalf(t, "watch first")
	}
	d, err := time.ParseDuration(c.String(t, "t", "0s"))
	if err != nil {
		c.Fatalf(t, "t: %v", err)
	}
	before := h.st.Revision()
	h.tr.last = ""
	res, err := h.rep.Commit(context.Background(), h.view.Revision(), t0.Add(d).UnixNano())
	var b strings.Builder
	if h.tr.last != "" {
		b.WriteString(h.tr.last + "\n")
	}
	switch {
	case err != nil:
		fmt.Fprintf(&b, "error: %v\nthe store is still at %d\n", err, h.st.Revision())
	case res.Revision == 0 && len(res.Outcomes) == 0:
		fmt.Fprintf(&b, "nothing sent (the store is still at %d)\n", before)
	default:
		fmt.Fprintf(&b, "committed %d of %d at revision %d\n", res.Committed, len(res.Outcomes), res.Revision)
		for i, role := range h.rep.Roles() {
			o := res.Outcomes[i]
			fmt.Fprintf(&b, "  %s: %s\n", role, strings.TrimPrefix(o.Code.String(), "OUTCOME_CODE_"))
		}
	}
	b.WriteString(h.batch())
	return b.String()
}

func (h *reporterScript) batch() string {
	if h.rep.Len() == 0 {
		return "batch empty"
	}
	return fmt.Sprintf("batch %d: %s", h.rep.Len(), strings.Join(h.rep.Roles(), " "))
}

func (h *reporterScript) state() string {
	s := h.st.Snapshot()
	var lines []string
	s.RangeMachines(func(m *txn.Machine) bool {
		lines = append(lines, fmt.Sprintf("%s %s v%d, %d tasks", m.Name(), strings.TrimPrefix(m.State.String(), "MACHINE_STATE_"), m.Version, m.Tasks))
		return true
	})
	s.RangeTasks(func(tk *txn.Task) bool {
		l := fmt.Sprintf("%s %s v%d", tk.Name(), strings.TrimPrefix(tk.State.String(), "TASK_STATE_"), tk.Version)
		if tk.Machine != uuid.Nil {
			l += " on " + h.name(tk.Machine)
		}
		for _, at := range []struct {
			what string
			ns   int64
		}{{"started", tk.Started}, {"finished", tk.Finished}} {
			if at.ns != 0 {
				l += fmt.Sprintf(", %s at %s", at.what, time.Unix(0, at.ns).Sub(t0))
			}
		}
		if m := tk.Message(); m != "" {
			l += fmt.Sprintf(" %q", m)
		}
		lines = append(lines, l)
		return true
	})
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
