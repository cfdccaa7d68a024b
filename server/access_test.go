package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/server"
	"github.com/omega-cell/omega/txn"
)

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "tokens")
		os.WriteFile(p, []byte(body), 0o600)
		return p
	}
	good := "# token,role,name\n\n0123456789abcdef0,admin,ops\n0123456789abcdef1, scheduler ,batch-0\n0123456789abcdef2,agent,a1\n0123456789abcdef3,submitter\n"
	toks, err := server.LoadTokens(write(good))
	if err != nil || toks.Len() != 4 {
		t.Fatalf("good file: %v (%d tokens)", err, toks.Len())
	}
	for body, want := range map[string]string{
		"short,admin\n":                                            ":1: the token is 5 bytes",
		"# c\n0123456789abcdef0,root\n":                            ":2: role \"root\"",
		"0123456789abcdef0,scheduler\n":                            ":1: a scheduler token must name",
		"0123456789abcdef0,agent,\n":                               ":1: a agent token must name",
		"0123456789abcdef0,admin\n0123456789abcdef0,submitter\n":   ":2: the token is listed twice",
		"0123456789abcdef0,agent,a1\n0123456789abcdef1,agent,a1\n": ":2: agent a1 has a token already",
		"0123456789abcdef0\n":                                      ":1: want TOKEN,ROLE[,NAME], got 1 columns",
		"# nothing\n":                                              "holds no token",
	} {
		_, err := server.LoadTokens(write(body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
	if _, err := server.LoadTokens(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file loaded")
	}
}

// Each role commits only its kinds of operation, and every transaction
// carries the component its token names.
func TestAuthorize(t *testing.T) {
	u := uuid.New()
	job := &omegav1.Job{Meta: &omegav1.ObjectMeta{Uid: u.String()}}
	ops := map[string]txn.Op{
		"create job":     txn.CreateJob(job),
		"create task":    txn.CreateTask(&omegav1.Task{}),
		"create machine": txn.CreateMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Name: "x1"}}),
		"put job":        txn.PutJob(job, 0),
		"put machine":    txn.PutMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Name: "x1"}}, 0),
		"claim":          txn.Claim(u, u, txn.Resources{CPU: 1}, 1),
		"evict":          txn.Evict(u, 1, 5, "x"),
		"running":        txn.SetStatus(u, omegav1.TaskState_TASK_STATE_RUNNING, 1, ""),
		"succeeded":      txn.SetStatus(u, omegav1.TaskState_TASK_STATE_SUCCEEDED, 1, ""),
		"lost":           txn.SetStatus(u, omegav1.TaskState_TASK_STATE_LOST, 1, ""),
		"killed":         txn.SetStatus(u, omegav1.TaskState_TASK_STATE_KILLED, 1, ""),
		"abandoned":      txn.SetStatus(u, omegav1.TaskState_TASK_STATE_ABANDONED, 1, ""),
		"delete job":     txn.Delete(omegav1.ObjectKind_OBJECT_KIND_JOB, u, 0),
		"delete machine": txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, u, 0),
		"create lease":   txn.CreateLease(&omegav1.Lease{Meta: &omegav1.ObjectMeta{Name: "x1"}}),
		"put lease":      txn.PutLease(&omegav1.Lease{Meta: &omegav1.ObjectMeta{Name: "x1"}}, 4),
		"delete lease":   txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, txn.LeaseUID("x1"), 4),
	}
	allowed := map[server.Role][]string{
		server.RoleSubmitter: {"create job", "create task", "put job", "killed", "delete job"},
		server.RoleScheduler: {"create task", "put job", "claim", "evict", "abandoned", "create lease", "put lease", "delete lease"},
		server.RoleAgent:     {"create machine", "put machine", "running", "succeeded"},
	}
	for role, may := range allowed {
		for name, op := range ops {
			id := server.Identity{Role: role, Name: "x1"}
			tx := &txn.Txn{Ops: []txn.Op{op}}
			err := server.Authorize(id, tx)
			want := false
			for _, m := range may {
				want = want || m == name
			}
			if (err == nil) != want {
				t.Errorf("%s %s: %v, want allowed=%v", role, name, err, want)
			}
			if err != nil && !errors.Is(err, server.ErrPermission) {
				t.Errorf("%s %s: %v is not ErrPermission", role, name, err)
			}
			if err == nil && tx.Component != id.Component() {
				t.Errorf("%s: component %q, want %q", role, tx.Component, id.Component())
			}
		}
	}
	for name, op := range ops {
		if err := server.Authorize(server.Identity{Role: server.RoleAdmin}, &txn.Txn{Ops: []txn.Op{op}}); err != nil {
			t.Errorf("admin %s: %v", name, err)
		}
	}
	// A scheduler or an agent may not say it is another component.
	tx := &txn.Txn{Component: "batch-1", Ops: []txn.Op{ops["claim"]}}
	if err := server.Authorize(server.Identity{Role: server.RoleScheduler, Name: "batch-0"}, tx); err == nil || !strings.Contains(err.Error(), `"batch-1"`) {
		t.Fatalf("a scheduler naming another: %v", err)
	}
	tx = &txn.Txn{Component: "submitter", Ops: []txn.Op{ops["create job"]}}
	if err := server.Authorize(server.Identity{Role: server.RoleSubmitter, Name: "alice"}, tx); err != nil || tx.Component != "submitter/alice" {
		t.Fatalf("a submitter's component: %v %q", err, tx.Component)
	}
	if c := (server.Identity{Role: server.RoleAgent, Name: "a1"}).Component(); c != "agent/a1" {
		t.Fatalf("agent component %q", c)
	}
	// An agent's token is for its own machine: it may not register or
	// change a machine of another name (a ghost under its token).
	for _, op := range []txn.Op{
		txn.CreateMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Name: "m2"}}),
		txn.PutMachine(&omegav1.Machine{Meta: &omegav1.ObjectMeta{Name: "m2"}}, 3),
	} {
		err := server.Authorize(server.Identity{Role: server.RoleAgent, Name: "m1"}, &txn.Txn{Ops: []txn.Op{op}})
		if err == nil || !errors.Is(err, server.ErrPermission) || !strings.Contains(err.Error(), `machine "m2" (an agent's token is for its machine, "m1")`) {
			t.Errorf("agent m1 writing machine m2 (%s): %v", op.Kind, err)
		}
	}
	// A scheduler's token is for its own lease: another instance's is not
	// its to take, renew or give back.
	for _, op := range []txn.Op{
		txn.CreateLease(&omegav1.Lease{Meta: &omegav1.ObjectMeta{Name: "batch-1"}}),
		txn.PutLease(&omegav1.Lease{Meta: &omegav1.ObjectMeta{Name: "batch-1"}}, 3),
		txn.Delete(omegav1.ObjectKind_OBJECT_KIND_LEASE, txn.LeaseUID("batch-1"), 3),
	} {
		err := server.Authorize(server.Identity{Role: server.RoleScheduler, Name: "batch-0"}, &txn.Txn{Ops: []txn.Op{op}})
		if err == nil || !errors.Is(err, server.ErrPermission) || !strings.Contains(err.Error(), `(a scheduler's token is for its own lease, "batch-0"`) {
			t.Errorf("scheduler batch-0 writing batch-1's lease (%s): %v", op.Kind, err)
		}
	}
}
