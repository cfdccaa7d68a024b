package txn

// ObjectSizeBound exposes the size bound validation uses, for the tests of
// package txn_test.
func ObjectSizeBound(op *Op) int { return objectSizeBound(op) }
