package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUpgradeSingleServer: a single server's data made the first member of
// a replicated cell by omega server upgrade, as the README says. The single
// server commits jobs and stops; the upgrade refuses a target that is not
// empty and a directory with no store, then writes the member; member 1
// starts on it at the single server's revision with every job; member 2 is
// added and joins, catching up by snapshot; a commit through member 2 then
// lands on both. The single server's directory is left as it was: it
// starts again as a single server at its old revision.
func TestUpgradeSingleServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	single := t.TempDir()
	s := startServer(t, single)
	var names []string
	for i := range 5 {
		name := fmt.Sprintf("single-%d", i)
		commitVia(t, []string{s.grpc}, name)
		names = append(names, name)
	}
	rev, _, _, _ := health(s.http)
	if rev == 0 {
		t.Fatal("the single server says no revision")
	}
	s.stop(t)

	p1, to := freePort(t), filepath.Join(t.TempDir(), "member-1")
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), []byte("x"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", single, "--to", full, "--address", p1}, "is not empty"},
		{[]string{"--data", t.TempDir(), "--to", to, "--address", p1}, "holds no single server's store"},
		{[]string{"--data", single, "--to", to}, "--address are required"},
	} {
		out, stderr, err := run(t, "", append([]string{"server", "upgrade"}, tc.args...)...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Fatalf("omega server upgrade %v: %v\n%s%s\nwant refused with %q", tc.args, err, out, stderr, tc.want)
		}
	}
	out, stderr, err := run(t, "", "server", "upgrade", "--data", single, "--to", to, "--address", p1)
	if err != nil || !strings.Contains(out, fmt.Sprintf("revision %d", rev)) || !strings.Contains(out, "--peers 1="+p1) {
		t.Fatalf("omega server upgrade: %v\n%s%s", err, out, stderr)
	}

	m1 := startServerAt(t, to, p1, "--peers", "1="+p1, "--member", "1")
	if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
		r, m, l, ok := health(m1.http)
		return ok && r == rev && m == 1 && l == 1
	}) {
		t.Fatalf("member 1 does not lead at revision %d within 30 s:\n%s", rev, m1.log())
	}
	p2, dir2 := freePort(t), t.TempDir()
	if out, stderr, err := run(t, "", "server", "add", "2", "--address", p2, "--server", p1); err != nil {
		t.Fatalf("omega server add 2: %v\n%s%s", err, out, stderr)
	}
	m2 := startServerAt(t, dir2, p2, "--peers", "1="+p1+",2="+p2, "--member", "2", "--join")
	if !eventually(30*time.Second, 50*time.Millisecond, func() bool {
		st := serverStatus(p2)
		return st != nil && st.GetRole() == "follower" && st.GetRevision() >= rev
	}) {
		t.Fatalf("member 2 is not a caught-up voter within 30 s: %v\n%s", serverStatus(p2), m2.log())
	}
	commitVia(t, []string{p2}, "replicated-0")
	names = append(names, "replicated-0")
	c := &replCell{t: t, srv: []*serverProc{m1, m2}}
	c.requireJobs(names)

	// The single server's directory, untouched, is still a single server's.
	again := startServer(t, single)
	if r, _, _, _ := health(again.http); r != rev {
		t.Fatalf("the single server's directory restarted at revision %d, want %d", r, rev)
	}
}
