package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/omega-cell/omega/internal/testkit"
)

// BenchmarkReplicatedAddServer measures issue 32's figure: a server added
// to a running cell of three members holding 10,000 machines and 100,000
// tasks (each claimed), caught up — serving reads at the leader's revision —
// within 30 s. It populates the cell through the leader (commits
// of 2,000 operations), runs omega server add 4 through the CLI, starts
// member 4 with --join on an empty directory, and reports the seconds from
// its start to its first answer at the leader's revision (caught-up-s) and
// to its promotion to a voter (voter-s), beside the populate's seconds and
// the leader's snapshot size. Run it as
//
//	go test ./cmd/omega -run '^$' -bench ReplicatedAddServer -benchtime 1x -timeout 30m
func BenchmarkReplicatedAddServer(b *testing.B) {
	machines, perMachine := 10_000, 10
	if v, err := strconv.Atoi(os.Getenv("OMEGA_ADD_MACHINES")); err == nil && v > 0 {
		machines = v
	}
	for range b.N {
		b.StopTimer()
		var ports, dirs, peers []string
		for i := range 3 {
			ports, dirs = append(ports, freePort(b)), append(dirs, b.TempDir())
			peers = append(peers, fmt.Sprintf("%d=%s", i+1, ports[i]))
		}
		var srv []*serverProc
		for i := range 3 {
			srv = append(srv, startServerAt(b, dirs[i], ports[i], "--peers", strings.Join(peers, ","), "--member", fmt.Sprint(i+1)))
		}
		lead := -1
		if !eventually(30*time.Second, 20*time.Millisecond, func() bool {
			for i, s := range srv {
				if _, m, l, ok := health(s.http); ok && l != 0 && m == l {
					lead = i
				}
			}
			return lead >= 0
		}) {
			b.Fatal("no leader within 30 s")
		}
		c, _ := newRemoteClient(b, ports[lead], "bench")
		populate := time.Now()
		fillCell(b, c, testkit.NewIDs(11, 1), machines, perMachine)
		populated := time.Since(populate)
		want, _, _, _ := health(srv[lead].http)

		p4, dir4 := freePort(b), b.TempDir()
		out, stderr, err := run(b, "", "server", "add", "4", "--address", p4, "--server", ports[(lead+1)%3])
		if err != nil {
			b.Fatalf("omega server add 4: %v\n%s%s", err, out, stderr)
		}
		b.StartTimer()
		start := time.Now()
		s4 := startServerAt(b, dir4, p4, "--peers", strings.Join(peers, ",")+",4="+p4, "--member", "4", "--join")
		var caught, voter time.Duration
		if !eventually(120*time.Second, 20*time.Millisecond, func() bool {
			if caught == 0 {
				if rev, _, _, _ := health(s4.http); rev >= want {
					caught = time.Since(start)
				}
			}
			if st := serverStatus(p4); caught != 0 && st != nil && st.GetRole() == "follower" {
				voter = time.Since(start)
			}
			return voter != 0
		}) {
			b.Fatalf("member 4 not a caught-up voter in 120 s (caught up after %s):\n%s", caught, s4.log())
		}
		b.StopTimer()
		st := serverStatus(ports[lead])
		snaps := 0.0
		if st != nil {
			snaps = float64(st.GetSnapshots())
		}
		b.ReportMetric(caught.Seconds(), "caught-up-s")
		b.ReportMetric(voter.Seconds(), "voter-s")
		b.ReportMetric(populated.Seconds(), "populate-s")
		b.ReportMetric(float64(want), "revision")
		b.ReportMetric(snaps, "leader-snapshots")
		var snapMB float64
		if files, _ := filepath.Glob(filepath.Join(dir4, "raft", "snap-*")); len(files) > 0 {
			if fi, err := os.Stat(files[len(files)-1]); err == nil {
				snapMB = float64(fi.Size()) / (1 << 20)
			}
		}
		b.ReportMetric(snapMB, "snapshot-MiB")
		b.Logf("%d machines, %d tasks at revision %d (populated in %s); member 4 caught up %s after its start, a voter at %s", machines, machines*perMachine, want, populated.Round(time.Millisecond), caught.Round(time.Millisecond), voter.Round(time.Millisecond))
	}
}
