package jobs

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// No scheduler of a job's kind: the one reason to wait no scheduler can
// write. Scheduler instances announce themselves with leases (txn.Lease,
// renewed while they run, schedulers/live); a controller that watches
// them (WatchSchedulers, the server's) writes WAIT_REASON_NO_SCHEDULER on
// a job with tasks pending while no live lease is of its kind, and clears
// it when one is. A lease is live while it was renewed within its
// duration, judged by the controller's clock (the now of its ticks) from
// when it saw the lease's version change, as Kubernetes' leader election
// judges a lease by its own observation and not by the holder's clock. A
// lease left expired for longer than the retention (an instance that
// crashed and never came back under its name) is deleted.

// schedulerLeases is what the controller knows of the cell's leases.
type schedulerLeases struct {
	grace     time.Duration // after the first tick, before the first NO_SCHEDULER
	retention time.Duration // expired this long: deleted (0: never)
	leases    map[uuid.UUID]*leaseSeen
	started   int64 // the first tick's time; 0 before it
	live      map[string]bool
	ready     bool // the grace has passed
}

type leaseSeen struct {
	l      *txn.Lease
	seenAt int64 // when the controller first saw this version (0: at the next tick)
}

// Options are a controller's optional duties.
type Options struct {
	// SchedulerLeases makes the controller read the cell's scheduler leases
	// and say, on a job whose tasks wait, that no scheduler of its kind
	// runs (WAIT_REASON_NO_SCHEDULER), once Grace has passed since its
	// first tick (the instances started with the server take their leases
	// meanwhile); it deletes a lease expired for longer than Retention (0:
	// never). The server sets it; the simulation does not (its schedulers
	// hold no leases, and its commits are the model's).
	SchedulerLeases  bool
	Grace, Retention time.Duration
}

func (s *schedulerLeases) note(l *txn.Lease, deleted bool) {
	if deleted {
		delete(s.leases, l.UID)
		return
	}
	if cur, ok := s.leases[l.UID]; ok && cur.l.Version == l.Version {
		return
	}
	s.leases[l.UID] = &leaseSeen{l: l}
}

// relisted takes the leases of a fresh view: a version already seen keeps
// its time; a new one is seen now.
func (s *schedulerLeases) relisted(st *txn.State) {
	old := s.leases
	s.leases = map[uuid.UUID]*leaseSeen{}
	st.RangeLeases(func(l *txn.Lease) bool {
		if cur, ok := old[l.UID]; ok && cur.l.Version == l.Version {
			s.leases[l.UID] = cur
		} else {
			s.leases[l.UID] = &leaseSeen{l: l}
		}
		return true
	})
}

// tick stamps the leases seen since the last tick, works out which kinds
// have a live scheduler, marks the waiting jobs of a kind that came or
// went (and all of them when the grace ends), and returns the deletions of
// leases expired past the retention.
func (s *schedulerLeases) tick(jc *Controller, now int64) []txn.Op {
	if s.started == 0 {
		s.started = now
	}
	live := map[string]bool{}
	var dels []txn.Op
	for _, u := range slices.SortedFunc(maps.Keys(s.leases), compareUID) {
		ls := s.leases[u]
		if ls.seenAt == 0 {
			ls.seenAt = now
		}
		expired := time.Duration(now-ls.seenAt) > ls.l.Duration()
		if !expired && ls.l.Role() == "scheduler" {
			live[ls.l.SchedulerKind()] = true
		}
		if expired && s.retention > 0 && time.Duration(now-ls.seenAt) > ls.l.Duration()+s.retention {
			dels = append(dels, txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, u, ls.l.Version))
		}
	}
	ready := time.Duration(now-s.started) >= s.grace
	changed := map[string]bool{}
	for k := range live {
		if !s.live[k] {
			changed[k] = true
		}
	}
	for k := range s.live {
		if !live[k] {
			changed[k] = true
		}
	}
	if len(changed) > 0 || ready != s.ready {
		var marks []uuid.UUID
		for u, n := range jc.jobs {
			if n.job != nil && n.pending > 0 && (ready != s.ready || changed[n.job.Scheduler()]) {
				marks = append(marks, u)
			}
		}
		slices.SortFunc(marks, compareUID) // the same history, the same transaction
		for _, u := range marks {
			jc.mark(u, jc.jobs[u])
		}
	}
	s.live, s.ready = live, ready
	return dels
}

// waiting is the reason a job with pending tasks gets, given the one it
// has (w): NO_SCHEDULER while no live scheduler is of its kind (once the
// grace has passed), none in its place once one is, w otherwise.
func (s *schedulerLeases) waiting(j *txn.Job, w *omegav1.JobWaiting, pending int32, now int64) *omegav1.JobWaiting {
	none := w.GetReason() == omegav1.WaitReason_WAIT_REASON_NO_SCHEDULER
	switch kind := j.Scheduler(); {
	case s.live[kind] && none:
		return nil
	case !s.live[kind] && s.ready && !none:
		return &omegav1.JobWaiting{
			Reason: omegav1.WaitReason_WAIT_REASON_NO_SCHEDULER, Reporter: Component, SinceUnixNanos: now, Tasks: pending,
			Message: fmt.Sprintf("no scheduler of kind %s runs in the cell (none holds a live lease: omega get schedulers); start one: omega scheduler --kind %s", txn.Quote(kind), kind),
		}
	}
	return w
}

func compareUID(a, b uuid.UUID) int {
	for i := range a {
		if a[i] != b[i] {
			return int(a[i]) - int(b[i])
		}
	}
	return 0
}
