package live

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/agents/process"
	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/txn"
)

// Validate names the field that cannot run; DefaultConfig with the
// required fields set runs.
func TestConfigValidate(t *testing.T) {
	ok := func() Config {
		c := DefaultConfig()
		c.Name, c.Data = "m1", "/tmp/agent"
		c.Transport = func(uuid.UUID) client.Transport { return nil }
		c.Membership.Join = []string{"127.0.0.1:7946"}
		return c
	}
	if c := ok(); c.Validate() != nil || c.Tick <= 0 || c.Gossip == "" || c.LogsAddr == "" {
		t.Fatalf("the defaults: %+v: %v", c, c.Validate())
	}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Name = "" }, "Name is required"},
		{func(c *Config) { c.Data = "" }, "Data is required"},
		{func(c *Config) { c.Transport = nil }, "Transport is required"},
		{func(c *Config) { c.Membership.Join = nil }, "Membership.Join is required"},
		{func(c *Config) { c.Membership.Profile = "fast" }, "Membership.Profile"},
		{func(c *Config) { c.CPUMillis = -1 }, "capacity -1 millicores"},
		{func(c *Config) { c.Tick = -1 }, "Tick -1ns"},
		{func(c *Config) { c.LogsAddr, c.LogsTokensFile = "", "tokens" }, "LogsTokensFile: there is no log endpoint"},
		{func(c *Config) { c.Gossip = "nohost" }, `Gossip "nohost"`},
	} {
		c := ok()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v", tc.want, err)
		}
	}
	// A zero Tick, Gossip and Logger take their defaults; an empty LogsAddr
	// stays: no endpoint.
	c := ok()
	c.Tick, c.Gossip, c.LogsAddr = 0, "", ""
	if d := c.withDefaults(); d.Tick != DefaultConfig().Tick || d.Gossip != DefaultConfig().Gossip || d.Logger == nil || d.LogsAddr != "" {
		t.Fatalf("withDefaults: %+v", d)
	}
}

// Register creates the machine, commits nothing when the cell already says
// what it would, and puts the state, agent address and logs annotation
// (keeping the capacity and other annotations) when they differ.
func TestRegister(t *testing.T) {
	h := newHarness(t) // registers "agent" UP at 127.0.0.1:7946, no logs
	ctx := context.Background()
	m := Machine{UID: h.machine, Name: "agent", CPUMillis: 1, MemoryBytes: 1, Agent: "127.0.0.1:7946"}
	rev := h.st.Revision()
	if err := Register(ctx, h.c, m); err != nil {
		t.Fatal(err)
	}
	if h.st.Revision() != rev {
		t.Fatal("registering the same machine again committed")
	}
	m.Agent, m.LogsURL = "127.0.0.1:8000", "http://127.0.0.1:9000"
	if err := Register(ctx, h.c, m); err != nil {
		t.Fatal(err)
	}
	got, _ := h.st.Snapshot().Machine(h.machine)
	p := got.Proto()
	if got.Agent != m.Agent || p.GetMeta().GetAnnotations()[process.LogsAnnotation] != m.LogsURL ||
		p.GetSpec().GetCapacity().GetCpuMillis() != 4000 || got.State != omegav1.MachineState_MACHINE_STATE_UP {
		t.Fatalf("after the put: %v", p)
	}
	// The agent's attributes and failure domain are its say: put when they
	// differ, the capacity kept; the same again commits nothing.
	m.Attributes, m.FailureDomain = map[string]string{"zone": "eu"}, "rack-1"
	if err := Register(ctx, h.c, m); err != nil {
		t.Fatal(err)
	}
	got, _ = h.st.Snapshot().Machine(h.machine)
	if got.Attributes()["zone"] != "eu" || got.FailureDomain() != "rack-1" || got.Capacity.CPU != 4000 {
		t.Fatalf("after the attributes' put: %v", got.Proto())
	}
	rev = h.st.Revision()
	if err := Register(ctx, h.c, m); err != nil || h.st.Revision() != rev {
		t.Fatalf("the same attributes again: %v, revision %d, was %d", err, h.st.Revision(), rev)
	}
	m.Attributes, m.FailureDomain = nil, ""
	if err := Register(ctx, h.c, m); err != nil {
		t.Fatal(err)
	}
	if got, _ = h.st.Snapshot().Machine(h.machine); len(got.Attributes()) != 0 || got.FailureDomain() != "" {
		t.Fatalf("attributes dropped by the agent stay: %v", got.Proto())
	}
	if err := Register(ctx, h.c, Machine{Name: "x"}); err == nil {
		t.Fatal("a machine without a uid registered")
	}
	// The machine's directory under another name is refused, and the cell
	// is as it was.
	rev = h.st.Revision()
	if err := Register(ctx, h.c, Machine{UID: h.machine, Name: "other", Agent: m.Agent}); !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), `which the cell knows as "agent", not --name "other"`) {
		t.Fatalf("another name: %v", err)
	}
	if h.st.Revision() != rev {
		t.Fatal("a refused registration committed")
	}
	// A cordoned machine that went DOWN comes back DRAINING, not UP.
	cur, _ := h.st.Snapshot().Machine(h.machine)
	p = cur.Proto()
	p.Meta.Annotations[txn.CordonAnnotation] = "true"
	p.Status.State = omegav1.MachineState_MACHINE_STATE_DOWN
	h.commit(txn.PutMachine(p, cur.Version))
	if err := Register(ctx, h.c, m); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.st.Snapshot().Machine(h.machine); got.State != omegav1.MachineState_MACHINE_STATE_DRAINING || !got.Cordoned() {
		t.Fatalf("a cordoned machine registered again: %v %v", got.State, got.Cordoned())
	}
}

// WithLogsAnnotation sets or removes the annotation on a copy: the view's
// object is shared and never written.
func TestWithLogsAnnotation(t *testing.T) {
	orig := &omegav1.ObjectMeta{Name: "m1", Annotations: map[string]string{"keep": "1", process.LogsAnnotation: "http://old:1"}}
	m := WithLogsAnnotation(orig, "http://new:2")
	if m.Annotations[process.LogsAnnotation] != "http://new:2" || m.Annotations["keep"] != "1" || orig.Annotations[process.LogsAnnotation] != "http://old:1" {
		t.Fatalf("set: %v, the original %v", m.Annotations, orig.Annotations)
	}
	if m := WithLogsAnnotation(orig, ""); len(m.Annotations) != 1 || len(orig.Annotations) != 2 {
		t.Fatalf("removed: %v, the original %v", m.Annotations, orig.Annotations)
	}
	if m := WithLogsAnnotation(&omegav1.ObjectMeta{Name: "m2"}, "http://x:3"); m.Annotations[process.LogsAnnotation] != "http://x:3" {
		t.Fatalf("on a machine without annotations: %v", m.Annotations)
	}
}

// The machine's uid is made once and kept; an unreadable one is an error
// naming the file.
func TestMachineUID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agent")
	u, err := machineUID(dir)
	if err != nil || u == uuid.Nil {
		t.Fatalf("first: %v %v", u, err)
	}
	if again, err := machineUID(dir); err != nil || again != u {
		t.Fatalf("again: %v %v, want %v", again, err, u)
	}
	os.WriteFile(filepath.Join(dir, "machine.uid"), []byte("not a uid\n"), 0o644)
	if _, err := machineUID(dir); err == nil || !strings.Contains(err.Error(), "machine.uid") {
		t.Fatalf("a bad uid: %v", err)
	}
}

// Port 0 binds again at the address kept from last time, on the same host
// only; a given port is bound as it is.
func TestGossipBind(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gossip.addr")
	if got := gossipBind(file, "127.0.0.1:0"); got != "127.0.0.1:0" {
		t.Fatalf("no file: %s", got)
	}
	os.WriteFile(file, []byte("127.0.0.1:41234\n"), 0o644)
	for bind, want := range map[string]string{
		"127.0.0.1:0":    "127.0.0.1:41234",
		"127.0.0.1:7000": "127.0.0.1:7000",
		"10.0.0.1:0":     "10.0.0.1:0",
	} {
		if got := gossipBind(file, bind); got != want {
			t.Errorf("%s: %s, want %s", bind, got, want)
		}
	}
}

// A core needs its machine, executor and pool.
func TestNewCoreRefusesAMissingPart(t *testing.T) {
	h := newHarness(t)
	pool := mustPool("10.2.0.0/30")
	for _, cfg := range []CoreConfig{
		{Executor: h.x, Pool: pool},
		{Machine: h.machine, Pool: pool},
		{Machine: h.machine, Executor: h.x},
	} {
		if _, err := NewCore(context.Background(), h.c, cfg, 0); err == nil {
			t.Errorf("%+v: made a core", cfg)
		}
	}
}
