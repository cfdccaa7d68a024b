package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omega-cell/omega/client"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/store"
	"github.com/omega-cell/omega/txn"
)

// TestSnapshotSaveRestore: `omega snapshot save` writes the cell of a
// running server to a file; `omega snapshot restore` refuses a directory
// that holds a store and a truncated, corrupt or foreign file, naming it
// and leaving nothing behind, and builds a new store from the good file;
// a server started on it serves the same objects at the same revision
// (`omega get jobs -o json` shows the job), and a watch from before that
// revision is compacted, so its client lists again.
func TestSnapshotSaveRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	work := t.TempDir()
	data := filepath.Join(work, "server")
	srv := startServer(t, data)
	job := filepath.Join("..", "..", "examples", "jobs", "hello.yaml")
	if out, errs, err := run(t, "", "submit", "-f", job, "--server", srv.grpc); err != nil {
		t.Fatalf("submit: %v\n%s%s", err, out, errs)
	}
	// The job controller writes the job's counts; then, with no scheduler
	// and no agent, nothing more commits.
	c, tr := newRemoteClient(t, srv.grpc, "tester")
	waitFor(t, c, 30*time.Second, "job hello counted 3 pending", func(v client.View) bool {
		counted := false
		v.RangeJobs(func(j *txn.Job) bool {
			counted = j.Name() == "hello" && j.Status.GetPending() == 3
			return !counted
		})
		return counted
	})
	ctx := context.Background()
	before, err := tr.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(work, "cell.snap")
	out, errs, err := run(t, "", "snapshot", "save", file, "--server", srv.grpc)
	if err != nil {
		t.Fatalf("snapshot save: %v\n%s%s", err, out, errs)
	}
	m := regexp.MustCompile(`^saved .* revision (\d+), 0 machines, 1 jobs, 3 tasks`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("snapshot save printed %q", out)
	}
	rev, _ := strconv.ParseUint(m[1], 10, 64)
	if rev != before.Revision() {
		t.Fatalf("saved revision %d, the cell was at %d", rev, before.Revision())
	}
	saved, info, err := store.LoadSnapshotFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := testkit.DiffStates(before, saved, testkit.Compare{Protos: true}); err != nil || info.Revision != rev {
		t.Fatalf("the file at revision %d against the cell: %v", info.Revision, err)
	}
	if err := srv.stop(t); err != nil {
		t.Fatalf("server exit: %v\n%s", err, srv.log())
	}

	// Bad input: refused, named, and nothing left in (or beside) the new
	// directory.
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := func(name string, b []byte) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flipped := []byte(string(good))
	flipped[40] ^= 0x01 // inside the first object's wire form
	restored := filepath.Join(work, "restored")
	for _, c := range []struct {
		file, dir string
		want      []string
	}{
		{file, data, []string{"restore into " + data, "already holds a store"}},
		{bad("cut.snap", good[:len(good)-40]), restored, []string{"cut.snap", "truncated"}},
		{bad("flipped.snap", flipped), restored, []string{"flipped.snap", "checksum does not match"}},
		{bad("foreign.snap", []byte("#!/bin/sh\necho this is no snapshot\n")), restored, []string{"foreign.snap", `not "OMEGASNP"`}},
		{filepath.Join(work, "missing.snap"), restored, []string{"missing.snap", "no such file"}},
	} {
		out, errs, err := run(t, "", "snapshot", "restore", c.file, "--data", c.dir)
		if err == nil {
			t.Fatalf("restore %s into %s succeeded: %s", c.file, c.dir, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Fatalf("restore %s into %s: %q lacks %q", c.file, c.dir, errs, w)
			}
		}
		if _, err := os.Stat(restored); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("after a refused restore %s exists (%v)", restored, err)
		}
		if left, _ := filepath.Glob(filepath.Join(work, ".*.restore-*")); len(left) > 0 {
			t.Fatalf("a refused restore left %v", left)
		}
	}

	out, errs, err = run(t, "", "snapshot", "restore", file, "--data", restored)
	if err != nil || !strings.HasPrefix(out, fmt.Sprintf("restored %s into %s: revision %d, 0 machines, 1 jobs, 3 tasks", file, restored, rev)) {
		t.Fatalf("snapshot restore: %v\n%s%s", err, out, errs)
	}
	srv2 := startServer(t, restored)
	out, errs, err = run(t, "", "get", "jobs", "-o", "json", "--server", srv2.grpc)
	if err != nil {
		t.Fatalf("get jobs: %v\n%s%s", err, out, errs)
	}
	var listing struct {
		Revision uint64 `json:"revision"`
		Items    []struct {
			Meta struct {
				Name string `json:"name"`
				UID  string `json:"uid"`
			} `json:"meta"`
			Status struct {
				Pending int `json:"pending"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &listing); err != nil {
		t.Fatalf("get jobs -o json: %v\n%s", err, out)
	}
	var uid string
	before.RangeJobs(func(j *txn.Job) bool { uid = j.UID.String(); return true })
	if listing.Revision != rev || len(listing.Items) != 1 || listing.Items[0].Meta.Name != "hello" || listing.Items[0].Meta.UID != uid || listing.Items[0].Status.Pending != 3 {
		t.Fatalf("the restored server lists, at revision %d (want %d):\n%s", listing.Revision, rev, out)
	}
	_, tr2 := newRemoteClient(t, srv2.grpc, "tester")
	after, err := tr2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := testkit.DiffStates(before, after, testkit.Compare{Protos: true}); err != nil {
		t.Fatalf("the restored cell: %v", err)
	}
	if _, err := tr2.Watch(ctx, rev-1); !errors.Is(err, txn.ErrCompacted) {
		t.Fatalf("a watch from revision %d on the cell restored at %d: %v, want compacted", rev-1, rev, err)
	}
	w, err := tr2.Watch(ctx, rev)
	if err != nil {
		t.Fatalf("a watch from the restored revision: %v", err)
	}
	w.Close()
	if err := srv2.stop(t); err != nil {
		t.Fatalf("restored server exit: %v\n%s", err, srv2.log())
	}
}
