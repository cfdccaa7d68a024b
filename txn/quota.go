package txn

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/internal/pmap"
)

// Quota caps what one scheduler's placed tasks hold in all (omegav1.Quota):
// the sum of what their claims declare while they are not terminal. The
// state keeps each quota's use (QuotaUsed); a mediated store's rules
// refuse a claim that would take it past its limit. A dimension the limit
// leaves at zero (or does not name) is not capped.
type Quota struct {
	UID       uuid.UUID
	Version   uint64
	CreateRev uint64
	Created   int64
	Meta      *omegav1.ObjectMeta
	Spec      *omegav1.QuotaSpec
	Limit     Resources // parsed from Spec.Limit
}

// Name is the quota's name.
func (q *Quota) Name() string { return q.Meta.GetName() }

// Scheduler is the scheduler the quota caps.
func (q *Quota) Scheduler() string { return q.Spec.GetScheduler() }

// Covers reports whether the quota caps a component: the scheduler it
// names, or an instance of that kind ("batch" covers "batch-0").
func (q *Quota) Covers(component string) bool {
	s := q.Spec.GetScheduler()
	return component == s || strings.HasPrefix(component, s+"-")
}

// Exceeds reports whether used plus req passes the limit in a capped
// dimension, and names the first that does (cpu, memory, then the
// extended ones in order, as Fits does). The sum is exact (128 bits): a
// huge request does not wrap around below the limit; the amount named is
// saturated to the int64 range.
func (q *Quota) Exceeds(used, req Resources) (bool, string) {
	after := total{}.add(used).add(req)
	check := func(dim string, limit int64, v int128) (bool, string) {
		if limit > 0 && v.cmp(limit) > 0 {
			return true, fmt.Sprintf("%s %d of %d", dim, v.int64(), limit)
		}
		return false, ""
	}
	if over, why := check("cpu", q.Limit.CPU, after.cpu); over {
		return over, why
	}
	if over, why := check("memory", q.Limit.Memory, after.mem); over {
		return over, why
	}
	over := false
	for k, limit := range q.Limit.Ext {
		if over, _ = check(k, limit, after.ext[k]); over {
			break
		}
	}
	if !over {
		return false, ""
	}
	for _, k := range slices.Sorted(maps.Keys(q.Limit.Ext)) { // name the first, deterministically
		if over, why := check(k, q.Limit.Ext[k], after.ext[k]); over {
			return over, why
		}
	}
	return false, "" // unreachable
}

// Proto returns the wire form.
func (q *Quota) Proto() *omegav1.Quota {
	return &omegav1.Quota{Meta: exportMeta(q.Meta, q.UID, q.Version, q.CreateRev, q.Created), Spec: q.Spec}
}

func newQuota(p *omegav1.Quota) (*Quota, error) {
	if p.GetMeta() == nil {
		return nil, fmt.Errorf("%w: quota has no meta", ErrInvalid)
	}
	uid, err := ParseUID(p.GetMeta().GetUid(), "quota uid")
	if err != nil {
		return nil, err
	}
	spec := p.GetSpec()
	if spec.GetScheduler() == "" {
		return nil, fmt.Errorf("%w: quota %s names no scheduler", ErrInvalid, uid)
	}
	limit := ResourcesFromProto(spec.GetLimit())
	if err := limit.Validate(); err != nil {
		return nil, fmt.Errorf("%w: quota %s limit: %v", ErrInvalid, uid, err)
	}
	return &Quota{UID: uid, Meta: p.GetMeta(), Spec: spec, Limit: limit}, nil
}

func quotaFromWire(p *omegav1.Quota) (*Quota, error) {
	q, err := newQuota(p)
	if err != nil {
		return nil, err
	}
	q.Version, q.CreateRev, q.Created = restoreMeta(p.GetMeta())
	return q, nil
}

// CreateQuota creates a quota.
func CreateQuota(q *omegav1.Quota) Op { return Op{Kind: OpCreate, NewQuota: q} }

// PutQuota replaces a quota at expectVersion (0: any).
func PutQuota(q *omegav1.Quota, expectVersion uint64) Op {
	return Op{Kind: OpPut, NewQuota: q, ExpectVersion: expectVersion}
}

// --- the state's quotas --------------------------------------------------------

// Quota returns a quota by uid.
func (s *State) Quota(uid uuid.UUID) (*Quota, bool) { return s.quotas.Get(uid) }

// NumQuotas counts the quotas.
func (s *State) NumQuotas() int { return s.quotas.Len() }

// RangeQuotas calls f for each quota, in an order that depends only on the
// set of uids, until f returns false.
func (s *State) RangeQuotas(f func(*Quota) bool) {
	s.quotas.Range(func(_ uuid.UUID, q *Quota) bool { return f(q) })
}

// QuotaUsed is what the tasks a quota covers hold: the sum of what their
// claims declare while they are placed, each dimension saturated to the
// int64 range (the state keeps the exact sum).
func (s *State) QuotaUsed(uid uuid.UUID) Resources {
	v, _ := s.quotaUse.Get(uid)
	return v.resources()
}

// quotaIndex keeps each quota's use while a Builder edits a state: a
// placed task that comes or goes moves the use of the quotas covering its
// scheduler; a quota created or put is counted afresh at the end. The
// uses are exact sums (128 bits), so a use moved by a task and back is
// where a recount finds it.
type quotaIndex struct {
	base    *State
	use     *pmap.Builder[total] // nil until something moves
	recount []uuid.UUID          // quotas created, put or deleted: counted afresh, or dropped
}

func (x *quotaIndex) edit() {
	if x.use == nil {
		x.use = x.base.quotaUse.Transient()
	}
}

// task moves the use of the base's quotas covering old's and t's
// schedulers (a quota the write set creates, puts or deletes is counted
// afresh, or dropped, at the end).
func (x *quotaIndex) task(old, t *Task) {
	quotas := x.base.quotas
	if quotas.Len() == 0 {
		return
	}
	move := func(tk *Task, sign int) {
		if tk == nil || !tk.Placed() {
			return
		}
		quotas.Range(func(uid uuid.UUID, q *Quota) bool {
			if q.Covers(tk.Scheduler) {
				x.edit()
				cur, _ := x.use.Get(uid)
				if sign > 0 {
					cur = cur.add(tk.Claimed)
				} else {
					cur = cur.sub(tk.Claimed)
				}
				x.use.Set(uid, cur)
			}
			return true
		})
	}
	move(old, -1)
	move(t, +1)
}

func (x *quotaIndex) quota(q *Quota) {
	x.edit()
	x.recount = append(x.recount, q.UID)
}

// finish sets st's quota use, counting the quotas created or put from
// st's tasks.
func (x *quotaIndex) finish(st *State) {
	if x.use == nil {
		st.quotaUse = x.base.quotaUse
		return
	}
	for _, uid := range x.recount {
		q, ok := st.quotas.Get(uid)
		if !ok {
			x.use.Delete(uid)
			continue
		}
		var sum total
		st.tasks.Range(func(_ uuid.UUID, t *Task) bool {
			if t.Placed() && q.Covers(t.Scheduler) {
				sum = sum.add(t.Claimed)
			}
			return true
		})
		x.use.Set(uid, sum)
	}
	st.quotaUse = x.use.Persistent()
}

// checkQuotaUse holds each quota's use to its tasks (CheckInvariants).
func (s *State) checkQuotaUse() error {
	var err error
	s.quotas.Range(func(uid uuid.UUID, q *Quota) bool {
		var sum total
		s.tasks.Range(func(_ uuid.UUID, t *Task) bool {
			if t.Placed() && q.Covers(t.Scheduler) {
				sum = sum.add(t.Claimed)
			}
			return true
		})
		if got, _ := s.quotaUse.Get(uid); !sum.equal(got) {
			err = fmt.Errorf("quota %s of %s: its use says %v, its tasks hold %v", uid, q.Scheduler(), got.resources(), sum.resources())
		}
		return err == nil
	})
	return err
}

// QuotasOf calls f for each quota covering component, as the transaction
// sees the state, with what it holds: the base state's use and, if it
// covers the transaction's own component, what the transaction's earlier
// claims took. (Tasks the transaction ended or evicted are not taken off:
// a claim is refused at worst a transaction too early.)
func (o Overlay) QuotasOf(component string, f func(q *Quota, used Resources) bool) {
	e := o.e
	e.base.quotas.Range(func(uid uuid.UUID, q *Quota) bool {
		if !q.Covers(component) {
			return true
		}
		used, _ := e.base.quotaUse.Get(uid)
		if component == e.tx.Component {
			used = used.plus(e.claimedSoFar)
		}
		return f(q, used.resources())
	})
}

// quota returns a quota as this transaction sees it, the version it had
// before the transaction (0 if the transaction created it), and whether
// it exists.
func (e *evaluator) quota(uid uuid.UUID) (cur *Quota, baseVersion uint64, ok bool) {
	b, inBase := e.base.quotas.Get(uid)
	if i, hit := e.touched[objKey{omegav1.ObjectKind_OBJECT_KIND_QUOTA, uid}]; hit {
		c := &e.changes[i]
		if c.Deleted {
			return nil, 0, false
		}
		if c.Created {
			return c.Quota, 0, true
		}
		return c.Quota, b.Version, true
	}
	if !inBase {
		return nil, 0, false
	}
	return b, b.Version, true
}
