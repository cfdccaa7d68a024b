package membership

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/memberlist"
)

// mockCell is a cell's gossip on the in-memory network.
type mockCell struct {
	t   *testing.T
	net *MemNetwork
}

func newMockCell(t *testing.T, names ...string) *mockCell {
	c := &mockCell{t: t, net: NewMemNetwork(names...)}
	t.Cleanup(c.net.Close) // after every member's shutdown (cleanups run last first)
	return c
}

// start starts the member name (made in newMockCell) as who, joining
// those at join.
func (c *mockCell) start(name string, who Meta, events memberlist.EventDelegate, join ...string) *memberlist.Memberlist {
	c.t.Helper()
	ml, err := Start(Config{Name: name, Profile: "local", Meta: who, Events: events, Join: join, Transport: c.net.Transport(name), Tune: Fast})
	if err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.t.Cleanup(func() { ml.Shutdown() })
	return ml
}

// startRaw starts the member name gossiping meta as it is: a member of
// before the codec.
func (c *mockCell) startRaw(name string, meta []byte, join ...string) *memberlist.Memberlist {
	c.t.Helper()
	cfg, _ := Profile("local")
	cfg.Name, cfg.Transport, cfg.Delegate = name, c.net.Transport(name), metaDelegate(meta)
	cfg.Logger = log.New(io.Discard, "", 0)
	Fast(cfg)
	ml, err := memberlist.Create(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { ml.Shutdown() })
	if len(join) > 0 {
		if _, err := ml.Join(join); err != nil {
			c.t.Fatal(err)
		}
	}
	return ml
}

// eventually polls cond, at most within, every few milliseconds.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, got := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last %s", what, within, got)
		}
		<-tick.C
	}
}

// Members of every role — the server, agents and schedulers, of the
// current version and of before the codec — join one membership; each
// member's listing of a kind's instances is exactly the live schedulers
// of the kind; a scheduler that leaves drops out of it, and the agents
// see the server gone when it leaves.
func TestMembersOfEachRole(t *testing.T) {
	c := newMockCell(t, ServerName, "agent-1", "agent-0", "scheduler/batch/b1", "scheduler/batch/b2", "scheduler/batch/b0", "scheduler/service/s1")
	// Each joins every member before it: a join is a push-pull of the
	// whole state with each, so the membership converges at once (through
	// gossip alone a member may wait for the next push-pull, 15 s on,
	// to learn of one that joined after it: memberlist retransmits a
	// member's news a bounded number of times).
	var at []string
	join := func(ml *memberlist.Memberlist) *memberlist.Memberlist { at = append(at, Addr(ml)); return ml }
	srv := join(c.start(ServerName, Server(), nil))
	agent := join(c.start("agent-1", Agent(machine), nil, at...))
	legacy := uuid.MustParse("00000000-0000-4000-8000-000000000001")
	join(c.startRaw("agent-0", legacy[:], at...))
	changes := NewChanges()
	b1 := join(c.start("scheduler/batch/b1", Scheduler("batch", "b1"), changes, at...))
	b2 := join(c.start("scheduler/batch/b2", Scheduler("batch", "b2"), nil, at...))
	join(c.startRaw("scheduler/batch/b0", []byte("omega-scheduler\x00batch\x00b0"), at...))
	s1 := c.start("scheduler/service/s1", Scheduler("service", "s1"), nil, at...)

	all := []*memberlist.Memberlist{srv, agent, b1, b2, s1}
	eventually(t, 30*time.Second, "every member sees the 7", func() (bool, string) {
		for _, ml := range all {
			if n := ml.NumMembers(); n != 7 {
				return false, fmt.Sprintf("%s sees %d", ml.LocalNode().Name, n)
			}
		}
		return true, ""
	})
	for _, ml := range all {
		if got := Instances(ml, "batch"); !slices.Equal(got, []string{"b0", "b1", "b2"}) {
			t.Errorf("%s lists batch %v", ml.LocalNode().Name, got)
		}
		if got := Instances(ml, "service"); !slices.Equal(got, []string{"s1"}) {
			t.Errorf("%s lists service %v", ml.LocalNode().Name, got)
		}
		if got := Instances(ml, "mapreduce"); got != nil {
			t.Errorf("%s lists mapreduce %v", ml.LocalNode().Name, got)
		}
	}
	if !ServerAlive(agent) {
		t.Fatal("the agent does not see the server")
	}
	select {
	case <-changes:
	default:
		t.Fatal("the scheduler's Changes was not signalled by six members joining")
	}

	if err := b2.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	b2.Shutdown()
	for _, ml := range []*memberlist.Memberlist{b1, s1, agent} {
		eventually(t, 30*time.Second, ml.LocalNode().Name+" drops b2", func() (bool, string) {
			got := Instances(ml, "batch")
			return slices.Equal(got, []string{"b0", "b1"}), fmt.Sprint(got)
		})
	}
	select {
	case <-changes:
	default:
		t.Fatal("the scheduler's Changes was not signalled by b2 leaving")
	}

	if err := srv.Leave(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	eventually(t, 30*time.Second, "the agent sees the server gone", func() (bool, string) { return !ServerAlive(agent), "alive" })
}

// A server of before the codec had no metadata: agents know it by name.
func TestServerAliveByName(t *testing.T) {
	c := newMockCell(t, ServerName, "agent-1", "other")
	srv := c.startRaw(ServerName, nil)
	agent := c.start("agent-1", Agent(machine), nil, Addr(srv))
	if !ServerAlive(agent) {
		t.Fatal("a legacy server, by its name: not seen")
	}
	c2 := newMockCell(t, "server-2", "agent-2")
	srv2 := c2.start("server-2", Server(), nil)
	agent2 := c2.start("agent-2", Agent(machine), nil, Addr(srv2))
	if !ServerAlive(agent2) {
		t.Fatal("a server by its role, under another name: not seen")
	}
	if ServerAlive(c.start("other", Scheduler("batch", "x"), nil)) {
		t.Fatal("a member alone sees a server")
	}
}

func TestStartRefuses(t *testing.T) {
	c := newMockCell(t, "a")
	for _, k := range []struct {
		cfg  Config
		says string
		is   error
	}{
		{Config{Meta: Server(), Bind: "127.0.0.1:0"}, "no name", nil},
		{Config{Name: "x", Bind: "127.0.0.1:0"}, "encode", ErrInvalid},
		{Config{Name: "x", Meta: Server(), Bind: "127.0.0.1:0", Profile: "fast"}, `"fast"`, nil},
		{Config{Name: "x", Meta: Server(), Bind: "nowhere"}, `gossip address "nowhere"`, nil},
		{Config{Name: "x", Meta: Server(), Bind: "127.0.0.1:port"}, "port", nil},
		{Config{Name: "a", Meta: Server(), Profile: "local", Transport: c.net.Transport("a"), Join: []string{"127.0.0.1:9"}}, "join the membership at", nil},
	} {
		ml, err := Start(k.cfg)
		if err == nil {
			ml.Shutdown()
			t.Errorf("%+v: started", k.cfg)
			continue
		}
		if !strings.Contains(err.Error(), k.says) || (k.is != nil && !errors.Is(err, k.is)) {
			t.Errorf("%+v: %v, want it to say %q", k.cfg, err, k.says)
		}
	}
}

// The profiles are memberlist's: local probes no slower than lan, lan
// faster than wan; an unknown one is named in the error.
func TestProfiles(t *testing.T) {
	lan, _ := Profile("lan")
	wan, _ := Profile("wan")
	local, _ := Profile("local")
	def, _ := Profile("")
	if !(local.ProbeInterval <= lan.ProbeInterval && lan.ProbeInterval < wan.ProbeInterval) || def.ProbeInterval != lan.ProbeInterval {
		t.Fatalf("probe intervals local %v, lan %v, wan %v, default %v", local.ProbeInterval, lan.ProbeInterval, wan.ProbeInterval, def.ProbeInterval)
	}
	for _, p := range Profiles {
		if _, err := Profile(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Profile("fast"); err == nil || !strings.Contains(err.Error(), `"fast"`) {
		t.Fatalf("a bad profile: %v", err)
	}
}

func TestReadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := bytes.Repeat([]byte{7}, 32)
	if got, err := ReadKey(write("good", base64.StdEncoding.EncodeToString(key)+"\n")); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("a good key: %x, %v", got, err)
	}
	for _, c := range []struct{ path, says string }{
		{write("text", "not a key!"), "not base64"},
		{write("short", base64.StdEncoding.EncodeToString(key[:8])), "8 bytes: want 16, 24 or 32"},
		{filepath.Join(dir, "missing"), "no such file"},
	} {
		if _, err := ReadKey(c.path); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want it to say %q", c.path, err, c.says)
		}
	}
}
