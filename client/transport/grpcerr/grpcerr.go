// Package grpcerr carries the store's typed errors across gRPC: Status for
// a server to send, Error for a client to read back an error that matches
// the same sentinel (errors.Is), with the operation at fault (errors.As an
// *txn.OpError) and the message as the server wrote it. It is the one
// piece of a client that links gRPC, for the gRPC transport; the transport
// package and the client do not.
package grpcerr

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/txn"
)

// The typed errors and how each crosses the wire: its code in the status's
// ErrorDetail, and the gRPC code that a client that knows nothing of omega
// sees.
var wireErrors = []struct {
	code omegav1.ErrorCode
	err  error
	grpc codes.Code
}{
	{omegav1.ErrorCode_ERROR_CODE_INVALID, txn.ErrInvalid, codes.InvalidArgument},
	{omegav1.ErrorCode_ERROR_CODE_NOT_FOUND, txn.ErrNotFound, codes.NotFound},
	{omegav1.ErrorCode_ERROR_CODE_ALREADY_EXISTS, txn.ErrAlreadyExists, codes.AlreadyExists},
	{omegav1.ErrorCode_ERROR_CODE_TOO_LARGE, txn.ErrTooLarge, codes.ResourceExhausted},
	{omegav1.ErrorCode_ERROR_CODE_NOT_PENDING, txn.ErrNotPending, codes.FailedPrecondition},
	{omegav1.ErrorCode_ERROR_CODE_ILLEGAL_STATE, txn.ErrIllegalState, codes.FailedPrecondition},
	{omegav1.ErrorCode_ERROR_CODE_IN_USE, txn.ErrInUse, codes.FailedPrecondition},
	{omegav1.ErrorCode_ERROR_CODE_FUTURE_REVISION, txn.ErrFutureRevision, codes.OutOfRange},
	{omegav1.ErrorCode_ERROR_CODE_COMPACTED, txn.ErrCompacted, codes.OutOfRange},
	{omegav1.ErrorCode_ERROR_CODE_REJECTED, txn.ErrRejected, codes.PermissionDenied},
	{omegav1.ErrorCode_ERROR_CODE_UNAVAILABLE, transport.ErrUnavailable, codes.Unavailable},
}

// MaxMessageBytes bounds a status's message and each message of its
// ErrorDetail, as Status makes them. gRPC sends them in the trailers, which
// the peer holds to its header list limit: grpc-go's is 16 MiB, and a
// single field over it (a status message quoting a multi-megabyte request)
// ends the whole connection, every stream on it; gRPC's C core (Python)
// refuses trailers over 8 KiB. The store's errors quote user strings cut
// (txn.Quote), so they stay far below; this bounds any other.
const MaxMessageBytes = 1024

// bound cuts msg to MaxMessageBytes at a character's start, its length
// after the cut.
func bound(msg string) string {
	if len(msg) <= MaxMessageBytes {
		return msg
	}
	tail := fmt.Sprintf("… (%d bytes)", len(msg))
	cut := MaxMessageBytes - len(tail)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + tail
}

// Status returns the gRPC status for an error the store returned, for a
// server to send (its messages bounded: MaxMessageBytes): the typed error in an ErrorDetail (with the index and
// kind of the operation at fault, if one was), under the gRPC code that
// fits. Errors that wrap one of unavailable (the server passes the store's
// ErrFailed and ErrClosed) are transport.ErrUnavailable; a context's errors are
// Canceled and DeadlineExceeded; anything else is Unknown. A nil error is
// the OK status.
func Status(err error, unavailable ...error) *status.Status {
	if err == nil {
		return status.New(codes.OK, "")
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, bound(err.Error()))
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, bound(err.Error()))
	}
	msg := bound(err.Error())
	detail := &omegav1.ErrorDetail{OpIndex: -1, Message: msg}
	var oe *txn.OpError
	if errors.As(err, &oe) {
		detail.OpIndex, detail.OpKind = int32(oe.Index), int32(oe.Kind)
		if oe.Err != nil {
			detail.OpMessage = bound(oe.Err.Error())
		}
	}
	code := codes.Unknown
	for _, u := range unavailable {
		if errors.Is(err, u) {
			detail.Code, code = omegav1.ErrorCode_ERROR_CODE_UNAVAILABLE, codes.Unavailable
		}
	}
	if detail.Code == 0 {
		for _, w := range wireErrors {
			if errors.Is(err, w.err) {
				detail.Code, code = w.code, w.grpc
				break
			}
		}
	}
	if detail.Code == 0 {
		return status.New(codes.Unknown, msg)
	}
	st, derr := status.New(code, msg).WithDetails(detail)
	if derr != nil { // only if the detail cannot be marshalled
		return status.New(code, msg)
	}
	return st
}

// Error turns a status received from the server back into the error the
// store returned: errors.Is matches the same sentinel, errors.As finds an
// *txn.OpError with the operation's index and kind, and the message reads
// as it did on the server. A status without a detail maps by its code
// (Canceled and DeadlineExceeded to the context's errors, Unavailable to
// transport.ErrUnavailable); any other stays the status's own error. OK is nil.
func Error(st *status.Status) error {
	if st == nil || st.Code() == codes.OK {
		return nil
	}
	for _, d := range st.Details() {
		detail, ok := d.(*omegav1.ErrorDetail)
		if !ok {
			continue
		}
		for _, w := range wireErrors {
			if w.code != detail.GetCode() {
				continue
			}
			if detail.GetOpIndex() < 0 {
				return &remoteError{sentinel: w.err, msg: detail.GetMessage()}
			}
			// The operation's error, wrapped as the server wrapped it: the
			// whole message as it was, errors.As finding the OpError.
			op := &txn.OpError{Index: int(detail.GetOpIndex()), Kind: txn.OpKind(detail.GetOpKind()),
				Err: &remoteError{sentinel: w.err, msg: detail.GetOpMessage()}}
			return &remoteError{sentinel: op, msg: detail.GetMessage()}
		}
	}
	switch st.Code() {
	case codes.Canceled:
		return fmt.Errorf("%w: %s", context.Canceled, st.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("%w: %s", context.DeadlineExceeded, st.Message())
	case codes.Unavailable:
		return fmt.Errorf("%w: %s", transport.ErrUnavailable, st.Message())
	}
	return st.Err()
}

// remoteError is a typed error received from the server: its message as
// the server wrote it, wrapping its sentinel (or the operation's error).
type remoteError struct {
	sentinel error
	msg      string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }
