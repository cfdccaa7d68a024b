package store

import "github.com/omega-cell/omega/txn"

// Policy decides what the store checks beyond the transaction rules of
// package txn (versions, preconditions, the fit of what each claim
// declares), which every policy enforces.
//
// Admit runs before evaluation, under the store's commit lock, with the
// state the transaction will be evaluated against; it may reject the
// transaction (an error wrapping ErrRejected) but must not modify it or the
// state. It must be fast and must not block: it holds up every committer.
type Policy interface {
	Name() string
	Admit(s *txn.State, tx *txn.Txn) error
}

// Raw returns the Omega policy: the store exposes the raw state and checks
// nothing beyond the transaction rules. What a claim should declare, who may
// claim what, which state transitions are legal and what an object must
// contain are the client library's job. The default.
func Raw() Policy { return rawPolicy{} }

type rawPolicy struct{}

func (rawPolicy) Name() string                     { return "raw" }
func (rawPolicy) Admit(*txn.State, *txn.Txn) error { return nil }
