package grpcerr

// Statuses from a hostile or broken peer, and errors wrapped before they
// cross: Error reads each as its contract says, without a panic.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	spb "google.golang.org/genproto/googleapis/rpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/txn"
)

func overTheWire(t *testing.T, p *spb.Status) *status.Status {
	t.Helper()
	b, err := proto.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	q := &spb.Status{}
	if err := proto.Unmarshal(b, q); err != nil {
		t.Fatal(err)
	}
	return status.FromProto(q)
}

func anyDetail(t *testing.T, d *omegav1.ErrorDetail) *anypb.Any {
	a, err := anypb.New(d)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestErrorOfAHostileStatus: hostile statuses do not panic Error, and each
// reads back as the contract says: a detail of a code it knows is that sentinel (an *txn.OpError only
// with a non-negative index); anything else maps by its gRPC code
// (Unavailable to ErrUnavailable; OK to nil; the rest stays the status's
// own error, matching no typed sentinel).
func TestErrorOfAHostileStatus(t *testing.T) {
	url := "type.googleapis.com/omega.v1.ErrorDetail"
	const none = -1 // no *txn.OpError
	cases := map[string]struct {
		p     *spb.Status
		want  error // the sentinel; nil: none of the typed ones
		index int   // the OpError's index, or none
		isNil bool
	}{
		"unknown code 99":      {p: &spb.Status{Code: int32(codes.InvalidArgument), Details: []*anypb.Any{anyDetail(t, &omegav1.ErrorDetail{Code: 99, OpIndex: 3})}}, index: none},
		"code -1":              {p: &spb.Status{Code: int32(codes.InvalidArgument), Details: []*anypb.Any{anyDetail(t, &omegav1.ErrorDetail{Code: -1})}}, index: none},
		"code 0 (unspecified)": {p: &spb.Status{Code: int32(codes.Internal), Details: []*anypb.Any{anyDetail(t, &omegav1.ErrorDetail{Code: 0, OpIndex: 1})}}, index: none},
		"op index MaxInt32":    {p: &spb.Status{Code: int32(codes.InvalidArgument), Details: []*anypb.Any{anyDetail(t, &omegav1.ErrorDetail{Code: 1, OpIndex: math.MaxInt32, OpKind: 2})}}, want: txn.ErrInvalid, index: math.MaxInt32},
		"op index -2":          {p: &spb.Status{Code: int32(codes.InvalidArgument), Details: []*anypb.Any{anyDetail(t, &omegav1.ErrorDetail{Code: 1, OpIndex: -2})}}, want: txn.ErrInvalid, index: none},
		"op index MinInt32":    {p: &spb.Status{Code: int32(codes.InvalidArgument), Details: []*anypb.Any{anyDetail(t, &omegav1.ErrorDetail{Code: 1, OpIndex: math.MinInt32})}}, want: txn.ErrInvalid, index: none},
		"op kind 1000 and -1": {p: &spb.Status{Code: int32(codes.InvalidArgument), Details: []*anypb.Any{
			anyDetail(t, &omegav1.ErrorDetail{Code: 1, OpKind: 1000}), anyDetail(t, &omegav1.ErrorDetail{Code: 2, OpKind: -1})}}, want: txn.ErrInvalid, index: 0},
		"garbage detail bytes":   {p: &spb.Status{Code: int32(codes.InvalidArgument), Details: []*anypb.Any{{TypeUrl: url, Value: []byte{0xff, 0xff, 0xff}}}}, index: none},
		"unknown detail type":    {p: &spb.Status{Code: int32(codes.Unavailable), Details: []*anypb.Any{{TypeUrl: "type.googleapis.com/x.Y", Value: []byte{1, 2}}}}, want: transport.ErrUnavailable, index: none},
		"empty type url":         {p: &spb.Status{Code: int32(codes.Unknown), Details: []*anypb.Any{{}}}, index: none},
		"nil detail":             {p: &spb.Status{Code: int32(codes.Unknown), Details: []*anypb.Any{nil}}, index: none},
		"detail on OK":           {p: &spb.Status{Code: 0, Details: []*anypb.Any{anyDetail(t, &omegav1.ErrorDetail{Code: 1})}}, isNil: true},
		"grpc code out of range": {p: &spb.Status{Code: 12345, Message: "x"}, index: none},
	}
	typed := append([]error{transport.ErrUnavailable}, txn.ErrInvalid, txn.ErrNotFound, txn.ErrAlreadyExists, txn.ErrTooLarge,
		txn.ErrNotPending, txn.ErrIllegalState, txn.ErrInUse, txn.ErrFutureRevision, txn.ErrCompacted, txn.ErrRejected)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := Error(overTheWire(t, tc.p))
			if tc.isNil {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("a failed status read back as no error")
			}
			for _, s := range typed {
				if errors.Is(err, s) != (s == tc.want) {
					t.Errorf("errors.Is(%v, %v) = %t, want %t", err, s, errors.Is(err, s), s == tc.want)
				}
			}
			var oe *txn.OpError
			switch ok := errors.As(err, &oe); {
			case tc.index == none && ok:
				t.Errorf("an *txn.OpError (index %d), want none", oe.Index)
			case tc.index != none && (!ok || oe.Index != tc.index):
				t.Errorf("OpError %v, want index %d", oe, tc.index)
			}
		})
	}
	// An ErrorDetail's type with another message's bytes: whatever it
	// decodes to, no panic and an error.
	a, _ := anypb.New(&omegav1.Outcome{Code: 3, Detail: "zz"})
	a.TypeUrl = url
	if err := Error(overTheWire(t, &spb.Status{Code: int32(codes.InvalidArgument), Details: []*anypb.Any{a}})); err == nil {
		t.Error("a status with a mislabelled detail read back as no error")
	}
}

// TestStatusKeepsAWrappedOpError: "the message reads as it did on the
// server": an OpError wrapped by the server (e.g. Expire's "expire: %w")
// keeps the wrapping's message on the far side, and its sentinel; Status of
// an *OpError with no Err does not panic.
func TestStatusKeepsAWrappedOpError(t *testing.T) {
	inner := &txn.OpError{Index: 2, Kind: txn.OpDelete, Err: fmt.Errorf("%w: job x", txn.ErrNotFound)}
	err := fmt.Errorf("expire: %w", inner)
	back := Error(Status(err))
	if back.Error() != err.Error() {
		t.Errorf("message %q on the far side, %q on the server", back.Error(), err.Error())
	}
	if !errors.Is(back, txn.ErrNotFound) {
		t.Errorf("sentinel lost")
	}
	// An *OpError with no Err (a Go value, not wire input).
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Status(&txn.OpError{Err: nil}) panics: %v", r)
			}
		}()
		Status(&txn.OpError{Index: 1, Kind: txn.OpClaim})
	}()
}

// TestStatusBoundsItsMessages: an error of many megabytes (a message that
// quotes a request whole) becomes a status whose message and detail
// messages are at most MaxMessageBytes, cut at a character's start with
// the length after, and still reads back as its sentinel and operation.
// Unbounded, gRPC sends it as a trailer over grpc-go's 16 MiB header
// limit, and the client ends the whole connection (COMPRESSION_ERROR).
func TestStatusBoundsItsMessages(t *testing.T) {
	huge := strings.Repeat("é", 10<<20) // 20 MiB, two bytes a character
	for _, err := range []error{
		fmt.Errorf("%w: job %s", txn.ErrNotFound, huge),
		fmt.Errorf("commit: %w", &txn.OpError{Index: 3, Kind: txn.OpEvict, Err: fmt.Errorf("%w: %s", txn.ErrInvalid, huge)}),
		fmt.Errorf("%w: %s", context.Canceled, huge),
		errors.New(huge),
	} {
		st := Status(err)
		msgs := []string{st.Message()}
		for _, d := range st.Details() {
			if e, ok := d.(*omegav1.ErrorDetail); ok {
				msgs = append(msgs, e.GetMessage(), e.GetOpMessage())
			}
		}
		for _, m := range msgs {
			if len(m) > MaxMessageBytes || !utf8.ValidString(m) {
				t.Fatalf("%s: a message of %d bytes (valid UTF-8: %t)", st.Code(), len(m), utf8.ValidString(m))
			}
		}
		if !strings.HasSuffix(st.Message(), fmt.Sprintf("… (%d bytes)", len(err.Error()))) {
			t.Errorf("%s: the message ends %q, want its length", st.Code(), st.Message()[len(st.Message())-40:])
		}
		back := Error(st)
		for _, s := range []error{txn.ErrNotFound, txn.ErrInvalid} {
			if errors.Is(err, s) != errors.Is(back, s) {
				t.Errorf("%s: errors.Is(%v) %t on the far side", st.Code(), s, errors.Is(back, s))
			}
		}
		var oe *txn.OpError
		if errors.As(err, &oe) && (!errors.As(back, &oe) || oe.Index != 3) {
			t.Errorf("the operation at fault is lost: %v", oe)
		}
	}
}
