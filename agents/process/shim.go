// Package process is the live cell's executor: each task runs as a process
// in a session of its own, under a small supervisor (the shim, `omega
// task-shim`) that is the task's parent and writes down how it ended, so
// that an agent that restarts — and is then no task's parent — adopts the
// tasks still running and reports their exit status correctly.
//
// Live code: a goroutine waits on each shim. The decisions (what to run,
// what to report) stay in the agent core (package agents).
package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
)

// The files of a task's directory.
const (
	fileTask   = "task.json" // what the agent started: uid, assigned time, command
	filePID    = "shim.pid"  // the shim's pid (the session's leader), a number alone
	fileShimID = "shim.id"   // who that pid was: pid, start time, boot id (identity)
	fileExit   = "exit.json" // how the task ended, written by the shim
	fileStdout = "stdout"
	fileStderr = "stderr"
	dirWork    = "work" // the task's working directory
)

// ExitStatus is how a task's process ended.
type ExitStatus struct {
	Code   int    `json:"code"`             // the exit code; -1 if killed by a signal
	Signal string `json:"signal,omitempty"` // the signal that killed it
	Error  string `json:"error,omitempty"`  // the process could not be started
}

// Success reports a clean exit.
func (s ExitStatus) Success() bool { return s.Code == 0 && s.Signal == "" && s.Error == "" }

// Proto is the status in the cell's form.
func (s ExitStatus) Proto() *omegav1.ExitStatus {
	return &omegav1.ExitStatus{Code: int32(s.Code), Signal: s.Signal, Error: s.Error}
}

func (s ExitStatus) String() string {
	switch {
	case s.Error != "":
		return s.Error // it says what happened (a start's failure says "could not start")
	case s.Signal != "":
		return "signal: " + s.Signal // as Go's exec says it: "signal: killed", "signal: terminated"
	}
	return "exit status " + strconv.Itoa(s.Code)
}

// writeJSON writes v to dir/name atomically.
func writeJSON(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// RunShim is `omega task-shim DIR -- PATH ARGS...`: it runs the command as
// its child, with the task's environment as it was given, in DIR/work,
// output to DIR/stdout and DIR/stderr, forwards SIGTERM and SIGINT to it,
// and when it ends writes DIR/exit.json and exits. It is the session
// leader its agent started it as, so killing the session kills both.
func RunShim(dir, workdir string, argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "task-shim: no command")
		return 2
	}
	// Signals are ours before anything else: a stop that comes at once is
	// forwarded, not the death of the shim without an exit status.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	if workdir == "" {
		workdir = filepath.Join(dir, dirWork)
	}
	status := run(dir, workdir, argv, sigs)
	if err := writeJSON(dir, fileExit, status); err != nil {
		fmt.Fprintln(os.Stderr, "task-shim:", err)
		return 1
	}
	return 0
}

// ready tells the executor (on fd 3, if it gave one) that the task runs,
// or failed to: it unblocks Start.
func ready() {
	readyOnce.Do(func() {
		if f := os.NewFile(3, "ready"); f != nil {
			f.Write([]byte{1})
			f.Close()
		}
	})
}

var readyOnce sync.Once

func run(dir, workdir string, argv []string, sigs chan os.Signal) ExitStatus {
	defer ready() // also when it could not start

	out, err := os.OpenFile(filepath.Join(dir, fileStdout), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return ExitStatus{Code: -1, Error: "could not start: " + err.Error()}
	}
	defer out.Close()
	errf, err := os.OpenFile(filepath.Join(dir, fileStderr), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return ExitStatus{Code: -1, Error: "could not start: " + err.Error()}
	}
	defer errf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = workdir
	cmd.Stdout, cmd.Stderr = out, errf
	cmd.Env = os.Environ() // the agent set the task's environment on the shim
	if err := cmd.Start(); err != nil {
		return ExitStatus{Code: -1, Error: "could not start: " + err.Error()}
	}
	ready()
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	close(sigs)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return ExitStatus{Code: 0}
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return ExitStatus{Code: -1, Signal: ws.Signal().String()}
		}
		return ExitStatus{Code: ee.ExitCode()}
	}
	return ExitStatus{Code: -1, Error: err.Error()}
}
