package live

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"google.golang.org/protobuf/proto"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// A scheduler instance announces itself in the cell with a lease
// (omegav1.Lease, named after the instance, its uid txn.LeaseUID(name)),
// as a Kubernetes component holds a coordination.k8s.io Lease: taken at
// start, renewed every third of its duration while the instance runs,
// deleted when it stops. The job controller reads the leases to say that
// no scheduler of a job's kind runs, and `omega get schedulers` lists
// them.

// DefaultLeaseDuration is how long an instance's lease holds after each
// renewal unless Config.LeaseDuration says otherwise (Kubernetes' leader
// election uses 15 s too).
const DefaultLeaseDuration = 15 * time.Second

// ErrLeaseHeld is what an instance gets when another live process holds
// the lease of its name: two instances of one name would take the same
// share of the kind's jobs and record their claims under one component.
var ErrLeaseHeld = errors.New("scheduler lease held")

// leaseKeeper takes, renews and gives back one instance's lease. Take runs
// on the instance's goroutine with its client; renew and release use the
// transport alone, from the goroutine that renews.
type leaseKeeper struct {
	tr       client.Transport
	name     string
	kind     string
	holder   string
	duration time.Duration
	poll     time.Duration // how often take looks again while it waits
	logger   *slog.Logger
	clock    client.Clock
	cur      *omegav1.Lease // as last written
	version  uint64         // its version then
}

// newHolder names this process for its lease: host, pid and a random
// part, so a restart (a new process) is told from the holder before it.
func newHolder() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// take makes the lease the instance's. With no lease of its name in the
// cell it creates one. A lease another holder renewed within its duration
// (by this process's clock, from when it first saw that version) is waited
// for: if it is renewed meanwhile, another instance of the name is live
// and take fails with ErrLeaseHeld; if it is not, its holder is gone (a
// crash: a stopped instance deletes its lease) and take puts it at the
// version it watched. A lease renewed more than twice its duration ago by
// the holder's clock is taken at once. A commit the cell could not take
// (its server gone, between leaders: transient) is tried again after the
// poll; a lease this instance's holder wrote (a create whose answer was
// lost) is its own.
func (k *leaseKeeper) take(ctx context.Context, c *client.Client) error {
	uid := txn.LeaseUID(k.name)
	var seen uint64
	var seenAt time.Time
	said := false
	for {
		if err := c.Sync(ctx); err != nil {
			return err
		}
		v := c.View()
		now := k.clock.Now()
		l, ok := v.Lease(uid)
		var op txn.Op
		mine := k.lease(now, now)
		switch {
		case !ok:
			op = txn.CreateLease(mine)
		case l.Holder() == k.holder:
			op = txn.PutLease(mine, l.Version)
		case now.Sub(time.Unix(0, l.RenewUnixNanos())) > 2*l.Duration():
			op = txn.PutLease(mine, l.Version)
		case seen != 0 && l.Version != seen:
			return fmt.Errorf("%w: scheduler %s is running elsewhere: its lease is held by %s, renewed while this one waited; give this instance another --name",
				ErrLeaseHeld, txn.Quote(k.name), txn.Quote(l.Holder()))
		case seen == 0:
			seen, seenAt = l.Version, now
			if !said {
				k.logger.Info("waiting for the lease of this scheduler's name to expire (a process that held it stopped without giving it back, or runs still)",
					"name", k.name, "holder", l.Holder(), "renewed", time.Unix(0, l.RenewUnixNanos()).UTC().Format(time.RFC3339), "within", l.Duration())
				said = true
			}
		case now.Sub(seenAt) > l.Duration():
			op = txn.PutLease(mine, l.Version)
		}
		if op.Kind != 0 {
			tx := c.NewTxn(v)
			tx.UnixNanos = now.UnixNano()
			tx.Ops = []txn.Op{op}
			res, err := c.Commit(ctx, tx)
			if err != nil && transient(ctx, err) {
				k.logger.Warn("the cell could not take the lease's commit; trying again", "name", k.name, "err", err)
				if err := k.clock.Sleep(ctx, k.poll); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return fmt.Errorf("take the lease of scheduler %s: %w", txn.Quote(k.name), err)
			}
			if res.Outcomes[0].Committed() {
				k.cur, k.version = mine, res.Revision
				return nil
			}
			// Another process created or renewed it first: look again.
			seen = 0
			if err := c.SyncTo(ctx, res.Revision); err != nil && res.Revision != 0 {
				return err
			}
			continue
		}
		if err := k.clock.Sleep(ctx, k.poll); err != nil {
			return err
		}
	}
}

// lease is the instance's lease as it writes it.
func (k *leaseKeeper) lease(acquired, renewed time.Time) *omegav1.Lease {
	return &omegav1.Lease{
		Meta: &omegav1.ObjectMeta{Uid: txn.LeaseUID(k.name).String(), Name: k.name},
		Spec: &omegav1.LeaseSpec{Holder: k.holder, Role: "scheduler", SchedulerKind: k.kind,
			DurationMillis: k.duration.Milliseconds(), AcquireUnixNanos: acquired.UnixNano(), RenewUnixNanos: renewed.UnixNano()},
	}
}

// renew puts the lease again at the version it was written at, with the
// time. A lease that moved (another process took it) is lost: renew
// returns ErrLeaseHeld. One that is gone (an operator deleted it) is
// created again. Other errors (the server unreachable) are for the caller
// to try again.
func (k *leaseKeeper) renew(ctx context.Context) error {
	now := k.clock.Now()
	l := proto.Clone(k.cur).(*omegav1.Lease)
	l.Spec.RenewUnixNanos = now.UnixNano()
	res, err := k.tr.Commit(ctx, &txn.Txn{ViewRevision: k.version, Component: k.name, UnixNanos: now.UnixNano(),
		Conflict: omegav1.ConflictMode_CONFLICT_MODE_FINE, Commit: omegav1.CommitMode_COMMIT_MODE_INCREMENTAL,
		Ops: []txn.Op{txn.PutLease(l, k.version)}})
	if err != nil {
		return err
	}
	switch o := res.Outcomes[0]; {
	case o.Committed():
		k.cur, k.version = l, res.Revision
		return nil
	case o.Code == omegav1.OutcomeCode_OUTCOME_CODE_NOT_FOUND:
		res, err := k.tr.Commit(ctx, &txn.Txn{ViewRevision: res.Revision, Component: k.name, UnixNanos: now.UnixNano(),
			Ops: []txn.Op{txn.CreateLease(l)}})
		if err != nil {
			return err
		}
		if res.Outcomes[0].Committed() {
			k.cur, k.version = l, res.Revision
			return nil
		}
		return fmt.Errorf("%w: the lease of scheduler %s, deleted, was taken by another process before it was made again", ErrLeaseHeld, txn.Quote(k.name))
	default:
		return fmt.Errorf("%w: scheduler %s lost its lease to another process (%s): another instance of the name runs", ErrLeaseHeld, txn.Quote(k.name), o.Detail)
	}
}

// keep renews the lease every third of its duration until ctx ends; it
// returns ErrLeaseHeld's error if the lease was lost, nil when ctx ended.
// A renewal that fails otherwise (the server restarting) is tried again
// at the next one.
func (k *leaseKeeper) keep(ctx context.Context) error {
	every := k.duration / 3
	for {
		if err := k.clock.Sleep(ctx, every); err != nil {
			return nil
		}
		if err := k.renew(ctx); err != nil {
			if errors.Is(err, ErrLeaseHeld) {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			k.logger.Warn("lease renewal failed; trying again", "name", k.name, "err", err)
		}
	}
}

// release deletes the lease at the version the instance wrote, so its
// kind's absence is known at once and a restart takes the name without
// waiting. It is bounded: a stopping instance does not hang on it.
func (k *leaseKeeper) release(within time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	_, err := k.tr.Commit(ctx, &txn.Txn{ViewRevision: k.version, Component: k.name, UnixNanos: k.clock.Now().UnixNano(),
		Ops: []txn.Op{txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, txn.LeaseUID(k.name), k.version)}})
	if err != nil {
		k.logger.Warn("could not give the lease back: it expires by itself", "name", k.name, "err", err)
	}
}
