package schedulers

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// MachineIndex is an indexable, sorted list of a cell's machine uids, so a
// scheduler can examine machines in random order, and each machine as the
// view it was last brought to shows it (Refresh): the machine and what it
// has free. Bringing it to a later view costs what the two views' tables
// of machines do not share (txn.Machines.Diff: the machines written,
// added or removed between them), not a lookup per machine examined; a
// machine added or removed costs one merge of the list besides.
type MachineIndex struct {
	uids    []uuid.UUID
	domains int // distinct failure domains; -1 until Domains counts them
	ok      bool
	// at is the table of machines cur holds, exactly: each machine at
	// index i as at has it, with what it has free. A saturated cell's
	// decision examines the same machines for task after task, and
	// decision after decision, and what a machine has free rules most of
	// them out without looking it up. at keeps that table, not its state.
	at  txn.Machines
	cur []slot
	// Scratch: the machines of a rebuild, those added and the indexes of
	// those removed while following, and the arrays a merge fills.
	byUID     []*txn.Machine
	adds      []*txn.Machine
	gone      []int
	spareUIDs []uuid.UUID
	spareCur  []slot
}

// slot is a machine of the index as its table has it: its free cpu and
// memory (capacity less allocation, before a decision's own claims), and
// whether it is UP; a task that does not fit them cannot fit the machine in
// a decision on that table.
type slot struct {
	m        *txn.Machine
	cpu, mem int64
	up       bool
}

func slotOf(m *txn.Machine) slot {
	return slot{m: m, cpu: m.Capacity.CPU - m.Allocated.CPU, mem: m.Capacity.Memory - m.Allocated.Memory,
		up: m.State == omegav1.MachineState_MACHINE_STATE_UP}
}

func compareUIDs(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }

// Refresh brings the index to v.
func (x *MachineIndex) Refresh(v client.View) {
	t := v.Machines()
	if x.ok {
		if !x.at.Same(t) {
			x.follow(t)
			x.at = t
		}
		return
	}
	x.byUID = x.byUID[:0]
	v.RangeMachines(func(m *txn.Machine) bool {
		x.byUID = append(x.byUID, m)
		return true
	})
	x.domains = -1 // counted when a spreading scheduler first asks (Domains)
	slices.SortFunc(x.byUID, func(a, b *txn.Machine) int { return compareUIDs(a.UID, b.UID) })
	x.uids = slices.Grow(x.uids[:0], len(x.byUID))[:len(x.byUID)]
	x.cur = slices.Grow(x.cur[:0], len(x.byUID))[:len(x.byUID)]
	for i, m := range x.byUID {
		x.uids[i], x.cur[i] = m.UID, slotOf(m)
	}
	clear(x.byUID)
	x.at, x.ok = t, true
}

// follow brings the index from its table to t through what they do not
// share: a machine changed takes its new slot in place; machines added and
// removed are merged into the list in one pass.
func (x *MachineIndex) follow(t txn.Machines) {
	x.adds, x.gone = x.adds[:0], x.gone[:0]
	t.Diff(x.at, func(uid uuid.UUID, m *txn.Machine) {
		i, found := slices.BinarySearchFunc(x.uids, uid, compareUIDs)
		switch {
		case found && m != nil:
			x.cur[i] = slotOf(m)
		case found:
			x.gone = append(x.gone, i)
		case m != nil:
			x.adds = append(x.adds, m)
		}
	})
	if len(x.adds) == 0 && len(x.gone) == 0 {
		return
	}
	x.domains = -1
	slices.Sort(x.gone)
	slices.SortFunc(x.adds, func(a, b *txn.Machine) int { return compareUIDs(a.UID, b.UID) })
	n := len(x.uids) - len(x.gone) + len(x.adds)
	uids := slices.Grow(x.spareUIDs[:0], n)[:n]
	cur := slices.Grow(x.spareCur[:0], n)[:n]
	i, g, a, k := 0, 0, 0, 0
	for k < n {
		switch {
		case g < len(x.gone) && x.gone[g] == i:
			i, g = i+1, g+1
		case a < len(x.adds) && (i == len(x.uids) || compareUIDs(x.adds[a].UID, x.uids[i]) < 0):
			uids[k], cur[k] = x.adds[a].UID, slotOf(x.adds[a])
			a, k = a+1, k+1
		default:
			uids[k], cur[k] = x.uids[i], x.cur[i]
			i, k = i+1, k+1
		}
	}
	clear(x.cur) // the spare holds no machine
	x.spareUIDs, x.spareCur = x.uids, x.cur
	x.uids, x.cur = uids, cur
	clear(x.adds)
}

// current reports whether the index holds v's machines.
func (x *MachineIndex) current(v client.View) bool {
	return x.ok && v.State != nil && x.at.Same(v.Machines())
}

// Len is the number of machines.
func (x *MachineIndex) Len() int { return len(x.uids) }

// At returns the i-th machine uid.
func (x *MachineIndex) At(i int) uuid.UUID { return x.uids[i] }

// Domains is the number of distinct failure domains among the index's
// machines, a machine that declares none counting as a domain of its own
// (SpreadDomain), counted at the first call after a rebuild (a new set of
// machines) and kept until the next: randomized first fit and the batch
// scheduler never ask, and a two-level framework rebuilds for every offer.
func (x *MachineIndex) Domains() int {
	if x.domains < 0 {
		domains := map[Domain]struct{}{}
		for i := range x.cur {
			domains[SpreadDomain(x.cur[i].m)] = struct{}{}
		}
		x.domains = len(domains)
	}
	return x.domains
}

// Domain is a failure domain as spreading counts it: a declared one by its
// name, or a machine that declares none (Machine is its uid).
type Domain struct {
	Name    string
	Machine uuid.UUID
}

// SpreadDomain is m's failure domain for spreading: the one it declares,
// else a domain of its own. A live agent declares none, and were they all
// one domain ("") a service's replicas would spread over nothing and land
// wherever fits best, all on one machine; a machine alone is the smallest
// domain that fails together. A declared name never equals a machine's
// domain, whatever it is.
func SpreadDomain(m *txn.Machine) Domain {
	if d := m.FailureDomain(); d != "" {
		return Domain{Name: d}
	}
	return Domain{Machine: m.UID}
}

// Placer is one decision's scratch pad: it holds what the decision has
// claimed so far, so a later choice in the same decision sees the earlier
// ones (two tasks never overfill a machine the view shows as free).
type Placer struct {
	v     client.View
	extra map[uuid.UUID]txn.Resources
	// uncached after a claim of a negative amount (which would leave a
	// machine more room than its view shows): what the MachineIndex says
	// a machine has free no longer rules it out.
	uncached bool
	// onMachine counts the job's tasks per machine (placed before this
	// decision and chosen in it), for DIFFERENT_MACHINES and spreading;
	// onDomain per failure domain. Both are made from placed (the machines
	// of the job's tasks placed before) and noted when first read: most
	// decisions (a batch job's, no constraint) never read them.
	placed    []*txn.Task
	noted     []*txn.Machine
	onMachine map[uuid.UUID]int
	onDomain  map[Domain]int
}

// NewPlacer starts a decision on v for a job whose tasks already placed are
// placed (they count for spreading and DIFFERENT_MACHINES).
func NewPlacer(v client.View, placed []*txn.Task) *Placer {
	return &Placer{v: v, extra: map[uuid.UUID]txn.Resources{}, placed: placed}
}

func (p *Placer) note(m *txn.Machine) { p.noted = append(p.noted, m) }

// counted brings onMachine and onDomain up to every machine noted.
func (p *Placer) counted() {
	if p.onMachine == nil {
		p.onMachine, p.onDomain = map[uuid.UUID]int{}, map[Domain]int{}
	}
	for _, t := range p.placed {
		if m, ok := p.v.Machine(t.Machine); ok {
			p.note(m)
		}
	}
	p.placed = nil
	for _, m := range p.noted {
		p.onMachine[m.UID]++
		p.onDomain[SpreadDomain(m)]++
	}
	p.noted = p.noted[:0]
}

// Used returns the machine's allocation including this decision's claims.
func (p *Placer) Used(m *txn.Machine) txn.Resources {
	if e, ok := p.extra[m.UID]; ok {
		return m.Allocated.Add(e)
	}
	return m.Allocated
}

// Feasible reports whether a task asking for req under constraints may go on
// m: m is UP, holds req after this decision's earlier claims, and satisfies
// every constraint.
func (p *Placer) Feasible(m *txn.Machine, req txn.Resources, constraints []*omegav1.Constraint) bool {
	if m.State != omegav1.MachineState_MACHINE_STATE_UP {
		return false
	}
	if fit, _ := txn.Fits(m.Capacity, p.Used(m), req); !fit {
		return false
	}
	for _, c := range constraints {
		switch c.GetOperator() {
		case omegav1.Constraint_OPERATOR_EQUAL:
			if v, ok := m.Attributes()[c.GetAttribute()]; !ok || v != c.GetValue() {
				return false
			}
		case omegav1.Constraint_OPERATOR_NOT_EQUAL:
			if v, ok := m.Attributes()[c.GetAttribute()]; ok && v == c.GetValue() {
				return false
			}
		case omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES:
			if p.counted(); p.onMachine[m.UID] > 0 {
				return false
			}
		}
	}
	return true
}

// Take records that this decision claims req on m.
func (p *Placer) Take(m *txn.Machine, req txn.Resources) {
	if req.CPU < 0 || req.Memory < 0 {
		p.uncached = true
	}
	p.extra[m.UID] = p.extra[m.UID].Add(req)
	p.note(m)
}

// OnDomain returns how many of the job's tasks m's failure domain holds
// (SpreadDomain: m's alone when it declares none).
func (p *Placer) OnDomain(m *txn.Machine) int { p.counted(); return p.onDomain[SpreadDomain(m)] }

// DomainsUsed returns how many failure domains (SpreadDomain) hold a task
// of the job.
func (p *Placer) DomainsUsed() int { p.counted(); return len(p.onDomain) }

// BestFitScore scores placing req on m by how tightly it packs: the mean,
// over cpu and memory, of the machine's free share left afterwards (lower is
// better, 0 fills the machine). Borg's "best fit" without its extras.
func (p *Placer) BestFitScore(m *txn.Machine, req txn.Resources) float64 {
	used := p.Used(m).Add(req)
	share := func(free, capacity int64) float64 {
		if capacity <= 0 {
			return 0
		}
		return float64(free) / float64(capacity)
	}
	return (share(m.Capacity.CPU-used.CPU, m.Capacity.CPU) + share(m.Capacity.Memory-used.Memory, m.Capacity.Memory)) / 2
}

// Class is an equivalence class of a job's pending tasks: tasks with the
// same request and constraints are interchangeable for placement, so
// feasibility is worked out once per class.
type Class struct {
	Request     txn.Resources
	Constraints []*omegav1.Constraint
	Tasks       []*txn.Task
}

// Classes groups tasks into equivalence classes, in order of each class's
// first task (deterministic for a deterministic input order).
func Classes(tasks []*txn.Task) []*Class {
	var out []*Class
	byKey := map[string]*Class{}
	var sb strings.Builder
	var last *Class
	for _, t := range tasks {
		// A job's tasks mostly share one plain request: the previous
		// task's class, without making the key.
		if r := t.Request(); last != nil && len(r.Ext) == 0 && len(last.Request.Ext) == 0 && len(last.Constraints) == 0 &&
			r.CPU == last.Request.CPU && r.Memory == last.Request.Memory && len(t.Constraints()) == 0 {
			last.Tasks = append(last.Tasks, t)
			continue
		}
		sb.Reset()
		sb.WriteString(t.Request().String())
		for _, c := range t.Constraints() {
			sb.WriteString("|" + c.GetAttribute() + c.GetOperator().String() + c.GetValue())
		}
		k := sb.String()
		c, ok := byKey[k]
		if !ok {
			c = &Class{Request: t.Request(), Constraints: t.Constraints()}
			byKey[k] = c
			out = append(out, c)
		}
		c.Tasks = append(c.Tasks, t)
		last = c
	}
	return out
}

// Sample examines machines in random order — relaxed randomization, as in
// Borg: rather than scoring every machine, stop once enough feasible ones
// are found — and calls visit for each feasible machine until visit returns
// false, want feasible machines were visited, or limit machines were
// examined. It returns how many machines it examined.
func Sample(x *MachineIndex, v client.View, p *Placer, env Env, req txn.Resources, constraints []*omegav1.Constraint, want, limit int, visit func(*txn.Machine) bool) int {
	n := x.Len()
	if n == 0 {
		return 0
	}
	limit = min(limit, n)
	// A random start and an odd stride coprime with n visit distinct
	// machines without building a permutation.
	start := env.Rand.IntN(n)
	stride := 1
	if n > 1 {
		stride = coprimeStride(n, env.Rand.IntN(n-1)+1)
	}
	cur, cached := x.current(v), !p.uncached
	found := 0
	for i := 0; i < limit; i++ {
		j := (start + i*stride) % n
		var m *txn.Machine
		if cur {
			// What the machine has free in the view rules most machines
			// out without a lookup (a decision's claims only take room;
			// Feasible has the last word).
			s := &x.cur[j]
			if cached && (!s.up || req.CPU > s.cpu || req.Memory > s.mem) {
				continue
			}
			m = s.m
		} else {
			var ok bool
			if m, ok = v.Machine(x.uids[j]); !ok {
				continue
			}
		}
		if !p.Feasible(m, req, constraints) {
			continue
		}
		found++
		if !visit(m) || found >= want {
			return i + 1
		}
	}
	return limit
}

// SkipSample makes the random draws a Sample over x would make, without
// examining a machine: a scheduler that knows a scan cannot succeed (a task
// of an equivalence class that already found no machine in this decision)
// skips it and leaves the source where the scan would have.
func SkipSample(x *MachineIndex, env Env) {
	n := x.Len()
	if n == 0 {
		return
	}
	env.Rand.IntN(n)
	if n > 1 {
		env.Rand.IntN(n - 1)
	}
}

func coprimeStride(n, s int) int {
	for gcd(n, s) != 1 {
		s++
		if s >= n {
			s = 1
		}
	}
	return s
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// gangWhole drops a gang's claims when some of its tasks found no machine:
// a gang is placed whole or not at all, and an all-or-nothing commit only
// guards against conflicts, not against tasks the decision left out.
func gangWhole(d Decision) Decision {
	if d.AllOrNothing && d.Unplaceable > 0 {
		d.Ops = nil
	}
	return d
}

// Placement is how a scheduler picks a task's machine, a parameter of every
// built-in kind (Params "placement").
type Placement string

const (
	// PlacementBestFit is each kind's own policy, what a real cell wants:
	// the service scheduler's tightest of 16 feasible machines with
	// spreading across failure domains (Borg's best fit), the batch and
	// mapreduce schedulers' randomized first fit bounded at 64 machines
	// examined per task (Sample), the monolithic scheduler each job by its
	// kind's.
	PlacementBestFit Placement = "best-fit"
	// PlacementRandomFirstFit is the Omega paper's simulator's, for every
	// kind (CoreClusterSimulation.scala, scheduleJob): draw a machine at
	// random among the candidates left; if the task fits, claim it there
	// and keep the machine a candidate, else drop the machine; until the
	// job's tasks are placed or no candidate is left. No spreading, no
	// bound on the machines examined (FirstFit).
	PlacementRandomFirstFit Placement = "random-first-fit"
)

// Placements are the placements' names.
func Placements() []string {
	return []string{string(PlacementBestFit), string(PlacementRandomFirstFit)}
}

// ParsePlacement reads a placement's name.
func ParsePlacement(s string) (Placement, error) {
	switch p := Placement(s); p {
	case PlacementBestFit, PlacementRandomFirstFit:
		return p, nil
	}
	return "", fmt.Errorf("placement %q: want %s", s, strings.Join(Placements(), " or "))
}

// placementParam reads Params' "placement" (absent: best fit).
func placementParam(p Params) (Placement, error) {
	v, ok := p["placement"]
	if !ok {
		return PlacementBestFit, nil
	}
	return ParsePlacement(v)
}

// FirstFit is randomized first fit as the paper's simulator does it, over
// the machines of a MachineIndex: Start begins a run of identical tasks
// (one job's, or one class of them) with every machine a candidate; Next
// draws candidates at random, dropping each that cannot take the task,
// and returns the first that can (which stays a candidate for the next
// task), or nil once no candidate is left. The candidates' order carries
// over from run to run, as the reference's cached pool does.
type FirstFit struct {
	pool      []int32
	remaining int
}

// Start makes every machine of x a candidate.
func (f *FirstFit) Start(x *MachineIndex) {
	n := x.Len()
	if len(f.pool) != n {
		f.pool = make([]int32, n)
		for i := range f.pool {
			f.pool[i] = int32(i)
		}
	}
	f.remaining = n
}

// Next returns a machine among the candidates that takes req under
// constraints, drawn at random, or nil when no candidate is left.
func (f *FirstFit) Next(x *MachineIndex, v client.View, p *Placer, env Env, req txn.Resources, constraints []*omegav1.Constraint) *txn.Machine {
	cur, cached := x.current(v), !p.uncached
	for f.remaining > 0 {
		i := env.Rand.IntN(f.remaining)
		k := int(f.pool[i])
		var m *txn.Machine
		if cur {
			// As in Sample: what the machine has free rules it out
			// without a lookup, or it is the view's machine.
			if s := &x.cur[k]; !cached || (s.up && req.CPU <= s.cpu && req.Memory <= s.mem) {
				m = s.m
			}
		} else if vm, ok := v.Machine(x.At(k)); ok {
			m = vm
		}
		if m != nil && p.Feasible(m, req, constraints) {
			return m
		}
		last := f.remaining - 1
		f.pool[i], f.pool[last] = f.pool[last], f.pool[i]
		f.remaining = last
	}
	return nil
}

// placeAll places tasks by randomized first fit, one run per class of
// identical tasks, appending the claims to d.
func (f *FirstFit) placeAll(x *MachineIndex, v client.View, p *Placer, env Env, tasks []*txn.Task, d *Decision) {
	for _, class := range Classes(tasks) {
		f.Start(x)
		for _, t := range class.Tasks {
			m := f.Next(x, v, p, env, class.Request, class.Constraints)
			if m == nil {
				d.Unplaceable++
				continue
			}
			d.Ops = append(d.Ops, txn.Claim(t.UID, m.UID, class.Request, t.Version))
			p.Take(m, class.Request)
		}
	}
}
