package main_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/client/transport/grpcerr"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// TestHostileRequests is the trial against `omega server`: each
// malformed or hostile request, sent on one connection, gets the status
// code and message shape its case says, every message bounded (a user
// string quoted cut to 64 bytes, with its length); requests of several
// megabytes among them (a name, a selector, one over the message limit)
// end only their own call, so a watch on the same connection keeps
// working and the connection stays up. List refuses unknown kinds as Get
// does, and lists offers and quotas, alone and with every kind.
func TestHostileRequests(t *testing.T) {
	srv := startServer(t, t.TempDir())
	conn, err := grpc.NewClient(srv.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := cellgrpc.NewCellClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// One of every kind.
	m, j, tk := testkit.UID('M', 1, 0), testkit.UID('J', 1, 0), testkit.UID('T', 1, 0)
	q, o := testkit.UID('Q', 1, 0), testkit.UID('O', 1, 0)
	commit := func(ops ...txn.Op) *omegav1.TransactionResult {
		t.Helper()
		r, err := c.Commit(ctx, (&txn.Txn{Component: "admin", Ops: ops}).Proto())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	commit(txn.CreateMachine(testkit.Machine(m, "m0", testkit.Res(1000, 1000))),
		txn.CreateJob(testkit.Job(j, "web", "batch")),
		txn.CreateTask(testkit.Task(tk, j, "web-0", testkit.Res(10, 10))),
		txn.CreateQuota(&omegav1.Quota{Meta: &omegav1.ObjectMeta{Uid: q.String(), Name: "batch-cpu"},
			Spec: &omegav1.QuotaSpec{Scheduler: "batch", Limit: &omegav1.Resources{CpuMillis: 500}}}))
	commit(txn.CreateOffer(&omegav1.Offer{Meta: &omegav1.ObjectMeta{Uid: o.String(), Name: "o-1"}, Spec: &omegav1.OfferSpec{Framework: "fw"}}))

	// A watch on the same connection, from now on.
	w, err := c.Watch(ctx, &cellgrpc.WatchRequest{FromRevision: commit(txn.CreateMachine(testkit.Machine(testkit.UID('M', 2, 0), "m1", testkit.Res(1, 1)))).GetRevision()})
	if err != nil {
		t.Fatal(err)
	}

	list := func(req *cellgrpc.ListRequest) (*omegav1.SnapshotChunk, error) {
		s, err := c.List(ctx, req)
		if err != nil {
			return nil, err
		}
		all := &omegav1.SnapshotChunk{}
		for {
			ch, err := s.Recv()
			if err != nil {
				return nil, err
			}
			all.Machines, all.Jobs, all.Tasks = append(all.Machines, ch.Machines...), append(all.Jobs, ch.Jobs...), append(all.Tasks, ch.Tasks...)
			all.Offers, all.Quotas = append(all.Offers, ch.Offers...), append(all.Quotas, ch.Quotas...)
			if ch.GetLast() {
				return all, nil
			}
		}
	}
	watchErr := func(req *cellgrpc.WatchRequest) error {
		s, err := c.Watch(ctx, req)
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	get := func(kind omegav1.ObjectKind, uid, name string) error {
		_, err := c.Get(ctx, &cellgrpc.GetRequest{Kind: kind, Uid: uid, Name: name})
		return err
	}
	commitErr := func(ops ...*omegav1.Operation) error {
		_, err := c.Commit(ctx, &omegav1.Transaction{Component: "admin", Ops: ops})
		return err
	}
	a := func(n int) string { return strings.Repeat("a", n) }
	const (
		job  = omegav1.ObjectKind_OBJECT_KIND_JOB
		task = omegav1.ObjectKind_OBJECT_KIND_TASK
	)
	cut := func(n int) string { return regexp.QuoteMeta(`"`+a(61)+`…" (`) + fmt.Sprint(n) + ` bytes\)` }
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		msg  string // a regexp the whole message matches
	}{
		{"get: a 64 KiB name", func() error { return get(job, "", a(65536)) }, codes.NotFound,
			`^not found: no OBJECT_KIND_JOB named ` + cut(65536) + `$`},
		{"get: a name over MaxStringBytes", func() error { return get(job, "", a(65537)) }, codes.InvalidArgument,
			`^invalid: get: name is 65537 bytes, over the limit of 65536 \(MaxStringBytes\): no object has it$`},
		{"get: a 20 MiB name", func() error { return get(task, "", a(20<<20)) }, codes.InvalidArgument,
			`^invalid: get: name is 20971520 bytes, over the limit of 65536 \(MaxStringBytes\): no object has it$`},
		{"get: a 64 KiB uid", func() error { return get(task, a(65536), "") }, codes.InvalidArgument,
			`^get: invalid: uid ` + cut(65536) + ` is not a uuid: .*$`},
		{"get: the nil uid", func() error { return get(task, "00000000-0000-0000-0000-000000000000", "") }, codes.InvalidArgument,
			`^get: invalid: uid is the nil uuid$`},
		{"get: neither uid nor name", func() error { return get(task, "", "") }, codes.InvalidArgument,
			`^invalid: get: give a uid or a name, not both or neither$`},
		{"get: kind 99", func() error { return get(99, "", "web") }, codes.InvalidArgument,
			`^invalid: get: kind "99" is not a kind of object$`},
		{"get: no kind", func() error { return get(0, "", "web") }, codes.InvalidArgument,
			`^invalid: get: kind is unspecified: want a kind of object$`},
		{"list: kind 99", func() error { _, err := list(&cellgrpc.ListRequest{Kind: 99}); return err }, codes.InvalidArgument,
			`^invalid: list: kind "99" is not a kind of object$`},
		{"list: kind -1", func() error { _, err := list(&cellgrpc.ListRequest{Kind: -1}); return err }, codes.InvalidArgument,
			`^invalid: list: kind "-1" is not a kind of object$`},
		{"list: a 20 MiB selector", func() error { _, err := list(&cellgrpc.ListRequest{LabelSelector: a(20 << 20)}); return err }, codes.InvalidArgument,
			`^list: invalid: label_selector is 20971520 bytes, over the limit of 4096$`},
		{"list: a selector that does not parse", func() error {
			_, err := list(&cellgrpc.ListRequest{LabelSelector: "tier in (" + a(100)})
			return err
		}, codes.InvalidArgument, `^list: invalid: label_selector "tier in \(a{52}…" \(109 bytes\): at byte \d+: .*$`},
		{"list: a 1 MiB machine uid", func() error { _, err := list(&cellgrpc.ListRequest{MachineUid: a(1 << 20)}); return err }, codes.InvalidArgument,
			`^list: invalid: machine_uid ` + cut(1<<20) + ` is not a uuid: .*$`},
		{"list: a job uid that is no uuid", func() error { _, err := list(&cellgrpc.ListRequest{JobUid: "web"}); return err }, codes.InvalidArgument,
			`^list: invalid: job_uid "web" is not a uuid: .*$`},
		{"watch: a 1 MiB machine uid", func() error { return watchErr(&cellgrpc.WatchRequest{MachineUid: a(1 << 20)}) }, codes.InvalidArgument,
			`^invalid: machine_uid ` + cut(1<<20) + ` is not a uuid: .*$`},
		{"watch: a 20 MiB selector", func() error { return watchErr(&cellgrpc.WatchRequest{LabelSelector: a(20 << 20)}) }, codes.InvalidArgument,
			`^invalid: label_selector is 20971520 bytes, over the limit of 4096$`},
		{"commit: a claim's empty task uid", func() error {
			return commitErr(&omegav1.Operation{Op: &omegav1.Operation_Claim{Claim: &omegav1.ClaimOp{MachineUid: m.String()}}})
		}, codes.InvalidArgument, `^op 0 \(claim\): invalid: task_uid is empty: want a uuid$`},
		{"commit: a delete's empty uid", func() error {
			return commitErr(&omegav1.Operation{Op: &omegav1.Operation_Delete{Delete: &omegav1.DeleteOp{Kind: task}}})
		}, codes.InvalidArgument, `^op 0 \(delete\): invalid: uid is empty: want a uuid$`},
		{"commit: an answer's nil offer uid", func() error {
			return commitErr(&omegav1.Operation{Op: &omegav1.Operation_Answer{Answer: &omegav1.AnswerOp{OfferUid: "00000000-0000-0000-0000-000000000000"}}})
		}, codes.InvalidArgument, `^op 0 \(answer\): invalid: offer_uid is the nil uuid$`},
		{"commit: a 4 MiB evict task uid", func() error {
			return commitErr(&omegav1.Operation{Op: &omegav1.Operation_Evict{Evict: &omegav1.EvictOp{TaskUid: a(4 << 20)}}})
		}, codes.InvalidArgument, `^op 0 \(evict\): invalid: task_uid ` + cut(4<<20) + ` is not a uuid: .*$`},
		{"commit: a 20 MiB job name", func() error {
			jp := testkit.Job(testkit.UID('J', 9, 0), a(20<<20), "batch")
			return commitErr(&omegav1.Operation{Op: &omegav1.Operation_Create{Create: &omegav1.CreateOp{Object: &omegav1.CreateOp_Job{Job: jp}}}})
		}, codes.ResourceExhausted, `^op 0 \(create\): transaction too large: job [0-9a-f-]{36}: meta.name .*$`},
		{"commit: over the message limit", func() error {
			jp := testkit.Job(testkit.UID('J', 9, 1), a(40<<20), "batch")
			return commitErr(&omegav1.Operation{Op: &omegav1.Operation_Create{Create: &omegav1.CreateOp{Object: &omegav1.CreateOp_Job{Job: jp}}}})
		}, codes.ResourceExhausted, `^grpc: received message larger than max \(\d+ vs\. \d+\)$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			s, ok := grpcstatus.FromError(err)
			if !ok || s.Code() != tc.code || !regexp.MustCompile(tc.msg).MatchString(s.Message()) {
				t.Fatalf("%s: %.400q, want %s matching %s", s.Code(), s.Message(), tc.code, tc.msg)
			}
			if n := len(s.Message()); n > grpcerr.MaxMessageBytes {
				t.Errorf("a message of %d bytes", n)
			}
		})
	}

	// List: every kind without one, offers and quotas by their kind.
	all, err := list(&cellgrpc.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Machines) != 2 || len(all.Jobs) != 1 || len(all.Tasks) != 1 || len(all.Offers) != 1 || len(all.Quotas) != 1 {
		t.Fatalf("a List of every kind: %d machines, %d jobs, %d tasks, %d offers, %d quotas; want 2, 1, 1, 1, 1",
			len(all.Machines), len(all.Jobs), len(all.Tasks), len(all.Offers), len(all.Quotas))
	}
	if l, err := list(&cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_OFFER}); err != nil || len(l.Offers) != 1 || len(l.Machines)+len(l.Quotas) != 0 || l.Offers[0].GetMeta().GetUid() != o.String() {
		t.Fatalf("a List of offers: %v %v", l, err)
	}
	if l, err := list(&cellgrpc.ListRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA}); err != nil || len(l.Quotas) != 1 || len(l.Offers)+len(l.Jobs) != 0 {
		t.Fatalf("a List of quotas: %v %v", l, err)
	}
	if l, err := list(&cellgrpc.ListRequest{JobUid: j.String()}); err != nil || len(l.Jobs) != 1 || len(l.Tasks) != 1 || len(l.Offers)+len(l.Quotas)+len(l.Machines) != 0 {
		t.Fatalf("a List of one job: %v %v", l, err)
	}
	if r, err := c.Get(ctx, &cellgrpc.GetRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_QUOTA, Name: "batch-cpu"}); err != nil || r.GetQuota().GetMeta().GetUid() != q.String() {
		t.Fatalf("get a quota by name: %v %v", r, err)
	}
	if r, err := c.Get(ctx, &cellgrpc.GetRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_OFFER, Uid: o.String()}); err != nil || r.GetOffer().GetSpec().GetFramework() != "fw" {
		t.Fatalf("get an offer by uid: %v %v", r, err)
	}

	// The watch opened before the trial still delivers, and the
	// connection never went down.
	rev := commit(txn.CreateMachine(testkit.Machine(testkit.UID('M', 3, 0), "m2", testkit.Res(1, 1)))).GetRevision()
	for {
		rc, err := w.Recv()
		if err != nil {
			t.Fatalf("the watch on the same connection: %v", err)
		}
		if rc.GetRevision() >= rev {
			break
		}
	}
	if st := conn.GetState(); st != connectivity.Ready {
		t.Fatalf("the connection is %s after the trial", st)
	}
}
