package remote_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"google.golang.org/grpc"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/client/transport/transporttest"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// serve starts the store's gRPC server on a loopback port and returns its
// address; everything stops when t ends.
func serve(t testing.TB, st *store.Store, small bool) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(server.ServerOptions()...)
	svc := server.New(st)
	if small {
		svc.ChunkBytes = 512 // many chunks and pieces even for a small cell
	}
	svc.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-done
	})
	return lis.Addr().String()
}

func backend(small bool) transporttest.Backend {
	return func(t testing.TB, o store.Options) transport.Transport {
		st := storekit.Open(t, o)
		tr, err := remote.Dial(serve(t, st, small))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
}

// TestConformance: the gRPC transport, talking to the store's server over
// loopback, passes the suite every transport runs — with the default
// chunk size, and with chunks so small that every snapshot and most
// revisions cross the wire in pieces.
func TestConformance(t *testing.T) {
	t.Run("default-chunks", func(t *testing.T) { transporttest.Run(t, backend(false)) })
	t.Run("small-chunks", func(t *testing.T) { transporttest.Run(t, backend(true)) })
}

// TestClientOverGRPC: the client library runs on the gRPC transport as on
// the in-process one: it lists, syncs to its own commits and keeps a copy.
func TestClientOverGRPC(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	tr, err := remote.Dial(serve(t, st, false))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx := context.Background()
	c, err := client.New(ctx, tr, client.Config{Component: "remote", Clock: testkit.NewClock(time.Unix(0, 0)), Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	m := c.NewUID()
	tx := c.NewTxn(c.View())
	tx.Ops = []txn.Op{txn.CreateMachine(testkit.Machine(m, "m0", testkit.Res(4000, 1<<34)))}
	res, err := c.Commit(ctx, tx)
	if err != nil || res.Committed != 1 {
		t.Fatalf("commit over gRPC: %+v %v", res, err)
	}
	if err := c.SyncTo(ctx, res.Revision); err != nil {
		t.Fatal(err)
	}
	if err := testkit.DiffStates(st.Snapshot(), c.View().State, testkit.Compare{}); err != nil {
		t.Fatalf("the client's copy over gRPC: %v", err)
	}
}

// commitOps commits ops straight to the store.
func commitOps(t *testing.T, st *store.Store, ops ...txn.Op) txn.Result {
	t.Helper()
	r, err := st.Commit(context.Background(), &txn.Txn{ViewRevision: st.Revision(), Component: "test", Ops: ops})
	if err != nil || r.Conflicted() {
		t.Fatalf("commit: %+v %v", r, err)
	}
	return r
}

// The server evaluates filters: List by kind, label selector, machine and
// job; Get by uid and by name (an ambiguous name is an error naming its
// matches); a watch filtered by machine sees that machine's tasks placed,
// finishing and evicted, and nothing of another machine's; a watch by
// selector sees the matching objects only; a bad selector is ErrInvalid
// saying where.
func TestServerFilters(t *testing.T) {
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	tr, err := remote.Dial(serve(t, st, true))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx := context.Background()
	m0, m1, j := testkit.UID('m', 0, 0), testkit.UID('m', 1, 0), testkit.UID('j', 0, 0)
	mk := func(u uuid.UUID, name string, lbl map[string]string) *omegav1.Task {
		p := testkit.Task(u, j, name, testkit.Res(100, 100))
		p.Meta.Labels = lbl
		return p
	}
	a, b, c := testkit.UID('t', 0, 0), testkit.UID('t', 1, 0), testkit.UID('t', 2, 0)
	commitOps(t, st,
		txn.CreateMachine(testkit.Machine(m0, "m0", testkit.Res(4000, 4000))),
		txn.CreateMachine(testkit.Machine(m1, "m1", testkit.Res(4000, 4000))),
		txn.CreateJob(testkit.Job(j, "web", "service")),
		txn.CreateTask(mk(a, "dup", map[string]string{"tier": "web"})),
		txn.CreateTask(mk(b, "dup", map[string]string{"tier": "db"})),
		txn.CreateTask(mk(c, "c", nil)))
	start := st.Revision()
	onM0, err := tr.WatchFiltered(ctx, start, remote.Filter{Machine: m0})
	if err != nil {
		t.Fatal(err)
	}
	defer onM0.Close()
	web, err := tr.WatchFiltered(ctx, start, remote.Filter{Selector: "tier=web"})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	ver := func(u uuid.UUID) uint64 { tk, _ := st.Snapshot().Task(u); return tk.Version }
	commitOps(t, st, txn.Claim(a, m0, testkit.Res(100, 100), ver(a)), txn.Claim(b, m1, testkit.Res(100, 100), ver(b)))
	r2 := commitOps(t, st, txn.ForceEvict(a, ver(a), "drain"))
	commitOps(t, st, txn.SetStatus(b, omegav1.TaskState_TASK_STATE_SUCCEEDED, ver(b), "done")) // m1 only: no revision for onM0

	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	collect := func(w transport.Watch, want int) []*txn.WriteSet {
		var got []*txn.WriteSet
		for len(got) < want {
			sets, err := w.Next(wctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, sets...)
		}
		return got
	}
	sets := collect(onM0, 2)
	for _, ws := range sets {
		for _, ch := range ws.Changes {
			if ch.Machine != nil && ch.Machine.UID != m0 || ch.Task != nil && ch.Task.UID != a || ch.Job != nil {
				t.Fatalf("the m0 watch got a change of %v at %d", ch.UID(), ws.Revision)
			}
		}
	}
	if last := sets[len(sets)-1]; last.Revision != r2.Revision {
		t.Fatalf("the m0 watch's last revision %d, want the eviction's %d", last.Revision, r2.Revision)
	}
	if more, _ := onM0.Poll(0); len(more) != 0 {
		t.Fatalf("the m0 watch got revision %d, which touched only m1", more[0].Revision)
	}
	for _, ws := range collect(web, 2) {
		for _, ch := range ws.Changes {
			if ch.Task == nil || ch.Task.UID != a {
				t.Fatalf("the tier=web watch got a change of %v", ch.UID())
			}
		}
	}

	l, err := tr.List(ctx, &cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_TASK, LabelSelector: "tier in (web,db)"})
	if err != nil || len(l.Tasks) != 2 || len(l.Machines)+len(l.Jobs) != 0 || l.Revision != st.Revision() {
		t.Fatalf("list by selector: %+v %v", l, err)
	}
	if l, err := tr.List(ctx, &cellgrpc.ListRequest{JobUid: j.String(), Kind: omegav1.ObjectKind_OBJECT_KIND_TASK}); err != nil || len(l.Tasks) != 3 {
		t.Fatalf("list by job: %+v %v", l, err)
	}
	if l, err := tr.List(ctx, &cellgrpc.ListRequest{}); err != nil || len(l.Tasks) != 3 || len(l.Machines) != 2 || len(l.Jobs) != 1 {
		t.Fatalf("list everything: %+v %v", l, err)
	}
	if g, err := tr.Get(ctx, omegav1.ObjectKind_OBJECT_KIND_JOB, "", "web"); err != nil || g.GetJob().GetMeta().GetUid() != j.String() {
		t.Fatalf("get job by name: %v %v", g, err)
	}
	if g, err := tr.Get(ctx, omegav1.ObjectKind_OBJECT_KIND_TASK, c.String(), ""); err != nil || g.GetTask().GetMeta().GetName() != "c" {
		t.Fatalf("get task by uid: %v %v", g, err)
	}
	if _, err := tr.Get(ctx, omegav1.ObjectKind_OBJECT_KIND_TASK, "", "dup"); !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), a.String()) || !strings.Contains(err.Error(), b.String()) {
		t.Fatalf("an ambiguous name: %v, want ErrInvalid naming both", err)
	}
	if _, err := tr.Get(ctx, omegav1.ObjectKind_OBJECT_KIND_MACHINE, "", "nope"); !errors.Is(err, txn.ErrNotFound) {
		t.Fatalf("an unknown name: %v", err)
	}
	if _, err := tr.List(ctx, &cellgrpc.ListRequest{LabelSelector: "tier in (web"}); !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), "at byte") {
		t.Fatalf("a bad selector: %v", err)
	}
}

// A watch survives a server restart: the server drains (the stream ends as
// unavailable), commits land while it is down, a new server comes up on the
// same address, and the watch delivers every revision once, in order,
// without its reader doing anything. A restart after which the watch's
// revision is gone fails the watch with ErrCompacted.
func TestWatchResumesAfterRestart(t *testing.T) {
	for _, compacted := range []bool{false, true} {
		name := "resumes"
		if compacted {
			name = "compacted"
		}
		t.Run(name, func(t *testing.T) {
			o := storekit.Options(t, store.DurabilityNone)
			o.HistoryChanges = 8
			st := storekit.Open(t, o)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := lis.Addr().String()
			start := func(lis net.Listener) (*grpc.Server, *server.Service, chan struct{}) {
				g := grpc.NewServer(server.ServerOptions()...)
				svc := server.New(st)
				svc.Register(g)
				done := make(chan struct{})
				go func() { defer close(done); g.Serve(lis) }()
				return g, svc, done
			}
			g, svc, done := start(lis)
			tr, err := remote.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			ctx := context.Background()
			w, err := tr.Watch(ctx, st.Revision())
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			var want []uint64
			add := func(i int) {
				r := commitOps(t, st, txn.CreateMachine(testkit.Machine(testkit.UID('m', uint32(i), 0), "m", testkit.Res(1, 1))))
				want = append(want, r.Revision)
			}
			add(0)
			svc.Drain()
			g.Stop()
			<-done
			n := 2
			if compacted {
				n = 12 // more than the history holds
			}
			for i := 1; i <= n; i++ {
				add(i)
			}
			lis2, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatalf("listen again on %s: %v", addr, err)
			}
			g2, _, done2 := start(lis2)
			defer func() { g2.Stop(); <-done2 }()
			add(n + 1)
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			var got []uint64
			for len(got) < len(want) {
				sets, err := w.Next(wctx, 0)
				if compacted && errors.Is(err, transport.ErrCompacted) {
					return // the reader lists again
				}
				if err != nil {
					t.Fatalf("after %v: %v", got, err)
				}
				for _, ws := range sets {
					got = append(got, ws.Revision)
				}
			}
			if compacted {
				t.Fatalf("revisions %v delivered, though the history dropped some", got)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("watched %v, committed %v", got, want)
			}
		})
	}
}
