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
//
// A policy that checks operations one by one, inside the evaluation, also
// implements RulesPolicy.
type Policy interface {
	Name() string
	Admit(s *txn.State, tx *txn.Txn) error
}

// RulesPolicy is a Policy with per-operation rules (txn.Rules): checked
// against the state as the transaction has changed it so far, able to fill
// defaults and derive a claim's resources, answering per operation with a
// typed reason (OUTCOME_CODE_REJECTED). The store asks for the rules once,
// at Open.
type RulesPolicy interface {
	Policy
	Rules() txn.Rules
}

// Raw returns the Omega policy: the store exposes the raw state and checks
// nothing beyond the transaction rules. What a claim should declare, who may
// claim what, which state transitions are legal and what an object must
// contain are the client library's job. The default.
func Raw() Policy { return rawPolicy{} }

type rawPolicy struct{}

func (rawPolicy) Name() string                     { return "raw" }
func (rawPolicy) Admit(*txn.State, *txn.Txn) error { return nil }

// policyRules returns p's rules, if it has any.
func policyRules(p Policy) txn.Rules {
	if rp, ok := p.(RulesPolicy); ok {
		return rp.Rules()
	}
	return nil
}
