package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// TestReadmeCellBlock runs the README's cell block ("Run a cell on your
// laptop") as it is written, as one bash script with no sleep added — the
// server, three agents and two schedulers started in the background, the
// jobs submitted and listed at once — with its ports and directory from
// the environment, up to the first command that does not return (`omega
// watch`). The cell must come up and run the hello job to the end.
func TestReadmeCellBlock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := omegaBinary()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Run a cell on your laptop")
	_, rest, ok2 := strings.Cut(rest, "```sh\n")
	block, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("the README has no cell block under \"Run a cell on your laptop\"")
	}
	var script []string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "go build") {
			continue // the test's own binary is on PATH
		}
		if strings.HasPrefix(line, "omega watch") {
			break // it runs until Ctrl-C
		}
		script = append(script, line)
	}
	if len(script) < 10 || !strings.Contains(strings.Join(script, "\n"), "omega get tasks") {
		t.Fatalf("the block is not what this test knows:\n%s", strings.Join(script, "\n"))
	}

	cell := t.TempDir()
	server := freePort(t)
	t.Cleanup(func() {
		for i := 1; i <= 3; i++ {
			killTaskSessions(filepath.Join(cell, "m"+string(rune('0'+i))))
		}
	})
	stdout, stderr, err := runScript(t, bin, cell, "bash -e", strings.Join(script, "\n"),
		"OMEGA_SERVER="+server, "CELL="+cell, "GOSSIP="+freePort(t), "HTTP="+freePort(t))
	if err != nil {
		t.Fatalf("the README's block failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "hello") {
		t.Fatalf("the block's output names no hello job:\n%s", stdout)
	}
	c, _ := newRemoteClient(t, server, "tester")
	waitFor(t, c, 90*time.Second, "the hello job's three tasks succeeded on the README's cell", func(v client.View) bool {
		n := 0
		v.RangeTasks(func(tk *txn.Task) bool {
			if strings.HasPrefix(tk.Name(), "hello-") && tk.State == omegav1.TaskState_TASK_STATE_SUCCEEDED {
				n++
			}
			return true
		})
		return n == 3
	})
}

// runScript runs script with bash (shell: "bash" or "bash -e") from the
// checkout's root, the test's omega binary first on PATH, no client
// configuration (OMEGA_CONFIG in dir), and env added; it returns what the
// script wrote. Its output goes to files in dir, not pipes: the processes
// it leaves in the background keep what they inherit open, and the
// script's end must not wait for theirs. They are killed, with the
// script's process group, when the test ends.
func runScript(t *testing.T, bin, dir, shell, script string, env ...string) (string, string, error) {
	t.Helper()
	pathDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(pathDir, "omega")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append(strings.Fields(shell)[1:], "-c", script)
	cmd := exec.CommandContext(ctx, "bash", args...)
	cmd.Dir = filepath.Join("..", "..") // examples/jobs/... as the README runs from the checkout
	cmd.Env = append(append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"), "OMEGA_CONFIG="+filepath.Join(dir, "no-config.yaml")), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	outF, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errF, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer outF.Close()
	defer errF.Close()
	cmd.Stdout, cmd.Stderr = outF, errF
	t.Cleanup(func() {
		if cmd.Process != nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the background processes too
		}
	})
	err = cmd.Run()
	out, _ := os.ReadFile(outF.Name())
	errOut, _ := os.ReadFile(errF.Name())
	return string(out), string(errOut), err
}
