package main_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// TestGossipKey: with --gossip-key-file the membership is encrypted. An
// agent with another key cannot join it (and says so), one with the cell's
// key joins, and the server still learns of its death through it.
func TestGossipKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	key := func(name string, b byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(b)), 32)))+"\n"), 0o600)
		return p
	}
	cellKey, otherKey := key("cell", 'a'), key("other", 'b')
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("not base64!\n"), 0o600)
	srv := startServerAt(t, t.TempDir(), "127.0.0.1:0", "--gossip", "127.0.0.1:0", "--agent-grace", "1h", "--gossip-key-file", cellKey)
	c, _ := newRemoteClient(t, srv.grpc, "tester")
	if _, errs, err := run(t, "", "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "x", "--data", t.TempDir(), "--gossip-key-file", bad); err == nil || !strings.Contains(errs, "not base64") {
		t.Fatalf("a bad key file: %v\n%s", err, errs)
	}
	if _, errs, err := run(t, "", "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "intruder", "--data", t.TempDir(), "--cpu", "1", "--memory", "1Gi", "--gossip-key-file", otherKey); err == nil || !strings.Contains(errs, "join the membership") {
		t.Fatalf("an agent with another key: %v\n%s", err, errs)
	}
	ag := startProc(t, "agent", "--server", srv.grpc, "--join", srv.gossip, "--name", "a1", "--data", t.TempDir(), "--cpu", "1", "--memory", "1Gi", "--gossip-key-file", cellKey)
	waitFor(t, c, 60*time.Second, "a1 UP", func(v client.View) bool {
		up := false
		v.RangeMachines(func(m *txn.Machine) bool {
			up = up || (m.Name() == "a1" && m.State == omegav1.MachineState_MACHINE_STATE_UP)
			return true
		})
		return up && strings.Contains(ag.log(), "joined")
	})
	ag.cmd.Process.Kill()
	waitFor(t, c, 90*time.Second, "a1 DOWN, its death seen through the encrypted membership", func(v client.View) bool {
		down := false
		v.RangeMachines(func(m *txn.Machine) bool {
			down = down || (m.Name() == "a1" && m.State == omegav1.MachineState_MACHINE_STATE_DOWN)
			return true
		})
		return down
	})
}
