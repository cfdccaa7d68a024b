package txn_test

import (
	"testing"

	"github.com/omega-cell/omega/txn"
)

// A task uid is never reused, not even within the transaction that deletes
// it: a delete-then-create would reach the write set as one "created" change
// over the old task, leaving the job index on the old owner (and the claim
// after it judged against the old version).
func TestDeleteThenRecreateSameUID(t *testing.T) {
	c := std(t)
	j2 := uid(22)
	c.commit(c.tx(txn.CreateTask(ownedTaskP(uid(100), j1, res(1, 1)))))
	c.mustErr(c.tx(
		txn.Delete(kindTask, uid(100), 0),
		txn.CreateTask(ownedTaskP(uid(100), j2, res(1, 1))),
		txn.Claim(uid(100), m1, res(1, 1), 0),
	), txn.ErrAlreadyExists, 1)
}
