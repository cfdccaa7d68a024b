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
	x := &Executor{cfg: cfg, procs: map[uuid.UUID]*proc{}, ready: make(chan struct{}, 1)}
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
	x.procs[uid] = p
	x.wg.Add(1)
	go x.reap(p) // not our child: watch for it to go
	return nil
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

// reap waits for an adopted shim (not this process's child) to end.
func (x *Executor) reap(p *proc) {
	defer x.wg.Done()
	for {
		if err := syscall.Kill(p.pid, 0); errors.Is(err, syscall.ESRCH) {
			break
		}
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
			grace: x.graceOf(t), exited: &ExitStatus{Code: -1, Error: err.Error()}, at: time.Now().UnixNano()}
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
		cg, err := x.cfg.Cgroups.Prepare(t.UID, t.Request.CPU, t.Request.Memory)
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
	if err := os.WriteFile(filepath.Join(dir, filePID), []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
		cmd.Process.Kill()
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
// period is over if anything of it is left.
func (x *Executor) terminate(p *proc) {
	syscall.Kill(-p.pid, syscall.SIGTERM)
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		deadline := time.Now().Add(p.grace)
		for time.Now().Before(deadline) {
			if err := syscall.Kill(-p.pid, 0); errors.Is(err, syscall.ESRCH) {
				return // nothing of the session left
			}
			time.Sleep(100 * time.Millisecond)
		}
		syscall.Kill(-p.pid, syscall.SIGKILL)
	}()
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
