package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// handlerLog records what an informer hands.
type handlerLog struct {
	log  []string
	fail error // returned by the next Apply
}

func (h *handlerLog) Relisted(s *txn.State) error {
	h.log = append(h.log, fmt.Sprintf("relisted@%d machines=%d", s.Revision(), s.NumMachines()))
	return nil
}

func (h *handlerLog) Apply(ws *txn.WriteSet) error {
	if err := h.fail; err != nil {
		h.fail = nil
		return err
	}
	h.log = append(h.log, fmt.Sprintf("apply@%d", ws.Revision))
	return nil
}

func (h *handlerLog) take() []string {
	out := h.log
	h.log = nil
	return out
}

// An informer's life, scripted: List hands a view, Poll each revision once
// and in order, Wait blocks until one arrives (bounded by its context), a
// watch that fell behind is a fresh view (counted), and the handler's error
// comes back from Poll, the next Poll listing again so nothing is lost.
func TestInformerScript(t *testing.T) {
	st := openStore(t, store.DurabilityNone, 8)
	g := newIDs(5)
	c, _ := newClient(t, inproc.New(st, inproc.WithoutSharing()), "informed", 5, DefaultRetryPolicy())
	h := &handlerLog{}
	inf, err := NewInformer(c, h)
	if err != nil {
		t.Fatal(err)
	}
	defer inf.Close()
	ctx := context.Background()
	if err := inf.Poll(ctx); err == nil {
		t.Fatal("Poll before List succeeded")
	}
	mustCommit(t, st, txn.CreateMachine(machineProto(g.next(), "m0", 1000, 1000)))
	if err := inf.List(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, "list", h.take(), "relisted@1 machines=1")

	// Nothing new: Wait returns at its deadline, having handed nothing.
	wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
	err = inf.Wait(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || len(h.take()) != 0 {
		t.Fatalf("Wait on a quiet cell: %v", err)
	}
	mustCommit(t, st, txn.CreateMachine(machineProto(g.next(), "m1", 1000, 1000)))
	mustCommit(t, st, txn.CreateMachine(machineProto(g.next(), "m2", 1000, 1000)))
	if err := inf.Wait(ctx); err != nil { // something is there: no blocking
		t.Fatal(err)
	}
	if err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, "two revisions", h.take(), "apply@2", "apply@3")
	if inf.Revision() != 3 {
		t.Fatalf("revision %d, want 3", inf.Revision())
	}

	// The handler fails: Poll says so.
	h.fail = errors.New("handler broke")
	mustCommit(t, st, txn.CreateMachine(machineProto(g.next(), "m3", 1000, 1000)))
	if err := inf.Poll(ctx); err == nil || err.Error() != "handler broke" {
		t.Fatalf("Poll with a failing handler: %v", err)
	}
	// The revision it failed on is not lost: the next Poll lists again.
	if err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, "after the handler's error", h.take(), "relisted@4 machines=4")

	// Behind the retained history: a fresh view, once.
	for i := range 20 {
		mustCommit(t, st, txn.CreateMachine(machineProto(g.next(), fmt.Sprintf("f%d", i), 1, 1)))
	}
	if err := inf.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, "relist", h.take(), fmt.Sprintf("relisted@%d machines=24", st.Revision()))
	if inf.Relists() != 2 || inf.Revision() != st.Revision() {
		t.Fatalf("relists %d at %d, want 2 at %d", inf.Relists(), inf.Revision(), st.Revision())
	}
}

func want(t *testing.T, step string, got []string, w ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("%s: %q, want %q", step, got, w)
	}
}
