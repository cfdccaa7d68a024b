package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Config configures an Executor.
type Config struct {
	// Dir holds a directory per task, named by its uid: what was started,
	// the shim's pid, the exit status, stdout and stderr, and the task's
	// working directory.
	Dir string
	// Shim is the command line before the task's directory that runs the
	// shim, e.g. [/usr/local/bin/omega task-shim].
	Shim []string
	// Grace is how long a task stopped by the cell (evicted, killed) has
	// between SIGTERM and SIGKILL. Default 10s.
	Grace time.Duration
	// Env is the environment every task starts from (its command's env is
	// added). Default: PATH only.
	Env []string
	// Cgroups, if set, confines each task to its request (DetectCgroups).
	Cgroups *Cgroups

	// The system calls that tell a process apart, and signal it (nil: the
	// real ones; tests replace them).
	startOf func(pid int) (uint64, error)
	bootID  func() (string, error)
	kill    func(pid int, sig syscall.Signal) error
}

// identity tells the process a pid named when it was recorded from one
// that has the pid now (after the process ended, or the host rebooted,
// the kernel hands the number out again): DIR/shim.id, beside shim.pid.
type identity struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // field 22 of /proc/PID/stat: clock ticks since boot
	Boot  string `json:"boot"`  // /proc/sys/kernel/random/boot_id
}

// procStart is the start time of process pid, in clock ticks since boot
// (field 22 of /proc/PID/stat); an error wrapping os.ErrNotExist if no
// process has the pid.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, syscall.ESRCH) {
		err = fmt.Errorf("process %d: %w", pid, os.ErrNotExist) // it ended while read
	}
	if err != nil {
		return 0, err
	}
	// Field 2, the command, is in parentheses and may hold anything: the
	// fields counted from 3 follow its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command, want 20 or more", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// bootID is the host's boot id: a random uuid the kernel draws at each
// boot.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
}

// taskFile is what the agent started, kept in the task's directory.
type taskFile struct {
	UID      string   `json:"uid"`
	Assigned int64    `json:"assigned"` // the placement's claim time
	Path     string   `json:"path"`
	Args     []string `json:"args,omitempty"`
	Address  string   `json:"address,omitempty"` // the task's own IP
	GraceMS  int64    `json:"grace_ms,omitempty"`
}

type proc struct {
	uid      uuid.UUID
	assigned int64
	gen      uint64 // the tracker's placement; 0 until Start matched an adopted process
	pid      int    // the shim's
	start    uint64 // its start time (procStart); 0 if unknown
	dir      string
	address  string        // the task's own IP ("" if none)
	grace    time.Duration // between SIGTERM and SIGKILL
	task     *txn.Task     // what runs (nil for an adopted process until Start matched it)
	env      []string      // the task's environment, for exec probes
	stopped  bool          // the cell ended the placement: report nothing
	exited   *ExitStatus
	at       int64 // when it was seen to end
}

// Executor runs tasks as processes (agents.Executor). Start, Stop and
// Exits are called from the agent core's goroutine; the goroutines that
// wait on the shims hand their exits in through a lock.
type Executor struct {
	cfg   Config
	mu    sync.Mutex
	procs map[uuid.UUID]*proc
	exits []agents.Exit
	ready chan struct{}
	wg    sync.WaitGroup
	boot  string // this boot's id ("" if unknown)
}

var _ agents.Executor = (*Executor)(nil)

// New makes an executor over cfg.Dir and adopts what it finds there: the
// tasks of an agent that ran before (their shims still running, or their
// exit written and not yet reported). An adopted task is reported once
// the tracker places it again (Start with the same uid and claim time);
// one the cell no longer places is killed (Stop) by the agent core after
// its first listing (Sweep).
func New(cfg Config) (*Executor, error) {
	if cfg.Dir == "" || len(cfg.Shim) == 0 {
		return nil, errors.New("process executor: Dir and Shim are required")
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Env == nil {
		cfg.Env = []string{"PATH=" + os.Getenv("PATH")}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.startOf == nil {
		cfg.startOf = procStart
	}
	if cfg.bootID == nil {
		cfg.bootID = bootID
	}
	if cfg.kill == nil {
		cfg.kill = syscall.Kill
	}
	x := &Executor{cfg: cfg, procs: map[uuid.UUID]*proc{}, ready: make(chan struct{}, 1)}
	x.boot, _ = cfg.bootID() // unknown: boot ids are not compared
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		uid, err := uuid.Parse(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		if err := x.adopt(uid, filepath.Join(cfg.Dir, e.Name())); err != nil {
			return nil, fmt.Errorf("adopt task %s: %w", uid, err)
		}
	}
	return x, nil
}

func (x *Executor) adopt(uid uuid.UUID, dir string) error {
	var tf taskFile
	b, err := os.ReadFile(filepath.Join(dir, fileTask))
	if errors.Is(err, os.ErrNotExist) {
		return nil // never started
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &tf); err != nil {
		return fmt.Errorf("%s: %w", fileTask, err)
	}
	p := &proc{uid: uid, assigned: tf.Assigned, dir: dir, address: tf.Address, grace: time.Duration(tf.GraceMS) * time.Millisecond}
	if p.grace <= 0 {
		p.grace = x.cfg.Grace
	}
	if st, ok := readExit(dir); ok {
		p.exited, p.at = &st, time.Now().UnixNano()
		x.procs[uid] = p
		return nil
	}
	pb, err := os.ReadFile(filepath.Join(dir, filePID))
	if err == nil {
		p.pid, err = strconv.Atoi(strings.TrimSpace(string(pb)))
	}
	if err != nil || p.pid <= 1 {
		// Started no further than its task file (the agent stopped before
		// its supervisor ran): it ended without a trace.
		p.exited, p.at = &ExitStatus{Code: -1, Error: "the agent stopped before the task's supervisor started"}, time.Now().UnixNano()
		x.procs[uid] = p
		return nil
	}
	// The pid may name another process by now (the host rebooted, or the
	// supervisor ended long ago and the number went round): the identity
	// recorded beside it tells. A pid file without one (an agent from
	// before identities, or one that stopped between the two files) is
	// taken as it is, and the process that has the pid now is the one
	// watched from here on.
	var id identity
	if b, err := os.ReadFile(filepath.Join(dir, fileShimID)); err == nil && json.Unmarshal(b, &id) == nil && id.PID == p.pid {
		if why := x.otherThan(id); why != "" {
			p.exited, p.at = &ExitStatus{Code: -1, Error: why}, time.Now().UnixNano()
			x.procs[uid] = p
			return nil
		}
		p.start = id.Start
	} else if start, err := x.cfg.startOf(p.pid); err == nil {
		p.start = start
	}
	x.procs[uid] = p
	x.wg.Add(1)
	go x.reap(p) // not our child: watch for it to go
	return nil
}

// otherThan says why the process that has id's pid now is not the one id
// recorded ("" if it is, or no process has the pid: the watch on it then
// finds it gone).
func (x *Executor) otherThan(id identity) string {
	if id.Boot != "" && x.boot != "" && id.Boot != x.boot {
		return fmt.Sprintf("the task's supervisor (pid %d) ran before the host rebooted (boot %s, now %s): it ended without a trace", id.PID, id.Boot, x.boot)
	}
	start, err := x.cfg.startOf(id.PID)
	if err != nil || id.Start == 0 || start == id.Start {
		return ""
	}
	return fmt.Sprintf("the task's supervisor (pid %d, started at tick %d) ended without a trace: the pid is another process's now (started at tick %d)", id.PID, id.Start, start)
}

// mine reports whether p's pid still names p's process: false if no
// process has it (gone) or another process does (reused), which a signal
// must then never reach.
func (x *Executor) mine(p *proc) bool {
	start, err := x.cfg.startOf(p.pid)
	switch {
	case err == nil:
		return p.start == 0 || start == p.start
	case errors.Is(err, os.ErrNotExist):
		return false
	}
	// /proc cannot tell (not mounted): as before identities.
	return !errors.Is(x.cfg.kill(p.pid, 0), syscall.ESRCH)
}

func readExit(dir string) (ExitStatus, bool) {
	b, err := os.ReadFile(filepath.Join(dir, fileExit))
	if err != nil {
		return ExitStatus{}, false
	}
	var st ExitStatus
	if json.Unmarshal(b, &st) != nil {
		return ExitStatus{Code: -1, Error: "unreadable exit status"}, true
	}
	return st, true
}

// reap waits for an adopted shim (not this process's child) to end: its
// pid names no process, or another one.
func (x *Executor) reap(p *proc) {
	defer x.wg.Done()
	for x.mine(p) {
		time.Sleep(200 * time.Millisecond)
	}
	x.ended(p)
}

// ended records a shim's end: its exit, if the cell still places it.
func (x *Executor) ended(p *proc) {
	st, ok := readExit(p.dir)
	if !ok {
		st = ExitStatus{Code: -1, Error: "the task's supervisor ended without an exit status"}
	}
	if x.cfg.Cgroups != nil {
		x.cfg.Cgroups.Remove(p.uid) // fails, harmlessly, while any of its processes is left
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	p.exited, p.at = &st, time.Now().UnixNano()
	x.emit(p)
}

// emit queues p's exit for Exits, once it is matched to a placement (a
// gen) and not stopped. Called with mu held.
func (x *Executor) emit(p *proc) {
	if p.exited == nil || p.gen == 0 || p.stopped {
		return
	}
	state := omegav1.TaskState_TASK_STATE_SUCCEEDED
	if !p.exited.Success() {
		state = omegav1.TaskState_TASK_STATE_FAILED
	}
	x.exits = append(x.exits, agents.Exit{Task: p.uid, Gen: p.gen, At: p.at, State: state, Message: p.exited.String(), Status: p.exited.Proto()})
	p.stopped = true // reported: nothing more about it
	select {
	case x.ready <- struct{}{}:
	default:
	}
}

// dropExits forgets the queued exits of uid (mu held).
func (x *Executor) dropExits(uid uuid.UUID) {
	kept := x.exits[:0]
	for _, e := range x.exits {
		if e.Task != uid {
			kept = append(kept, e)
		}
	}
	x.exits = kept
}

// Unclaim marks every process as claimed by no placement, before a
// re-list tells the placements again (Start); Sweep afterwards stops
// those the cell no longer places here.
func (x *Executor) Unclaim() {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range x.procs {
		p.gen = 0
	}
}

// Ready is signalled when exits are waiting.
func (x *Executor) Ready() <-chan struct{} { return x.ready }

// Start runs a placement with no address of its own (agents.Executor).
func (x *Executor) Start(t *txn.Task, pl agents.Placement) { x.Run(t, pl, "") }

// Run runs a placement: a process under its shim, in a session of its
// own, with OMEGA_TASK_IP set to address — or, for a process this executor
// adopted at the same placement, nothing new.
func (x *Executor) Run(t *txn.Task, pl agents.Placement, address string) {
	x.mu.Lock()
	if p, ok := x.procs[t.UID]; ok {
		if p.assigned == t.Assigned {
			// The same placement: adopted after a restart, or told again by
			// a re-list. Nothing new runs; an exit already seen is reported
			// again under the placement's new name, in case the first report
			// did not commit.
			p.gen, p.task = pl.Gen, t
			if p.env == nil {
				p.env = x.env(t, p.address)
			}
			if p.exited != nil {
				p.stopped = false
				x.dropExits(t.UID)
			}
			x.emit(p)
			x.mu.Unlock()
			return
		}
		x.mu.Unlock()
		x.Stop(t.UID, pl) // another placement's process: it goes
		x.mu.Lock()
	}
	x.mu.Unlock()
	x.launch(t, pl.Gen, address)
}

// launch starts t's process and records it (or its failure to start, as an
// exit).
func (x *Executor) launch(t *txn.Task, gen uint64, address string) {
	p, err := x.start(t, gen, address)
	x.mu.Lock()
	defer x.mu.Unlock()
	if err != nil {
		dir := filepath.Join(x.cfg.Dir, t.UID.String())
		p = &proc{uid: t.UID, assigned: t.Assigned, gen: gen, dir: dir, address: address, task: t,
			grace: x.graceOf(t), exited: &ExitStatus{Code: -1, Error: "could not start: " + err.Error()}, at: time.Now().UnixNano()}
		x.procs[t.UID] = p
		x.emit(p)
		return
	}
	x.procs[t.UID] = p
}

// Restart runs the process of a placement whose process ended (its restart
// policy says so): the same directory, output appended. It returns false
// if uid is not a placement of this executor's, or its process still runs.
func (x *Executor) Restart(uid uuid.UUID) bool {
	x.mu.Lock()
	p, ok := x.procs[uid]
	if !ok || p.exited == nil || p.task == nil || p.gen == 0 {
		x.mu.Unlock()
		return false
	}
	x.dropExits(uid)
	t, gen, address := p.task, p.gen, p.address
	x.mu.Unlock()
	x.launch(t, gen, address)
	return true
}

// Address is the address a placement's process was given (kept in its
// directory, so an adopted process keeps its own).
func (x *Executor) Address(uid uuid.UUID, assigned int64) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if p, ok := x.procs[uid]; ok && p.assigned == assigned {
		return p.address
	}
	return ""
}

// Addresses are the addresses of every process this executor knows.
func (x *Executor) Addresses() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for _, p := range x.procs {
		if p.address != "" {
			out = append(out, p.address)
		}
	}
	return out
}

func (x *Executor) graceOf(t *txn.Task) time.Duration {
	if g := t.GracePeriodMillis(); g > 0 {
		return time.Duration(g) * time.Millisecond
	}
	return x.cfg.Grace
}

// env is the environment a task's processes (and its exec probes) get.
func (x *Executor) env(t *txn.Task, address string) []string {
	env := append(append([]string{}, x.cfg.Env...), "OMEGA_TASK_UID="+t.UID.String(), "OMEGA_TASK_NAME="+t.Name())
	if address != "" {
		env = append(env, "OMEGA_TASK_IP="+address)
	}
	for k, v := range t.Command().GetEnv() {
		env = append(env, k+"="+v)
	}
	return env
}

func (x *Executor) start(t *txn.Task, gen uint64, address string) (*proc, error) {
	cmdSpec := t.Command()
	if cmdSpec.GetPath() == "" {
		return nil, errors.New("the task has no command")
	}
	dir := filepath.Join(x.cfg.Dir, t.UID.String())
	os.Remove(filepath.Join(dir, fileExit)) // an earlier run's
	work := filepath.Join(dir, dirWork)
	if wd := cmdSpec.GetWorkingDir(); wd != "" {
		work = filepath.Join(work, filepath.Clean("/"+wd)) // validated relative; cleaned again here
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	grace := x.graceOf(t)
	if err := writeJSON(dir, fileTask, taskFile{UID: t.UID.String(), Assigned: t.Assigned, Path: cmdSpec.GetPath(), Args: cmdSpec.GetArgs(),
		Address: address, GraceMS: grace.Milliseconds()}); err != nil {
		return nil, err
	}
	argv := append(append(append([]string{}, x.cfg.Shim[1:]...), "--workdir", work, dir, "--", cmdSpec.GetPath()), cmdSpec.GetArgs()...)
	cmd := exec.Command(x.cfg.Shim[0], argv...)
	cmd.Env = x.env(t, address)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // its own session: it outlives the agent
	if x.cfg.Cgroups != nil {
		cg, err := x.cfg.Cgroups.Prepare(t.UID, t.Request().CPU, t.Request().Memory)
		if err != nil {
			return nil, fmt.Errorf("confine the task: %w", err)
		}
		defer cg.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(cg.Fd())
	}
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	cmd.ExtraFiles = []*os.File{wr} // fd 3: the shim says when the task runs
	err = cmd.Start()
	wr.Close()
	if err != nil {
		return nil, err
	}
	// Wait for the shim to say the task runs (or could not start), or to
	// end: a Stop that follows at once then meets a shim that forwards it.
	rd.Read(make([]byte, 1))
	p := &proc{uid: t.UID, assigned: t.Assigned, gen: gen, pid: cmd.Process.Pid, dir: dir, address: address, grace: grace, task: t, env: cmd.Env}
	// Our child, not waited for yet: the pid is its (a zombie's, if it
	// ended) until cmd.Wait, so its start time is read safely now. The pid
	// file comes first, its identity after: an agent that stops between
	// the two leaves this run's pid beside an earlier run's identity (or
	// none), which adoption then ignores (another pid), and an agent that
	// stops before both leaves the earlier run's pid and identity, which
	// tell that process is gone.
	start, serr := x.cfg.startOf(p.pid)
	err = os.WriteFile(filepath.Join(dir, filePID), []byte(strconv.Itoa(p.pid)+"\n"), 0o644)
	if err == nil && serr == nil {
		p.start = start
		err = writeJSON(dir, fileShimID, identity{PID: p.pid, Start: start, Boot: x.boot})
	}
	if err != nil {
		syscall.Kill(-p.pid, syscall.SIGKILL) // its session: not waited for, the pid is still its
		cmd.Wait()
		return nil, err
	}
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		cmd.Wait()
		x.ended(p)
	}()
	return p, nil
}

// Stop ends a placement the cell ended: SIGTERM to the task's session,
// SIGKILL after its grace period; nothing more is reported about it.
func (x *Executor) Stop(uid uuid.UUID, _ agents.Placement) {
	x.mu.Lock()
	p, ok := x.procs[uid]
	if !ok {
		x.mu.Unlock()
		return
	}
	delete(x.procs, uid)
	running := p.exited == nil
	p.stopped = true
	x.mu.Unlock()
	if running && p.pid != 0 {
		x.terminate(p)
	}
}

// Kill stops a placement's process (it failed its health checks) with its
// grace period; unlike Stop, its end is reported as an exit.
func (x *Executor) Kill(uid uuid.UUID) {
	x.mu.Lock()
	p, ok := x.procs[uid]
	running := ok && p.exited == nil && p.pid != 0
	x.mu.Unlock()
	if running {
		x.terminate(p)
	}
}

// terminate sends SIGTERM to p's session, and SIGKILL once its grace
// period is over if anything of it is left — never to a session whose
// leader's pid another process has now. (With the leader gone and the
// session's other processes left, the session is still p's: the kernel
// hands out no pid a session or group still holds.)
func (x *Executor) terminate(p *proc) {
	if x.reused(p) {
		return
	}
	x.cfg.kill(-p.pid, syscall.SIGTERM)
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		deadline := time.Now().Add(p.grace)
		for time.Now().Before(deadline) {
			if err := x.cfg.kill(-p.pid, 0); errors.Is(err, syscall.ESRCH) || x.reused(p) {
				return // nothing of the session left
			}
			time.Sleep(100 * time.Millisecond)
		}
		if !x.reused(p) {
			x.cfg.kill(-p.pid, syscall.SIGKILL)
		}
	}()
}

// reused reports whether another process has p's pid now.
func (x *Executor) reused(p *proc) bool {
	start, err := x.cfg.startOf(p.pid)
	return err == nil && p.start != 0 && start != p.start
}

// Sweep stops the adopted processes no placement claimed: call it after
// the first listing, once every placement was Started.
func (x *Executor) Sweep() {
	x.mu.Lock()
	var orphans []uuid.UUID
	for u, p := range x.procs {
		if p.gen == 0 {
			orphans = append(orphans, u)
		}
	}
	x.mu.Unlock()
	for _, u := range orphans {
		x.Stop(u, agents.Placement{})
	}
}

// Exits hands out the exits seen so far.
func (x *Executor) Exits(_ int64, into []agents.Exit) []agents.Exit {
	x.mu.Lock()
	defer x.mu.Unlock()
	into = append(into, x.exits...)
	x.exits = x.exits[:0]
	return into
}

// Unsent takes an exit back, to hand out again.
func (x *Executor) Unsent(e agents.Exit) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.exits = append(x.exits, e)
}

// Next foresees nothing: exits arrive as they happen (Ready).
func (x *Executor) Next() (int64, bool) { return 0, false }

// Running counts the processes running.
func (x *Executor) Running() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, p := range x.procs {
		if p.exited == nil {
			n++
		}
	}
	return n
}

// Close waits for the goroutines that watch the processes of stopped
// tasks; the processes of running tasks go on (they outlive the agent).
func (x *Executor) Close() {
	// The waiters of running shims end only with them: leave those.
}
