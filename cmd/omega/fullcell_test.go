package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// TestFullCell: the whole live cell on loopback, every part a process of
// the built binary — a server with tokens, three agents, a batch and a
// service scheduler, an `omega watch` — running real shell commands and
// small HTTP servers, through the failures a cell lives with:
//
//   - a batch job runs on three machines and SUCCEEDS; a service of two
//     HTTP servers (one per machine) stays RUNNING and HEALTHY;
//   - an agent running a service task is SIGKILLed: its machine goes DOWN,
//     its task LOST, and the service runs again on the machines left (a new
//     placement elsewhere); restarted, the agent stops the orphaned process;
//   - a service task's process (not its supervisor) is killed: its agent
//     restarts it at the same placement, counting the restart;
//   - an agent is restarted (SIGTERM, then started on its --data): it adopts
//     its tasks without running any twice (the same processes, placements
//     and restart counts, no second process for any task) and supervises
//     them (the adopted process killed is restarted by the new agent);
//   - the server is restarted on its --data and addresses while a batch
//     job runs: nothing it acknowledged is lost (every object of a view
//     taken before the stop, at its version or later; the revision it
//     stopped at is the one it reopens at), the client that watched across
//     the restart holds exactly what a fresh listing shows, `omega watch`
//     goes on printing, the agents rejoin the membership and report, and
//     the schedulers place a job submitted afterwards;
//   - wrong or missing tokens are refused, before and after the restart;
//   - at the end no task process is left.
//
// The agents' rejoining is checked with a bound of 5 s from the server's
// restart; today they do not rejoin (see the check), so the test fails
// there unless memberlist's periodic push-pull happens to reach the server
// within the bound. OMEGA_FULLCELL_LOGS=1 prints every process's log when
// it passes too.
func TestFullCell(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("the service's tasks are python3 -m http.server: no python3 on PATH")
	}
	began := time.Now()
	step := func(what string) { t.Logf("%5.1fs %s", time.Since(began).Seconds(), what) }
	dir := t.TempDir()
	var agentDirs []string
	// Registered first, so it runs last, after every helper's cleanup
	// (processes killed, task sessions killed): nothing of a task may be
	// left, whether the test passed or not.
	t.Cleanup(func() {
		if left := fcLeftovers(agentDirs); len(left) > 0 {
			t.Errorf("task processes left after the cleanups: %v", left)
			fcKillAll(left)
		}
	})

	// Tokens: an admin (the test), a submitter, the two schedulers, the
	// three agents.
	tokens := map[string]string{
		"admin":     "admin-fullcell-0123456789",
		"submitter": "submit-fullcell-012345678",
		"batch-0":   "sched-fullcell-batch-0123",
		"service-0": "sched-fullcell-service-01",
		"m1":        "agent-fullcell-m1-0123456",
		"m2":        "agent-fullcell-m2-0123456",
		"m3":        "agent-fullcell-m3-0123456",
		"wrong":     "wrong-fullcell-012345678",
	}
	tokFile := map[string]string{}
	for name, tok := range tokens {
		tokFile[name] = filepath.Join(dir, name+".token")
		if err := os.WriteFile(tokFile[name], []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tokensFile := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokensFile, []byte(fmt.Sprintf("# token,role,name\n%s,admin,ops\n%s,submitter,alice\n%s,scheduler,batch-0\n%s,scheduler,service-0\n%s,agent,m1\n%s,agent,m2\n%s,agent,m3\n",
		tokens["admin"], tokens["submitter"], tokens["batch-0"], tokens["service-0"], tokens["m1"], tokens["m2"], tokens["m3"])), 0o600); err != nil {
		t.Fatal(err)
	}

	sdata := filepath.Join(dir, "server")
	srv := startServerAt(t, sdata, "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h", "--tokens", tokensFile)
	servers := []*serverProc{srv}
	c, _ := newRemoteClientWith(t, srv.grpc, "admin/ops", tokFile["admin"])

	type agent struct {
		name, dir string
		args      []string
		p         *proc
	}
	var agents []*agent
	for _, name := range []string{"m1", "m2", "m3"} {
		a := &agent{name: name, dir: filepath.Join(dir, name)}
		a.args = []string{"agent", "--server", srv.grpc, "--token-file", tokFile[name], "--join", srv.gossip, "--name", name, "--data", a.dir, "--cpu", "2", "--memory", "2Gi"}
		a.p = startProc(t, a.args...)
		agents = append(agents, a)
		agentDirs = append(agentDirs, a.dir)
	}
	batch := startProc(t, "scheduler", "--kind", "batch", "--name", "batch-0", "--server", srv.grpc, "--token-file", tokFile["batch-0"])
	service := startProc(t, "scheduler", "--kind", "service", "--name", "service-0", "--server", srv.grpc, "--token-file", tokFile["service-0"])

	// A watcher of the whole cell, from before anything runs until the end.
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	watched, watchErr := newOutput(), newOutput()
	watch := exec.Command(bin, "watch", "--server", srv.grpc, "--token-file", tokFile["admin"])
	watch.Stdout, watch.Stderr = watched, watchErr
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	watchDone := make(chan error, 1)
	go func() { watchDone <- watch.Wait() }()
	t.Cleanup(func() {
		watch.Process.Kill()
		err := <-watchDone
		watchDone <- err
	})
	defer func() { // OMEGA_FULLCELL_LOGS=1 prints them when it passes too
		if !t.Failed() && os.Getenv("OMEGA_FULLCELL_LOGS") == "" {
			return
		}
		for i, s := range servers {
			t.Logf("server (start %d):\n%s", i+1, s.log())
		}
		for _, a := range agents {
			t.Logf("agent %s:\n%s", a.name, a.p.log())
		}
		t.Logf("batch-0:\n%s\nservice-0:\n%s", batch.log(), service.log())
		t.Logf("omega watch (stderr):\n%s\nomega watch (stdout, last 4000 bytes):\n%s", watchErr.String(), fcTail(watched.String(), 4000))
	}()
	watched.waitFor(t, "watching from revision", 30*time.Second)

	// Refused: a wrong token, no token, an agent's token to submit.
	fcRefused := func(when string) {
		t.Helper()
		for name, args := range map[string][]string{
			"no token":    {"get", "machines", "--server", srv.grpc},
			"wrong token": {"get", "machines", "--server", srv.grpc, "--token-file", tokFile["wrong"]},
		} {
			if out, errs, err := run(t, "", args...); err == nil || !strings.Contains(errs, "token") {
				t.Fatalf("%s, %s: not refused: %v\n%s%s", when, name, err, out, errs)
			}
		}
	}
	fcRefused("before the restart")

	var byMachine map[uuid.UUID]*agent
	waitFor(t, c, 60*time.Second, "three machines UP", func(v client.View) bool {
		byMachine = map[uuid.UUID]*agent{}
		v.RangeMachines(func(m *txn.Machine) bool {
			for _, a := range agents {
				if m.Name() == a.name && m.State == omegav1.MachineState_MACHINE_STATE_UP {
					byMachine[m.UID] = a
				}
			}
			return true
		})
		return len(byMachine) == 3
	})
	machineOf := map[*agent]uuid.UUID{}
	for u, a := range byMachine {
		machineOf[a] = u
	}
	jobFile := filepath.Join(dir, "jobs")
	os.MkdirAll(jobFile, 0o755)
	submit := func(name, yaml string) {
		t.Helper()
		f := filepath.Join(jobFile, name+".yaml")
		if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, err := run(t, "", "submit", "-f", f, "--server", srv.grpc, "--token-file", tokFile["submitter"])
		if err != nil || !strings.HasPrefix(out, "job/"+name+" created") {
			t.Fatalf("submit %s: %v\n%s%s", name, err, out, errs)
		}
	}
	batchJob := func(name, script string) string {
		return fmt.Sprintf(`meta: {name: %s}
spec:
  kind: batch
  replicas: 3
  template:
    resources: {cpu: 100m, memory: 16Mi}
    command: {path: /bin/sh, args: [-c, '%s']}
    constraints: [{operator: OPERATOR_DIFFERENT_MACHINES}]
`, name, script)
	}
	// The agent's token may not submit.
	{
		f := filepath.Join(jobFile, "intruder.yaml")
		os.WriteFile(f, []byte(batchJob("intruder", "true")), 0o644)
		if _, errs, err := run(t, "", "submit", "-f", f, "--server", srv.grpc, "--token-file", tokFile["m1"]); err == nil || !strings.Contains(errs, "permission denied") {
			t.Fatalf("an agent's token submits a job: %v\n%s", err, errs)
		}
	}

	step("cell up, tokens checked: submit hello (batch) and web (service)")
	submit("hello", batchJob("hello", "echo hello from $OMEGA_TASK_NAME at $OMEGA_TASK_IP; sleep 1"))
	// The service: examples/jobs/web.yaml, two replicas on different
	// machines, so that the third machine is where a lost one goes.
	submit("web", `meta: {name: web}
spec:
  kind: service
  replicas: 2
  template:
    resources: {cpu: 100m, memory: 32Mi}
    command:
      path: /bin/sh
      args: ["-c", "echo hello from $OMEGA_TASK_NAME > index.html && exec python3 -m http.server 8080 --bind $OMEGA_TASK_IP"]
    constraints: [{operator: OPERATOR_DIFFERENT_MACHINES}]
    restart_policy: RESTART_POLICY_ALWAYS
    health_check:
      http: {port: 8080, path: /index.html}
      period_millis: 1000
      failure_threshold: 3
      initial_delay_millis: 1000
    grace_period_millis: 3000
`)

	// The service's tasks RUNNING and HEALTHY, one per machine, each
	// answering at its own address.
	var web []*txn.Task
	waitFor(t, c, 90*time.Second, "two web tasks RUNNING and HEALTHY on two machines", func(v client.View) bool {
		web = fcHealthy(v, "web")
		return len(web) == 2 && web[0].Machine != web[1].Machine
	})
	for _, tk := range web {
		if tk.Run().GetRestarts() != 0 || tk.Scheduler != "service-0" {
			t.Fatalf("%s: %d restarts, placed by %q", tk.Name(), tk.Run().GetRestarts(), tk.Scheduler)
		}
		fcGet(t, tk)
	}

	// The batch job SUCCEEDED, each task once, on each machine.
	waitFor(t, c, 60*time.Second, "the batch job hello SUCCEEDED", func(v client.View) bool {
		j := fcJob(v, "hello")
		return j != nil && j.Phase() == omegav1.JobPhase_JOB_PHASE_SUCCEEDED
	})
	hello := fcTasks(c.View(), "hello")
	if len(hello) != 3 {
		t.Fatalf("hello has %d tasks, want 3", len(hello))
	}
	helloOut := map[uuid.UUID]string{}
	for _, tk := range hello {
		a := byMachine[tk.Machine]
		if tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED || a == nil || tk.Scheduler != "batch-0" {
			t.Fatalf("hello task %s: %s on %v, by %q", tk.Name(), tk.State, tk.Machine, tk.Scheduler)
		}
		helloOut[tk.UID] = fcOnce(t, a.dir, tk, "hello from "+tk.Name()+" at 127.")
	}
	// The service stayed RUNNING and HEALTHY meanwhile.
	for _, was := range web {
		tk, _ := c.View().Task(was.UID)
		if tk.State != omegav1.TaskState_TASK_STATE_RUNNING || tk.Run().GetHealth() != omegav1.HealthState_HEALTH_STATE_HEALTHY || tk.Run().GetRestarts() != 0 {
			t.Fatalf("%s while the batch ran: %s, %s, %d restarts", tk.Name(), tk.State, tk.Run().GetHealth(), tk.Run().GetRestarts())
		}
	}

	// SIGKILL the agent of a service task: its machine DOWN, the task
	// LOST, and the service RUNNING again on the machines left, the lost
	// task's replacement on the machine that had none.
	step("hello SUCCEEDED, web RUNNING and HEALTHY: SIGKILL the agent of " + web[0].Name())
	lost := web[0]
	victim := byMachine[lost.Machine]
	kept := web[1]
	victim.p.cmd.Process.Kill()
	var replacement *txn.Task
	waitFor(t, c, 90*time.Second, "the killed agent's machine DOWN, its web task LOST, a replacement RUNNING and HEALTHY elsewhere", func(v client.View) bool {
		m, _ := v.Machine(lost.Machine)
		old, _ := v.Task(lost.UID)
		if m.State != omegav1.MachineState_MACHINE_STATE_DOWN || old.State != omegav1.TaskState_TASK_STATE_LOST {
			return false
		}
		replacement = nil
		for _, tk := range fcHealthy(v, "web") {
			if tk.UID != kept.UID {
				replacement = tk
			}
		}
		return replacement != nil
	})
	if replacement.Machine == lost.Machine || replacement.Machine == kept.Machine || replacement.Scheduler != "service-0" {
		t.Fatalf("the replacement %s is on %s (the lost one was on %s, the kept one on %s), placed by %q",
			replacement.Name(), replacement.Machine, lost.Machine, kept.Machine, replacement.Scheduler)
	}
	if k, _ := c.View().Task(kept.UID); k.State != omegav1.TaskState_TASK_STATE_RUNNING || k.Assigned != kept.Assigned {
		t.Fatalf("the web task on a live machine moved: %s, assigned %d then %d", k.State, kept.Assigned, k.Assigned)
	}
	fcGet(t, replacement)
	// The lost task's process outlived its agent (tasks do); the agent,
	// restarted, stops it: the cell placed it nowhere.
	if len(fcTaskProcs(lost.UID.String())) == 0 {
		t.Fatalf("the lost task's process did not outlive its SIGKILLed agent")
	}
	step("replacement " + replacement.Name() + " RUNNING and HEALTHY: restart the killed agent")
	victim.p = startProc(t, victim.args...)
	waitFor(t, c, 60*time.Second, "the restarted agent's machine UP", func(v client.View) bool {
		m, _ := v.Machine(lost.Machine)
		return m.State == omegav1.MachineState_MACHINE_STATE_UP
	})
	fcWaitNoProcs(t, 30*time.Second, "the lost task's process, stopped by its restarted agent", lost.UID)
	web = []*txn.Task{kept, replacement}

	// Kill a service task's process (not its supervisor): its agent
	// restarts it at the same placement and address, and counts it.
	step("the orphan stopped: kill " + kept.Name() + "'s process")
	target, _ := c.View().Task(kept.UID)
	host := byMachine[target.Machine]
	child := taskChild(t, host.dir, target)
	if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, 60*time.Second, "the killed web process restarted by its agent, HEALTHY again", func(v client.View) bool {
		tk, _ := v.Task(target.UID)
		return tk.State == omegav1.TaskState_TASK_STATE_RUNNING && tk.Run().GetRestarts() == 1 &&
			tk.Run().GetHealth() == omegav1.HealthState_HEALTH_STATE_HEALTHY && tk.Run().GetLastExit().GetSignal() == "killed"
	})
	target, _ = c.View().Task(kept.UID)
	if target.Assigned != kept.Assigned || target.Machine != kept.Machine || target.Run().GetAddress() != kept.Run().GetAddress() {
		t.Fatalf("the restart moved the task: assigned %d on %s at %s, was %d on %s at %s", target.Assigned, target.Machine, target.Run().GetAddress(),
			kept.Assigned, kept.Machine, kept.Run().GetAddress())
	}
	if err := testkit.WaitGone(child, 10*time.Second); err != nil {
		t.Fatalf("the killed process: %v", err)
	}
	fcGet(t, target)

	// Restart that agent: it adopts its tasks — the same processes, the
	// same placements, the same counts — and runs none of them twice.
	type seen struct {
		task       *txn.Task
		shim, proc int
	}
	var adopted []seen
	v := c.View()
	v.RangeTasks(func(tk *txn.Task) bool {
		if tk.Machine == machineOf[host] && tk.State == omegav1.TaskState_TASK_STATE_RUNNING {
			adopted = append(adopted, seen{task: tk})
		}
		return true
	})
	if len(adopted) != 1 || adopted[0].task.UID != target.UID {
		t.Fatalf("%d tasks RUNNING on %s, want the web task %s", len(adopted), host.name, target.Name())
	}
	for i := range adopted {
		s := &adopted[i]
		s.shim, s.proc = fcShim(t, host.dir, s.task.UID), taskChild(t, host.dir, s.task)
		if got := fcTaskProcs(s.task.UID.String()); !slices.Equal(got, fcSorted(s.shim, s.proc)) {
			t.Fatalf("%s before the agent's restart: processes %v, want its supervisor %d and its process %d", s.task.Name(), got, s.shim, s.proc)
		}
	}
	step("restarted in place: restart its agent " + host.name)
	if err := host.p.stop(t); err != nil {
		t.Fatalf("the agent's exit after SIGTERM: %v\n%s", err, host.p.log())
	}
	for _, s := range adopted { // tasks outlive their agent
		if err := syscall.Kill(s.proc, 0); err != nil {
			t.Fatalf("%s's process %d did not outlive its agent: %v", s.task.Name(), s.proc, err)
		}
	}
	host.p = startProc(t, host.args...)
	for _, s := range adopted {
		uid := "uid=" + s.task.UID.String()
		waitLogLine(t, host.p, 30*time.Second, "the restarted agent takes "+s.task.Name()+" up", func(line string) bool {
			return (strings.Contains(line, "msg=started ") || strings.Contains(line, " started ")) && strings.Contains(line, uid)
		})
	}
	waitFor(t, c, 30*time.Second, "the adopted tasks RUNNING and HEALTHY", func(v client.View) bool {
		for _, s := range adopted {
			tk, _ := v.Task(s.task.UID)
			if tk.State != omegav1.TaskState_TASK_STATE_RUNNING || tk.Run().GetHealth() != omegav1.HealthState_HEALTH_STATE_HEALTHY {
				return false
			}
		}
		return true
	})
	for _, s := range adopted {
		tk, _ := c.View().Task(s.task.UID)
		switch {
		case tk.Assigned != s.task.Assigned || tk.Machine != s.task.Machine:
			t.Fatalf("%s was placed again: assigned %d on %s, was %d on %s", tk.Name(), tk.Assigned, tk.Machine, s.task.Assigned, s.task.Machine)
		case tk.Run().GetRestarts() != s.task.Run().GetRestarts():
			t.Fatalf("%s: %d restarts after its agent's restart, %d before", tk.Name(), tk.Run().GetRestarts(), s.task.Run().GetRestarts())
		case tk.Run().GetAddress() != s.task.Run().GetAddress():
			t.Fatalf("%s: address %s after its agent's restart, %s before", tk.Name(), tk.Run().GetAddress(), s.task.Run().GetAddress())
		}
		if shim := fcShim(t, host.dir, tk.UID); shim != s.shim {
			t.Fatalf("%s was started again: supervisor %d, then %d", tk.Name(), s.shim, shim)
		}
		if got := fcTaskProcs(tk.UID.String()); !slices.Equal(got, fcSorted(s.shim, s.proc)) {
			t.Fatalf("%s after its agent's restart: processes %v, want the same supervisor %d and process %d only", tk.Name(), got, s.shim, s.proc)
		}
		fcGet(t, tk)
	}
	// The batch task that ran there ran once, and is still SUCCEEDED as
	// it was reported.
	for _, tk := range hello {
		if tk.Machine != machineOf[host] {
			continue
		}
		if got := fcOnce(t, host.dir, tk, "hello from "+tk.Name()); got != helloOut[tk.UID] {
			t.Fatalf("%s's output changed across its agent's restart: %q, then %q", tk.Name(), helloOut[tk.UID], got)
		}
		if now, _ := c.View().Task(tk.UID); now.Version != tk.Version || now.State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
			t.Fatalf("%s was reported again after its agent's restart: %s at version %d, was %d", tk.Name(), now.State, now.Version, tk.Version)
		}
	}
	// The new agent supervises what it adopted: the adopted process (not
	// its child) killed, it restarts it.
	{
		s := adopted[0]
		if err := syscall.Kill(s.proc, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		want := s.task.Run().GetRestarts() + 1
		waitFor(t, c, 60*time.Second, "the adopted process, killed, restarted by the new agent", func(v client.View) bool {
			tk, _ := v.Task(s.task.UID)
			return tk.State == omegav1.TaskState_TASK_STATE_RUNNING && tk.Run().GetRestarts() == want &&
				tk.Run().GetHealth() == omegav1.HealthState_HEALTH_STATE_HEALTHY && tk.Assigned == s.task.Assigned
		})
		tk, _ := c.View().Task(s.task.UID)
		shim := fcShim(t, host.dir, tk.UID)
		if got := fcTaskProcs(tk.UID.String()); !slices.Equal(got, fcSorted(shim, taskChild(t, host.dir, tk))) {
			t.Fatalf("%s after its restart: processes %v, want one supervisor and its process", tk.Name(), got)
		}
	}

	// Restart the server while a batch job runs, on the same --data and
	// the same addresses.
	step("adopted: submit mid, restart the server while it runs")
	submit("mid", batchJob("mid", "sleep 2; echo mid from $OMEGA_TASK_NAME"))
	waitFor(t, c, 60*time.Second, "the batch job mid RUNNING on three machines", func(v client.View) bool {
		n := 0
		for _, tk := range fcTasks(v, "mid") {
			if tk.State == omegav1.TaskState_TASK_STATE_RUNNING {
				n++
			}
		}
		return n == 3
	})
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := c.View()
	webBefore := map[uuid.UUID]*txn.Task{}
	for _, w := range web {
		tk, _ := before.Task(w.UID)
		webBefore[w.UID] = tk
	}
	if err := srv.stop(t); err != nil {
		t.Fatalf("the server's exit after SIGTERM: %v\n%s", err, srv.log())
	}
	stoppedAt := fcRevision(t, srv.log(), `msg=stopped revision=(\d+)`)
	if stoppedAt < before.Revision() {
		t.Fatalf("the server stopped at revision %d, below the %d a client saw", stoppedAt, before.Revision())
	}
	for _, w := range web { // the tasks run on without a server
		if len(fcTaskProcs(w.UID.String())) == 0 {
			t.Fatalf("%s's processes ended with the server", w.Name())
		}
	}
	srv2 := startServerAt(t, sdata, srv.grpc, "--gossip", srv.gossip, "--agent-grace", "1h", "--tokens", tokensFile)
	restartedAt := time.Now()
	servers = append(servers, srv2)
	if srv2.grpc != srv.grpc || srv2.gossip != srv.gossip {
		t.Fatalf("the restarted server listens on %s and %s, not %s and %s", srv2.grpc, srv2.gossip, srv.grpc, srv.gossip)
	}
	if at := fcRevision(t, srv2.log(), `msg=listening grpc=\S+ data=\S+ revision=(\d+)`); at != stoppedAt {
		t.Fatalf("the server stopped at revision %d and reopened at %d", stoppedAt, at)
	}
	step(fmt.Sprintf("server back at revision %d: check what it kept", stoppedAt))
	c2, tr2 := newRemoteClientWith(t, srv2.grpc, "admin/ops", tokFile["admin"])
	if c2.View().Revision() < stoppedAt {
		t.Fatalf("after the restart the cell is at revision %d, below the %d it stopped at", c2.View().Revision(), stoppedAt)
	}
	if lost := fcMissing(before, c2.View()); len(lost) > 0 {
		t.Fatalf("acknowledged state lost across the server's restart (view at %d, after at %d):\n%s", before.Revision(), c2.View().Revision(), strings.Join(lost, "\n"))
	}
	fcRefused("after the restart")

	// Every watcher resumes: the test's own client (it watched across the
	// restart) holds exactly what the restarted server lists.
	{
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			fresh, err := tr2.Snapshot(ctx)
			if err == nil {
				err = c.SyncTo(ctx, fresh.Revision())
			}
			cancel()
			if err != nil {
				t.Fatalf("the client that watched across the restart: %v", err)
			}
			if c.View().Revision() == fresh.Revision() {
				if err := testkit.DiffStates(fresh, c.View().State, testkit.Compare{IgnoreSeq: true, Protos: true}); err != nil {
					t.Fatalf("the client that watched across the restart differs from a fresh listing at revision %d: %v", fresh.Revision(), err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the resumed client and a fresh listing never met at one revision within 30 s")
			}
		}
	}
	// The agents rejoin the restarted server's gossip membership. A server
	// that does not list an agent puts its machine DOWN (its tasks LOST)
	// once its --agent-grace is over (30 s by default), and never sees it
	// die. The bound here is the test's, 5 s from the restart: an agent
	// that rejoins at once (as it means to: "the server restarted: it
	// knows no member until we join again") is well within it. This server
	// has a grace of 1h, so the rest runs on whatever the answer; and the
	// wait goes on to 45 s to say how long it did take.
	const rejoinWithin = 5 * time.Second
	if took, missing := fcMembers(t, srv2.gossip, []string{"m1", "m2", "m3"}, restartedAt, 45*time.Second); len(missing) > 0 || took > rejoinWithin {
		when := fmt.Sprintf("only after %v", took.Round(100*time.Millisecond))
		if len(missing) > 0 {
			when = fmt.Sprintf("not within %v (%v missing)", took.Round(100*time.Millisecond), missing)
		}
		t.Errorf("PRODUCT BUG: after the server's restart (SIGTERM, then started again at once on the same addresses) the agents rejoined its gossip membership "+
			"%s, want all within %v: the agents see the new server answer at the old one's address under its name, so "+
			"membership.ServerAlive never turns false and they never Join again; the server learns of them only through memberlist's periodic push-pull "+
			"(every 30 s, with a random peer). With the default --agent-grace 30s every machine goes DOWN and its tasks LOST in the meantime.",
			when, rejoinWithin)
	} else {
		step(fmt.Sprintf("the agents are members of the restarted server %v after its start", took.Round(100*time.Millisecond)))
	}
	// They report: the batch job that ran across the restart SUCCEEDED;
	// the service ran on, untouched.
	waitFor(t, c2, 60*time.Second, "the batch job mid SUCCEEDED across the restart", func(v client.View) bool {
		j := fcJob(v, "mid")
		return j != nil && j.Phase() == omegav1.JobPhase_JOB_PHASE_SUCCEEDED
	})
	for _, tk := range fcTasks(c2.View(), "mid") {
		if tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED {
			t.Fatalf("%s: %s %q", tk.Name(), tk.State, tk.Message())
		}
		fcOnce(t, byMachine[tk.Machine].dir, tk, "mid from "+tk.Name())
	}
	// The schedulers place what comes after the restart: a job on every
	// machine, each agent reporting its task.
	step("nothing lost, watchers resumed, mid SUCCEEDED: submit after")
	submit("after", batchJob("after", "echo after from $OMEGA_TASK_NAME"))
	waitFor(t, c2, 60*time.Second, "the batch job after SUCCEEDED", func(v client.View) bool {
		j := fcJob(v, "after")
		return j != nil && j.Phase() == omegav1.JobPhase_JOB_PHASE_SUCCEEDED
	})
	afterOn := map[uuid.UUID]bool{}
	for _, tk := range fcTasks(c2.View(), "after") {
		if tk.State != omegav1.TaskState_TASK_STATE_SUCCEEDED || tk.Scheduler != "batch-0" || tk.CreateRev <= stoppedAt {
			t.Fatalf("%s: %s, placed by %q, created at %d", tk.Name(), tk.State, tk.Scheduler, tk.CreateRev)
		}
		afterOn[tk.Machine] = true
		fcOnce(t, byMachine[tk.Machine].dir, tk, "after from "+tk.Name())
	}
	for _, tk := range hello { // across two agent restarts and the server's, each ran once
		if got := fcOnce(t, byMachine[tk.Machine].dir, tk, "hello from "+tk.Name()); got != helloOut[tk.UID] {
			t.Fatalf("%s's output changed: %q, then %q", tk.Name(), helloOut[tk.UID], got)
		}
	}
	if len(afterOn) != 3 {
		t.Fatalf("the job after ran on %d machines, want every one", len(afterOn))
	}
	for u, was := range webBefore {
		tk, _ := c2.View().Task(u)
		if tk.State != omegav1.TaskState_TASK_STATE_RUNNING || tk.Run().GetHealth() != omegav1.HealthState_HEALTH_STATE_HEALTHY ||
			tk.Assigned != was.Assigned || tk.Run().GetRestarts() != was.Run().GetRestarts() {
			t.Fatalf("%s across the server's restart: %s, %s, assigned %d (was %d), %d restarts (was %d)", tk.Name(), tk.State, tk.Run().GetHealth(),
				tk.Assigned, was.Assigned, tk.Run().GetRestarts(), was.Run().GetRestarts())
		}
	}
	// The watch that began before the restart printed what committed
	// after it, in order.
	watched.waitFor(t, "\tjob/after\tcreated", 30*time.Second)
	watched.waitFor(t, "\tjob/after\tchanged\tSUCCEEDED", 30*time.Second)
	fcWatchInOrder(t, watched.String(), stoppedAt)
	select {
	case err := <-watchDone:
		t.Fatalf("omega watch exited: %v\n%s", err, watchErr.String())
	default:
	}

	// The end: the service killed, its agents stop its processes; then
	// every process stops on SIGTERM, and no task's process is left.
	step("after SUCCEEDED on every machine: kill web, stop the cell")
	if out, errs, err := run(t, "", "kill", "web", "--server", srv2.grpc, "--token-file", tokFile["submitter"]); err != nil || !strings.HasPrefix(out, "job/web killed") {
		t.Fatalf("kill web: %v\n%s%s", err, out, errs)
	}
	waitFor(t, c2, 30*time.Second, "the web tasks KILLED", func(v client.View) bool {
		for _, tk := range fcTasks(v, "web") {
			if !tk.Terminal() {
				return false
			}
		}
		return true
	})
	for _, tk := range fcTasks(c2.View(), "web") {
		fcWaitNoProcs(t, 30*time.Second, tk.Name()+"'s processes, stopped by its agent", tk.UID)
	}
	watch.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-watchDone:
		watchDone <- err
		if err != nil {
			t.Fatalf("omega watch's exit after SIGTERM: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("omega watch did not exit within 30 s of SIGTERM")
	}
	for _, p := range []*proc{batch, service} {
		if err := p.stop(t); err != nil {
			t.Fatalf("%v: exit after SIGTERM: %v\n%s", p.cmd.Args[:5], err, p.log())
		}
	}
	for _, a := range agents {
		if err := a.p.stop(t); err != nil {
			t.Fatalf("agent %s: exit after SIGTERM: %v\n%s", a.name, err, a.p.log())
		}
	}
	if err := srv2.stop(t); err != nil {
		t.Fatalf("the server's exit after SIGTERM: %v", err)
	}
	if left := fcLeftovers(agentDirs); len(left) > 0 {
		t.Fatalf("task processes left after the cell stopped: %v", left)
	}
	t.Logf("the full cell, start to stop: %v", time.Since(began).Round(100*time.Millisecond))
}
