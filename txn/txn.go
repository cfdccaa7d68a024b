// Package txn holds omega's transaction semantics: the in-memory cell state
// (an immutable, structurally shared snapshot), the operations a transaction
// may carry, and Evaluate, which decides what a transaction does to a state.
//
// txn is pure and deterministic: no clock, no I/O, no goroutine, no map
// iteration that reaches a result. Given a state and a transaction, Evaluate
// returns a Result and a WriteSet; the store makes the write set durable and
// applies it, and a client applies the same write sets it receives from a
// watch. The rules are those of DESIGN.md "Transactions":
//
//   - Claim places a task that is still PENDING at the version the view saw.
//   - Conflict detection is fine (resource fit, machine UP) or coarse (also:
//     nobody else changed the machine since the view's revision). The
//     transaction's own earlier operations never count as someone else's
//     change, and the fit check applies in both modes, so a machine is never
//     over capacity in any dimension.
//   - Commit is incremental (commit every operation that does not conflict)
//     or all-or-nothing.
//   - A machine's allocation is derived here from the claims, evictions and
//     terminal status changes; no client writes it.
//
// Operations apply in order: an eviction frees resources for the operations
// after it, a claim consumes them for the operations after it.
//
// A conflict is a per-operation Outcome (the state moved under the view; the
// client re-syncs and retries). Bad input — an unknown object, a malformed
// object (a string that is not UTF-8, negative resources), a string, object
// or transaction over Limits, a claim for a task the claimer already saw
// placed — is an error, and the whole transaction is rejected with nothing
// changed. Everything the store encodes is validated here, by the
// encoder's rules (validate.go), so a transaction that evaluates encodes.
package txn

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// Errors returned (wrapped in an *OpError) by Evaluate for bad input. Check
// them with errors.Is. None of them is retryable: the transaction is wrong,
// not stale.
var (
	// ErrInvalid: a malformed object or operation (bad uid, negative
	// resources, unknown enum value, missing spec).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: the operation names an object the state does not hold.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: Create of a uid the state already holds.
	ErrAlreadyExists = errors.New("already exists")
	// ErrTooLarge: more operations, or a longer string, a larger object or
	// a larger transaction in bytes, than Limits allows.
	ErrTooLarge = errors.New("transaction too large")
	// ErrNotPending: a Claim of a task that, at the version the claimer saw,
	// was not PENDING (the claimer saw it placed and claimed it anyway).
	ErrNotPending = errors.New("task not pending")
	// ErrIllegalState: a SetStatus or Evict the task's state at the version
	// the caller saw does not allow (leaving a terminal state, RUNNING for an
	// unplaced task, evicting an unplaced task).
	ErrIllegalState = errors.New("illegal state change")
	// ErrInUse: Delete of a machine that still holds non-terminal tasks the
	// caller's view saw (or that the transaction itself placed). Tasks
	// placed after the view make the delete a conflict instead.
	ErrInUse = errors.New("in use")
	// ErrFutureRevision: the transaction's view revision is ahead of the
	// state it is evaluated against.
	ErrFutureRevision = errors.New("view revision ahead of the store")
)

// ErrRejected is what a store's policy returns (wrapped) when it refuses a
// transaction or an operation: the rules of a mediating store, not the
// transaction semantics. Defined here so that it crosses the wire like the
// other sentinels.
var ErrRejected = errors.New("rejected by policy")

// ErrCompacted is what a watch returns (wrapped) when it asks for
// revisions its store no longer retains: re-list and watch from the
// snapshot's revision. It is defined here, below the store, so that every
// transport — in-process or remote — and every component that watches
// checks the one value without linking the store.
var ErrCompacted = errors.New("revision compacted")

// OpError is the error for one bad operation.
type OpError struct {
	Index int    // the operation's position in Txn.Ops
	Kind  OpKind // its kind
	Err   error  // wraps one of the sentinel errors above
}

func (e *OpError) Error() string {
	return fmt.Sprintf("op %d (%s): %v", e.Index, e.Kind, e.Err)
}

func (e *OpError) Unwrap() error { return e.Err }

// OpKind names an operation.
type OpKind uint8

const (
	OpCreate OpKind = iota + 1
	OpClaim
	OpEvict
	OpSetStatus
	OpPut
	OpDelete
	OpAnswer
)

func (k OpKind) String() string {
	switch k {
	case OpCreate:
		return "create"
	case OpClaim:
		return "claim"
	case OpEvict:
		return "evict"
	case OpSetStatus:
		return "set-status"
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpAnswer:
		return "answer"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one operation. Build it with the constructors (Create, Claim, ...);
// the fields each kind uses are listed on them. An Op is a plain value, so a
// transaction of many claims is one allocation.
type Op struct {
	Kind          OpKind
	Task          uuid.UUID // Claim, Evict, SetStatus
	Machine       uuid.UUID // Claim
	Resources     Resources // Claim: what the claim reserves
	ExpectVersion uint64    // Claim, Evict, SetStatus, Put, Delete (0: see each)
	State         omegav1.TaskState
	ForPriority   int32 // Evict
	Force         bool  // Evict
	Message       string
	// SetStatus: the agent's report on running the task (nil: keep the
	// task's).
	Run *omegav1.TaskRun
	// Create and Put: exactly one of these is set. Ownership of the message
	// passes to the transaction: the caller must not modify it afterwards.
	NewTask    *omegav1.Task
	NewJob     *omegav1.Job
	NewMachine *omegav1.Machine
	NewOffer   *omegav1.Offer // Create only
	NewQuota   *omegav1.Quota
	NewLease   *omegav1.Lease
	// Delete; Answer names its offer in DeleteUID.
	DeleteKind omegav1.ObjectKind
	DeleteUID  uuid.UUID
}

// CreateTask creates a PENDING task (its status is ignored).
func CreateTask(t *omegav1.Task) Op { return Op{Kind: OpCreate, NewTask: t} }

// CreateJob creates a job.
func CreateJob(j *omegav1.Job) Op { return Op{Kind: OpCreate, NewJob: j} }

// CreateMachine registers a machine (UP unless its status says otherwise).
func CreateMachine(m *omegav1.Machine) Op { return Op{Kind: OpCreate, NewMachine: m} }

// Claim places task on machine, reserving res. expectVersion is the task's
// version in the claimer's view — the version before this transaction, even
// if an earlier operation of it evicted the task — or 0 for a task created
// earlier in the same transaction.
func Claim(task, machine uuid.UUID, res Resources, expectVersion uint64) Op {
	return Op{Kind: OpClaim, Task: task, Machine: machine, Resources: res, ExpectVersion: expectVersion}
}

// Evict preempts a placed task back to PENDING to make room for work of
// priority forPriority (the victim's priority must be strictly lower).
func Evict(task uuid.UUID, expectVersion uint64, forPriority int32, reason string) Op {
	return Op{Kind: OpEvict, Task: task, ExpectVersion: expectVersion, ForPriority: forPriority, Message: reason}
}

// ForceEvict preempts a placed task regardless of priority (an operator's
// drain, a failed health check).
func ForceEvict(task uuid.UUID, expectVersion uint64, reason string) Op {
	return Op{Kind: OpEvict, Task: task, ExpectVersion: expectVersion, Force: true, Message: reason}
}

// SetStatus reports a task's state: RUNNING, or a terminal state (which frees
// its resources in the same commit). expectVersion 0 means "whatever the
// version"; then a task that can no longer take the state is a conflict, not
// an error.
func SetStatus(task uuid.UUID, state omegav1.TaskState, expectVersion uint64, message string) Op {
	return Op{Kind: OpSetStatus, Task: task, State: state, ExpectVersion: expectVersion, Message: message}
}

// PutMachine replaces a machine's meta, spec, state and agent address at
// expectVersion (0: any). Its allocation is kept.
func PutMachine(m *omegav1.Machine, expectVersion uint64) Op {
	return Op{Kind: OpPut, NewMachine: m, ExpectVersion: expectVersion}
}

// PutJob replaces a job at expectVersion (0: any).
func PutJob(j *omegav1.Job, expectVersion uint64) Op {
	return Op{Kind: OpPut, NewJob: j, ExpectVersion: expectVersion}
}

// Delete removes an object at expectVersion (0: any). Deleting a placed task
// frees its resources; deleting a machine that holds tasks is ErrInUse (or a
// MACHINE_CHANGED conflict if they were placed after the view).
func Delete(kind omegav1.ObjectKind, uid uuid.UUID, expectVersion uint64) Op {
	return Op{Kind: OpDelete, DeleteKind: kind, DeleteUID: uid, ExpectVersion: expectVersion}
}

// Txn is a transaction: operations built against a view at ViewRevision.
type Txn struct {
	ViewRevision uint64
	Conflict     omegav1.ConflictMode // fine (default) or coarse
	Commit       omegav1.CommitMode   // incremental (default) or all-or-nothing
	Component    string               // who commits; recorded on claims
	UnixNanos    int64                // the committer's clock, stamped on changes
	Ops          []Op
}

// MaxDetailBytes bounds an outcome's Detail (and the user strings an
// error quotes, short): with MaxOps operations a result stays well below
// MaxWireBytes, however large the objects and the state.
const MaxDetailBytes = 192

// truncate cuts s to at most n bytes, at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// QuoteBytes is how much of a user string an error quotes.
const QuoteBytes = 64

// Quote is a user string as every error of the store, its server and its
// clients quotes it: Go-quoted, whole when it is at most QuoteBytes long,
// else its first QuoteBytes bytes (cut at a character's start, "…" marking
// the cut) and its length: "aaaa…" (65536 bytes). An error therefore grows
// by at most a few hundred bytes however large the input it names.
func Quote(s string) string {
	if len(s) <= QuoteBytes {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%s (%d bytes)", strconv.Quote(truncate(s, QuoteBytes)), len(s))
}

// short cuts text that is not one user string but may hold them (a
// resource dimension with its amounts) for an outcome's detail: its first
// QuoteBytes bytes, with its length when cut.
func short(s string) string {
	if len(s) <= QuoteBytes {
		return s
	}
	return fmt.Sprintf("%s (%d bytes)", truncate(s, QuoteBytes), len(s))
}

// Outcome is what happened to one operation.
type Outcome struct {
	Code   omegav1.OutcomeCode
	Detail string // for people; empty when committed
	// Reason says which rule refused it (with OUTCOME_CODE_REJECTED).
	Reason omegav1.RejectReason
}

// Committed reports whether the operation took effect.
func (o Outcome) Committed() bool { return o.Code == omegav1.OutcomeCode_OUTCOME_CODE_COMMITTED }

// Result is the outcome of a transaction.
type Result struct {
	// Revision is the revision the transaction committed at, or 0 if nothing
	// committed (every operation conflicted, or all-or-nothing aborted).
	Revision uint64
	// Base is the revision of the state the transaction was evaluated
	// against: everything it conflicted with is at or before Base, so a
	// client that re-syncs to Base before retrying has seen the cause.
	Base uint64
	// Outcomes has one entry per operation, in order.
	Outcomes []Outcome
	// Committed and Conflicts count operations committed and conflicting
	// (ABORTED operations are neither). ClaimsConflicted counts the
	// conflicting claims among them. Rejected counts the operations the
	// store's rules refused (neither committed nor conflicting: retrying
	// them on a fresh view does not help).
	Committed, Conflicts, ClaimsConflicted, Rejected int
}

// Conflicted reports whether any operation conflicted: the attempt counts
// as a conflicted attempt (DESIGN.md "Counting"), even if incremental mode
// committed the rest.
func (r *Result) Conflicted() bool { return r.Conflicts > 0 }

// Partial reports whether some but not all operations committed.
func (r *Result) Partial() bool { return r.Committed > 0 && r.Conflicts > 0 }

// Limits bounds a transaction. A zero field is no bound (the store fills in
// the defaults, WithDefaults). Exceeding one is ErrTooLarge.
type Limits struct {
	// MaxOps is the most operations one transaction may carry. Default
	// 100,000: a large job's creation plus its claims, yet a bound on the
	// time one commit holds the store.
	MaxOps int
	// MaxStringBytes is the longest string anywhere in a transaction: a
	// name, a label or annotation key or value, a command argument, an
	// extended resource name, a status message, the component. Default
	// 64 KiB: a stack trace in a failure message or a long annotation fits;
	// a file does not belong in the cell state.
	MaxStringBytes int
	// MaxObjectBytes is the largest object a Create or Put may carry, in
	// bytes of its wire encoding. Default 1 MiB: etcd's request limit (1.5
	// MiB) bounds every Kubernetes object the same way; a task with a long
	// command and many labels is a few KiB, and a cell holds millions.
	MaxObjectBytes int
	// MaxTxnBytes is the largest transaction, in bytes of its wire encoding
	// (Txn.WireSize). Default 16 MiB: above what a scheduler sends (a
	// mapreduce job of 10,000 tasks created and claimed in one transaction is
	// about 3 MiB, 100,000 claims about 10 MiB), and below MaxWireBytes, so
	// every transaction the store takes also crosses the wire.
	MaxTxnBytes int
}

// MaxWireBytes is the gRPC message limit of the live cell, for requests and
// responses alike: MaxTxnBytes must stay below it (a store refuses limits
// above it), with room for a result's outcomes.
const MaxWireBytes = 32 << 20

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{MaxOps: 100_000, MaxStringBytes: 64 << 10, MaxObjectBytes: 1 << 20, MaxTxnBytes: 16 << 20}
}

// WithDefaults returns l with each zero field set to its default.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxOps == 0 {
		l.MaxOps = d.MaxOps
	}
	if l.MaxStringBytes == 0 {
		l.MaxStringBytes = d.MaxStringBytes
	}
	if l.MaxObjectBytes == 0 {
		l.MaxObjectBytes = d.MaxObjectBytes
	}
	if l.MaxTxnBytes == 0 {
		l.MaxTxnBytes = d.MaxTxnBytes
	}
	return l
}

// The smallest limits that leave a store usable: a string must hold a
// uid's 36 characters and a Kubernetes-sized label (63), an object a small
// task, a transaction the largest object.
const (
	MinStringBytes = 64
	MinObjectBytes = 1 << 10
)

// Validate reports the first field that is negative, or set below its
// minimum (MinStringBytes, MinObjectBytes; MaxTxnBytes below MaxObjectBytes
// when both are set), or a MaxTxnBytes above MaxWireBytes. Zero fields are
// no bound and pass.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name   string
		v, min int
	}{{"MaxOps", l.MaxOps, 1}, {"MaxStringBytes", l.MaxStringBytes, MinStringBytes}, {"MaxObjectBytes", l.MaxObjectBytes, MinObjectBytes}, {"MaxTxnBytes", l.MaxTxnBytes, MinObjectBytes}} {
		switch {
		case f.v < 0:
			return fmt.Errorf("limits: %s %d is negative", f.name, f.v)
		case f.v > 0 && f.v < f.min:
			return fmt.Errorf("limits: %s %d is below %d, the least a usable store takes", f.name, f.v, f.min)
		}
	}
	if l.MaxTxnBytes > 0 && l.MaxObjectBytes > l.MaxTxnBytes {
		return fmt.Errorf("limits: MaxTxnBytes %d is below MaxObjectBytes %d: the largest object would fit no transaction", l.MaxTxnBytes, l.MaxObjectBytes)
	}
	if l.MaxTxnBytes > MaxWireBytes {
		return fmt.Errorf("limits: MaxTxnBytes %d is above the wire's message limit %d", l.MaxTxnBytes, MaxWireBytes)
	}
	return nil
}
