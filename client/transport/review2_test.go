package transport

// Second independent review: hostile statuses and wrapped errors.

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	spb "google.golang.org/genproto/googleapis/rpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

func review2Over(t *testing.T, p *spb.Status) *status.Status {
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

func review2Detail(t *testing.T, d *omegav1.ErrorDetail) *anypb.Any {
	a, err := anypb.New(d)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Hostile statuses must not panic, and an OpError on the far side must
// carry a usable (non-negative) index.
func TestReview2HostileStatus(t *testing.T) {
	url := "type.googleapis.com/omega.v1.ErrorDetail"
	cases := map[string]*spb.Status{
		"unknown code 99":        {Code: int32(codes.InvalidArgument), Details: []*anypb.Any{review2Detail(t, &omegav1.ErrorDetail{Code: 99, OpIndex: 3})}},
		"code -1":                {Code: int32(codes.InvalidArgument), Details: []*anypb.Any{review2Detail(t, &omegav1.ErrorDetail{Code: -1})}},
		"code 0 (unspecified)":   {Code: int32(codes.Internal), Details: []*anypb.Any{review2Detail(t, &omegav1.ErrorDetail{Code: 0, OpIndex: 1})}},
		"op index MaxInt32":      {Code: int32(codes.InvalidArgument), Details: []*anypb.Any{review2Detail(t, &omegav1.ErrorDetail{Code: 1, OpIndex: math.MaxInt32, OpKind: 2})}},
		"op index -2":            {Code: int32(codes.InvalidArgument), Details: []*anypb.Any{review2Detail(t, &omegav1.ErrorDetail{Code: 1, OpIndex: -2})}},
		"op index MinInt32":      {Code: int32(codes.InvalidArgument), Details: []*anypb.Any{review2Detail(t, &omegav1.ErrorDetail{Code: 1, OpIndex: math.MinInt32})}},
		"op kind 1000 and -1":    {Code: int32(codes.InvalidArgument), Details: []*anypb.Any{review2Detail(t, &omegav1.ErrorDetail{Code: 1, OpKind: 1000}), review2Detail(t, &omegav1.ErrorDetail{Code: 2, OpKind: -1})}},
		"garbage detail bytes":   {Code: int32(codes.InvalidArgument), Details: []*anypb.Any{{TypeUrl: url, Value: []byte{0xff, 0xff, 0xff}}}},
		"unknown detail type":    {Code: int32(codes.Unavailable), Details: []*anypb.Any{{TypeUrl: "type.googleapis.com/x.Y", Value: []byte{1, 2}}}},
		"empty type url":         {Code: int32(codes.Unknown), Details: []*anypb.Any{{}}},
		"nil detail":             {Code: int32(codes.Unknown), Details: []*anypb.Any{nil}},
		"detail on OK":           {Code: 0, Details: []*anypb.Any{review2Detail(t, &omegav1.ErrorDetail{Code: 1})}},
		"grpc code out of range": {Code: 12345, Message: "x"},
		"detail as ErrorDetail of the wrong message": {Code: int32(codes.InvalidArgument), Details: []*anypb.Any{func() *anypb.Any {
			a, _ := anypb.New(&omegav1.Outcome{Code: 3, Detail: "zz"})
			a.TypeUrl = url
			return a
		}()}},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("PANIC: %v", r)
				}
			}()
			st := review2Over(t, p)
			err := Error(st)
			var oe *txn.OpError
			if errors.As(err, &oe) && oe.Index < 0 {
				t.Errorf("OpError with index %d", oe.Index)
			}
			t.Logf("-> %v (%T)", err, err)
			_ = fmt.Sprint(err)
		})
	}
}

// "the message reads as it did on the server": an OpError wrapped by the
// server (e.g. Expire's "expire: %w") loses the wrapping on the far side;
// an error with several sentinels keeps only the first.
func TestReview2StatusWrappedOpError(t *testing.T) {
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
				t.Errorf("NOTE: Status(&txn.OpError{Err: nil}) panics: %v", r)
			}
		}()
		Status(&txn.OpError{Index: 1, Kind: txn.OpClaim})
	}()
}
