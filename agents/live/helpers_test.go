package live

// The harness the core's tests and scripts share: an in-process store that
// checks its invariants after every commit, the agent's client through a
// transport the test can fail or race, a MemExecutor, and the core over
// them, stepped in virtual time.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/client/inproc"
	"github.com/omega-cell/omega/client/transport"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/internal/testkit/storekit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// t0 is where virtual time starts.
var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

const gib = int64(1) << 30

// agentTransport is the agent's transport to the store: it records the
// agent's commits, can fail them (down), and can run a commit of the
// test's just before the agent's next one lands (race), so that the state
// moves under the agent.
type agentTransport struct {
	client.Transport
	mu      sync.Mutex
	down    bool
	race    func()
	gap     bool // the watch's next poll finds its revisions compacted
	commits []agentCommit
}

// Watch is the store's watch, but that a gap (setGap) makes its next poll
// fail as compacted, so the client re-lists, as after a watch that fell
// behind the store's retained history.
func (a *agentTransport) Watch(ctx context.Context, from uint64) (transport.Watch, error) {
	w, err := a.Transport.Watch(ctx, from)
	if err != nil {
		return nil, err
	}
	return &gapWatch{Watch: w, tr: a}, nil
}

type gapWatch struct {
	transport.Watch
	tr *agentTransport
}

func (w *gapWatch) gap() bool {
	w.tr.mu.Lock()
	defer w.tr.mu.Unlock()
	g := w.tr.gap
	w.tr.gap = false
	return g
}

func (w *gapWatch) Poll(max int) ([]*txn.WriteSet, error) {
	if w.gap() {
		return nil, fmt.Errorf("test: a gap in the watch: %w", transport.ErrCompacted)
	}
	return w.Watch.Poll(max)
}

func (w *gapWatch) Next(ctx context.Context, max int) ([]*txn.WriteSet, error) {
	if w.gap() {
		return nil, fmt.Errorf("test: a gap in the watch: %w", transport.ErrCompacted)
	}
	return w.Watch.Next(ctx, max)
}

type agentCommit struct {
	tx  *txn.Txn
	res txn.Result
	err error
}

func (a *agentTransport) Commit(ctx context.Context, tx *txn.Txn) (txn.Result, error) {
	a.mu.Lock()
	down, race := a.down, a.race
	a.race = nil
	a.mu.Unlock()
	if race != nil {
		race()
	}
	var res txn.Result
	err := fmt.Errorf("test: the cell is unreachable: %w", transport.ErrUnavailable)
	if !down {
		res, err = a.Transport.Commit(ctx, tx)
	}
	a.mu.Lock()
	// The reporter reuses its operations' slice: keep a copy.
	kept := *tx
	kept.Ops = slices.Clone(tx.Ops)
	a.commits = append(a.commits, agentCommit{tx: &kept, res: res, err: err})
	a.mu.Unlock()
	return res, err
}

// take returns the commits since the last take.
func (a *agentTransport) take() []agentCommit {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.commits
	a.commits = nil
	return out
}

// harness is a cell of two machines — the agent's ("agent") and another
// ("other") — an agent core on the first, and virtual time.
type harness struct {
	t       testing.TB
	st      *store.Store
	tr      *agentTransport
	c       *client.Client
	clock   *testkit.Clock
	x       *MemExecutor
	core    *Core
	pool    *agents.AddressPool
	machine uuid.UUID
	other   uuid.UUID
	ids     *testkit.IDs
	uids    map[string]uuid.UUID
	names   map[uuid.UUID]string
	probes  map[uuid.UUID]Probe // asked and not answered yet
	answers []ProbeAnswer       // for the next step
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	st := storekit.Open(t, storekit.Options(t, store.DurabilityNone))
	h := &harness{
		t: t, st: st, clock: testkit.NewClock(t0), x: NewMemExecutor(),
		ids: testkit.NewIDs(1, 0x11fe), uids: map[string]uuid.UUID{}, names: map[uuid.UUID]string{},
		probes: map[uuid.UUID]Probe{},
	}
	h.tr = &agentTransport{Transport: inproc.New(st)}
	c, err := client.New(context.Background(), h.tr, client.Config{Component: "agent/agent", Clock: h.clock, Rand: rand.New(rand.NewPCG(5, 5))})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	h.c = c
	h.machine, h.other = h.ids.Next(), h.ids.Next()
	h.names[h.machine], h.names[h.other] = "agent", "other"
	if err := Register(context.Background(), c, Machine{UID: h.machine, Name: "agent", CPUMillis: 4000, MemoryBytes: 16 * gib, Agent: "127.0.0.1:7946"}); err != nil {
		t.Fatalf("register: %v", err)
	}
	h.commit(txn.CreateMachine(testkit.Machine(h.other, "other", testkit.Res(4000, 16*gib))))
	h.tr.take()
	h.startCore()
	return h
}

// startCore makes a core over the harness's executor at the current time.
func (h *harness) startCore() {
	h.t.Helper()
	h.pool = mustPool("10.1.0.0/24")
	core, err := NewCore(context.Background(), h.c, CoreConfig{
		Machine: h.machine, Executor: h.x, Pool: h.pool,
	}, h.now())
	if err != nil {
		h.t.Fatalf("new core: %v", err)
	}
	h.core = core
	h.t.Cleanup(core.Close)
}

// startAgent is a new agent process over the executor's processes: the
// executor adopts them as a new one over the same directory would, and a
// new core reconciles them with the cell; what the old agent knew in
// memory (probes out, answers) is gone. The old core must be closed.
func (h *harness) startAgent() {
	h.t.Helper()
	h.x.Reopen()
	h.probes, h.answers = map[uuid.UUID]Probe{}, nil
	h.startCore()
}

func mustPool(prefix string) *agents.AddressPool {
	p, err := agents.NewAddressPool(netip.MustParsePrefix(prefix))
	if err != nil {
		panic(err)
	}
	return p
}

func (h *harness) now() int64 { return h.clock.T.UnixNano() }

// at sets virtual time to t0+d.
func (h *harness) at(d time.Duration) {
	h.t.Helper()
	if next := t0.Add(d); next.Before(h.clock.T) {
		h.t.Fatalf("time goes back: %v after %v", d, h.clock.T.Sub(t0))
	} else {
		h.clock.T = next
	}
}

// commit commits ops straight to the store at the current virtual time and
// fails the test unless every one committed.
func (h *harness) commit(ops ...txn.Op) txn.Result {
	h.t.Helper()
	res, err := h.st.Commit(context.Background(), &txn.Txn{ViewRevision: h.st.Revision(), Component: "test", UnixNanos: h.now(), Ops: ops})
	if err != nil {
		h.t.Fatalf("test commit: %v", err)
	}
	if res.Conflicted() || res.Revision == 0 {
		h.t.Fatalf("test commit conflicted: %+v", res.Outcomes)
	}
	return res
}

// taskOpts is how a test's task runs.
type taskOpts struct {
	policy omegav1.RestartPolicy
	delay  time.Duration        // restart delay (0: the default, 1 s)
	check  *omegav1.HealthCheck // nil: none
}

// place creates a task and claims it on the agent's machine at the current
// time.
func (h *harness) place(name string, o taskOpts) uuid.UUID {
	h.t.Helper()
	u := h.ids.Next()
	h.uids[name], h.names[u] = u, name
	p := testkit.Task(u, uuid.Nil, name, testkit.Res(500, gib))
	p.Spec.Command = &omegav1.Command{Path: "/bin/" + name}
	p.Spec.RestartPolicy, p.Spec.RestartDelayMillis, p.Spec.HealthCheck = o.policy, o.delay.Milliseconds(), o.check
	h.commit(txn.CreateTask(p), txn.Claim(u, h.machine, testkit.Res(500, gib), 0))
	return u
}

// task is a task of the cell as it stands.
func (h *harness) task(u uuid.UUID) *txn.Task {
	h.t.Helper()
	tk, ok := h.st.Snapshot().Task(u)
	if !ok {
		h.t.Fatalf("task %s is not in the cell", h.name(u))
	}
	return tk
}

// evict sends a task back to PENDING (it leaves the agent's machine).
func (h *harness) evict(u uuid.UUID) {
	h.t.Helper()
	h.commit(txn.ForceEvict(u, h.task(u).Version, "test: evicted"))
}

// move places a task on the other machine.
func (h *harness) move(u uuid.UUID) {
	h.t.Helper()
	v := h.task(u).Version
	h.commit(txn.ForceEvict(u, v, "test: moved"), txn.Claim(u, h.other, testkit.Res(500, gib), v))
}

// raceNext makes the agent's next commit find u's version moved: just
// before it lands, the test reports u RUNNING itself.
func (h *harness) raceNext(u uuid.UUID) {
	h.tr.mu.Lock()
	defer h.tr.mu.Unlock()
	h.tr.race = func() { h.commit(txn.SetStatus(u, omegav1.TaskState_TASK_STATE_RUNNING, 0, "test: raced")) }
}

// setDown makes the agent's commits fail (the cell unreachable) or not.
func (h *harness) setDown(down bool) {
	h.tr.mu.Lock()
	defer h.tr.mu.Unlock()
	h.tr.down = down
}

// setGap makes the watch's next poll find its revisions compacted: what
// the cell does until then reaches the agent only by its re-list.
func (h *harness) setGap() {
	h.tr.mu.Lock()
	defer h.tr.mu.Unlock()
	h.tr.gap = true
}

// exit ends a task's process now with status st (nil: exit 0).
func (h *harness) exit(u uuid.UUID, st *omegav1.ExitStatus) {
	h.t.Helper()
	if err := h.x.Exit(u, st, h.now()); err != nil {
		h.t.Fatal(err)
	}
}

// answer answers the probe out for u, for the next step.
func (h *harness) answer(u uuid.UUID, healthy bool) {
	h.t.Helper()
	p, ok := h.probes[u]
	if !ok {
		h.t.Fatalf("no probe of %s is out", h.name(u))
	}
	delete(h.probes, u)
	a := ProbeAnswer{Task: u, Probe: p.Probe, At: h.now()}
	if !healthy {
		a.Err = fmt.Errorf("test: unhealthy")
	}
	h.answers = append(h.answers, a)
}

// step steps the core at the current time with the answers given since
// the last step, and keeps the probes it asks for.
func (h *harness) step() []Probe {
	h.t.Helper()
	probes, err := h.core.Step(context.Background(), h.now(), h.answers)
	if err != nil {
		h.t.Fatalf("step at %v: %v", h.clock.T.Sub(t0), err)
	}
	h.answers = nil
	for _, p := range probes {
		h.probes[p.Task] = p
	}
	return slices.Clone(probes)
}

func (h *harness) name(u uuid.UUID) string {
	if n, ok := h.names[u]; ok {
		return n
	}
	return u.String()[:8]
}

// events writes what the executor was asked since the last call, a line
// each.
func (h *harness) events(b *strings.Builder) {
	for _, e := range h.x.Events() {
		fmt.Fprintf(b, "exec %s %s", e.Kind, h.name(e.Task))
		switch {
		case e.Address != "":
			fmt.Fprintf(b, " at %s", e.Address)
		case e.Kind == EvStop && e.Running:
			b.WriteString(" (running: signalled)")
		}
		b.WriteByte('\n')
	}
}

// reports writes the agent's status reports since the last call, an
// operation a line, with its outcome.
func (h *harness) reports(b *strings.Builder) {
	for _, c := range h.tr.take() {
		for i, op := range c.tx.Ops {
			if op.Kind != txn.OpSetStatus {
				continue
			}
			fmt.Fprintf(b, "report %s %s %q", h.name(op.Task), stateName(op.State), op.Message)
			switch {
			case c.err != nil:
				fmt.Fprintf(b, ": failed (%v)", c.err)
			case !c.res.Outcomes[i].Committed():
				fmt.Fprintf(b, ": %s", strings.TrimPrefix(c.res.Outcomes[i].Code.String(), "OUTCOME_CODE_"))
			}
			b.WriteByte('\n')
		}
	}
}

// cell writes the tasks of the cell, in name order: state, machine,
// message, and the agent's run report.
func (h *harness) cell(b *strings.Builder) {
	var names []string
	for n := range h.uids {
		names = append(names, n)
	}
	slices.Sort(names)
	s := h.st.Snapshot()
	for _, n := range names {
		tk, ok := s.Task(h.uids[n])
		if !ok {
			fmt.Fprintf(b, "%s: gone\n", n)
			continue
		}
		fmt.Fprintf(b, "%s: %s", n, stateName(tk.State))
		if tk.Machine != uuid.Nil {
			fmt.Fprintf(b, " on %s", h.name(tk.Machine))
		}
		if m := tk.Message(); m != "" {
			fmt.Fprintf(b, " %q", m)
		}
		if r := tk.Run(); r != nil {
			fmt.Fprintf(b, " run(address=%s restarts=%d", r.GetAddress(), r.GetRestarts())
			if r.GetHealth() != omegav1.HealthState_HEALTH_STATE_UNSPECIFIED {
				fmt.Fprintf(b, " health=%s", strings.TrimPrefix(r.GetHealth().String(), "HEALTH_STATE_"))
			}
			if e := r.GetLastExit(); e != nil {
				fmt.Fprintf(b, " last=%q", ExitText(e))
			}
			b.WriteByte(')')
		}
		b.WriteByte('\n')
	}
}

// procs writes the executor's processes, in name order.
func (h *harness) procs(b *strings.Builder) {
	var lines []string
	for _, u := range h.x.Tasks() {
		p, _ := h.x.Proc(u)
		l := fmt.Sprintf("%s at %s runs=%d", h.name(u), p.Address, p.Runs)
		switch {
		case p.Running && p.Killed:
			l += " running (killed)"
		case p.Running:
			l += " running"
		default:
			l += fmt.Sprintf(" ended (%s)", ExitText(p.Exit))
		}
		if !p.Claimed {
			l += " unclaimed"
		}
		lines = append(lines, l)
	}
	slices.Sort(lines)
	if len(lines) == 0 {
		lines = []string{"no processes"}
	}
	b.WriteString(strings.Join(lines, "\n") + "\n")
}

func stateName(s omegav1.TaskState) string { return strings.TrimPrefix(s.String(), "TASK_STATE_") }

// onFailure is a task restarted when it fails, after delay doubling.
func onFailure(delay time.Duration) taskOpts {
	return taskOpts{policy: omegav1.RestartPolicy_RESTART_POLICY_ON_FAILURE, delay: delay}
}

// execCheck is an exec health check probed every period, failing after
// threshold failures in a row.
func execCheck(period time.Duration, threshold int32) *omegav1.HealthCheck {
	return &omegav1.HealthCheck{
		Probe:            &omegav1.HealthCheck_Exec{Exec: &omegav1.ExecProbe{Path: "/bin/check"}},
		PeriodMillis:     period.Milliseconds(),
		FailureThreshold: threshold,
	}
}
