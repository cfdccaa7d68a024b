package grpcerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/txn"
)

// TestStatusRoundTrip: every typed error the store returns crosses the wire
// (as a marshalled gRPC status) and comes back matching its sentinel with
// errors.Is, with the operation's index and kind in an *txn.OpError, its
// message as it was, under the gRPC code a foreign client would read.
func TestStatusRoundTrip(t *testing.T) {
	storeFailed := errors.New("store failed")
	over := func(st *status.Status) *status.Status {
		b, err := proto.Marshal(st.Proto())
		if err != nil {
			t.Fatal(err)
		}
		var p = st.Proto()
		proto.Reset(p)
		if err := proto.Unmarshal(b, p); err != nil {
			t.Fatal(err)
		}
		return status.FromProto(p)
	}
	for _, w := range wireErrors {
		for _, opIdx := range []int{-1, 0, 7} {
			var err error = fmt.Errorf("%w: task 1234: meta.name is not valid UTF-8", w.err)
			if opIdx >= 0 {
				err = &txn.OpError{Index: opIdx, Kind: txn.OpClaim, Err: err}
			}
			st := over(Status(err, storeFailed))
			if st.Code() != w.grpc {
				t.Errorf("%v: gRPC code %s, want %s", w.err, st.Code(), w.grpc)
			}
			back := Error(st)
			if !errors.Is(back, w.err) {
				t.Errorf("%v at op %d: the far side's error %v does not match", w.err, opIdx, back)
			}
			if back.Error() != err.Error() {
				t.Errorf("message %q, was %q", back.Error(), err.Error())
			}
			var oe *txn.OpError
			if got := errors.As(back, &oe); got != (opIdx >= 0) || (got && (oe.Index != opIdx || oe.Kind != txn.OpClaim)) {
				t.Errorf("%v at op %d: OpError %v %+v", w.err, opIdx, got, oe)
			}
			for _, other := range wireErrors {
				if other.err != w.err && errors.Is(back, other.err) {
					t.Errorf("%v also matches %v", w.err, other.err)
				}
			}
		}
	}
	// The store's own failures are transport.ErrUnavailable; the context's errors
	// their gRPC codes; anything else Unknown; nil OK.
	if back := Error(over(Status(fmt.Errorf("%w: sync: disk gone", storeFailed), storeFailed))); !errors.Is(back, transport.ErrUnavailable) {
		t.Errorf("store failure: %v", back)
	}
	for _, c := range []struct {
		err, sentinel error
		code          codes.Code
	}{{context.Canceled, context.Canceled, codes.Canceled}, {fmt.Errorf("commit: %w", context.DeadlineExceeded), context.DeadlineExceeded, codes.DeadlineExceeded}} {
		st := over(Status(c.err))
		if st.Code() != c.code || !errors.Is(Error(st), c.sentinel) {
			t.Errorf("%v: %s, %v", c.err, st.Code(), Error(st))
		}
	}
	if st := Status(errors.New("boom")); st.Code() != codes.Unknown || Error(st) == nil {
		t.Errorf("unknown error: %s", st.Code())
	}
	if Status(nil).Code() != codes.OK || Error(Status(nil)) != nil || Error(nil) != nil {
		t.Error("nil is not OK")
	}
	// A status from a server that knows nothing of omega maps by its code.
	if err := Error(status.New(codes.Unavailable, "connection refused")); !errors.Is(err, transport.ErrUnavailable) {
		t.Errorf("bare Unavailable: %v", err)
	}
}
