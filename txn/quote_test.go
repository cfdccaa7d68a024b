package txn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// TestQuote: a user string is quoted whole up to 64 bytes, else its first
// 64 bytes (cut at a character's start) and its length.
func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"web-1", `"web-1"`},
		{strings.Repeat("a", 64), `"` + strings.Repeat("a", 64) + `"`},
		{strings.Repeat("a", 65536), `"` + strings.Repeat("a", 61) + `…" (65536 bytes)`},
		// 30 two-byte runes, then a cut that would fall inside the next one.
		{strings.Repeat("é", 40), `"` + strings.Repeat("é", 30) + `…" (80 bytes)`},
		{"a\x00b\xff", `"a\x00b\xff"`},
	} {
		if got := txn.Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%.80q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestOperationNamesNoObjectByTheNilUID: an operation whose uid field is
// empty on the wire, or the nil uuid on the wire or in process, is
// ErrInvalid naming the operation and the field, never read as the nil uid
// and judged "not found".
func TestOperationNamesNoObjectByTheNilUID(t *testing.T) {
	base := onePlacedOnePending(t)
	nilUID := uuid.Nil.String()
	for _, tc := range []struct {
		name, field string
		kind        txn.OpKind
		op          func(string) *omegav1.Operation
	}{
		{"claim task", "task_uid", txn.OpClaim, func(u string) *omegav1.Operation {
			return &omegav1.Operation{Op: &omegav1.Operation_Claim{Claim: &omegav1.ClaimOp{TaskUid: u, MachineUid: m1.String()}}}
		}},
		{"claim machine", "machine_uid", txn.OpClaim, func(u string) *omegav1.Operation {
			return &omegav1.Operation{Op: &omegav1.Operation_Claim{Claim: &omegav1.ClaimOp{TaskUid: t2.String(), MachineUid: u}}}
		}},
		{"evict", "task_uid", txn.OpEvict, func(u string) *omegav1.Operation {
			return &omegav1.Operation{Op: &omegav1.Operation_Evict{Evict: &omegav1.EvictOp{TaskUid: u}}}
		}},
		{"set-status", "task_uid", txn.OpSetStatus, func(u string) *omegav1.Operation {
			return &omegav1.Operation{Op: &omegav1.Operation_SetStatus{SetStatus: &omegav1.SetStatusOp{TaskUid: u, State: killed}}}
		}},
		{"delete", "uid", txn.OpDelete, func(u string) *omegav1.Operation {
			return &omegav1.Operation{Op: &omegav1.Operation_Delete{Delete: &omegav1.DeleteOp{Kind: kindTask, Uid: u}}}
		}},
		{"answer", "offer_uid", txn.OpAnswer, func(u string) *omegav1.Operation {
			return &omegav1.Operation{Op: &omegav1.Operation_Answer{Answer: &omegav1.AnswerOp{OfferUid: u}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(how string, err error) {
				t.Helper()
				var oe *txn.OpError
				if !errors.Is(err, txn.ErrInvalid) || !errors.As(err, &oe) || oe.Index != 0 || oe.Kind != tc.kind || !strings.Contains(err.Error(), tc.field) {
					t.Errorf("%s: %v, want ErrInvalid at op 0 (%s) naming %s", how, err, tc.kind, tc.field)
				}
			}
			_, err := txn.TxnFromProto(&omegav1.Transaction{Ops: []*omegav1.Operation{tc.op("")}})
			check("empty on the wire", err)
			_, err = txn.TxnFromProto(&omegav1.Transaction{Ops: []*omegav1.Operation{tc.op(nilUID)}})
			check("the nil uuid on the wire", err)
			// In process: the same operation with the nil uid, as the
			// wire used to make it.
			good := tc.op(nilUID)
			switch x := good.Op.(type) {
			case *omegav1.Operation_Claim:
				if x.Claim.TaskUid == nilUID {
					x.Claim.TaskUid = t2.String()
				} else {
					x.Claim.MachineUid = m1.String()
				}
			case *omegav1.Operation_Evict:
				x.Evict.TaskUid = t1.String()
			case *omegav1.Operation_SetStatus:
				x.SetStatus.TaskUid = t1.String()
			case *omegav1.Operation_Delete:
				x.Delete.Uid = t1.String()
			case *omegav1.Operation_Answer:
				x.Answer.OfferUid = t1.String()
			}
			tx, err := txn.TxnFromProto(&omegav1.Transaction{Ops: []*omegav1.Operation{good}})
			if err != nil {
				t.Fatal(err)
			}
			op := &tx.Ops[0]
			switch tc.field {
			case "task_uid":
				op.Task = uuid.Nil
			case "machine_uid":
				op.Machine = uuid.Nil
			default:
				op.DeleteUID = uuid.Nil
			}
			tx.ViewRevision = base.Revision()
			_, _, err = txn.Evaluate(base, tx, base.Revision()+1, txn.DefaultLimits())
			check("the nil uid in process", err)
		})
	}
}

// TestAnOverlongUIDIsQuotedCut: a 64 KiB string where a uid goes is
// ErrInvalid with the string quoted cut (its first 64 bytes and its
// length), so the error stays small.
func TestAnOverlongUIDIsQuotedCut(t *testing.T) {
	long := strings.Repeat("a", 65536)
	_, err := txn.TxnFromProto(&omegav1.Transaction{Ops: []*omegav1.Operation{
		{Op: &omegav1.Operation_Evict{Evict: &omegav1.EvictOp{TaskUid: long}}}}})
	if !errors.Is(err, txn.ErrInvalid) || !strings.Contains(err.Error(), `task_uid "aaaa`) || !strings.Contains(err.Error(), `…" (65536 bytes)`) || len(err.Error()) > 200 {
		t.Fatalf("%.300v (%d bytes), want ErrInvalid quoting task_uid cut", err, len(err.Error()))
	}
	if _, err := txn.ParseUID(long, "machine_uid"); err == nil || len(err.Error()) > 200 {
		t.Fatalf("ParseUID: %.300v", err)
	}
}
