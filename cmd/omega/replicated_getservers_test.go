package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serverRow is a row of `omega get servers -o json`.
type serverRow struct {
	Member, Leader, Term, Revision string
	Role, Address                  string
}

// getServers runs `omega get servers -o json` through addr.
func getServers(t *testing.T, addr string) ([]serverRow, error) {
	out, errs, err := run(t, "", "get", "servers", "-o", "json", "--server", addr)
	if err != nil {
		return nil, &runError{err, errs}
	}
	var doc struct{ Items []serverRow }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("get servers -o json: %v\n%s", err, out)
	}
	return doc.Items, nil
}

type runError struct {
	err    error
	stderr string
}

func (e *runError) Error() string { return e.err.Error() + ": " + e.stderr }

// TestGetServers: `omega get servers` through any member of three shows
// the three, exactly one leading, all of one term, their revisions equal
// once the cell is quiet; after the leader's SIGKILL it shows it
// unreachable and another leading in a later term. A single server is one
// row, role single.
func TestGetServers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := newReplCell(t)
	lead := c.leader(-1)
	var rows []serverRow
	var err error
	settled := func(via int, wantLeader string, skip int) bool {
		rows, err = getServers(t, c.ports[via])
		if err != nil || len(rows) != 3 {
			return false
		}
		leaders, term, rev := 0, "", ""
		for i, r := range rows {
			if i == skip {
				if r.Role != "unreachable" {
					return false
				}
				continue
			}
			if r.Role == "leader" {
				leaders++
				if wantLeader != "" && r.Member != wantLeader {
					return false
				}
			}
			if term == "" {
				term, rev = r.Term, r.Revision
			}
			if r.Term != term || r.Revision != rev || r.Leader != rows[lead].Leader && skip < 0 {
				return false
			}
		}
		return leaders == 1
	}
	for via := range 3 {
		if !eventually(30*time.Second, 100*time.Millisecond, func() bool { return settled(via, "", -1) }) {
			t.Fatalf("get servers through server %d: %v %+v", via+1, err, rows)
		}
	}
	term0 := rows[lead].Term
	if rows[lead].Role != "leader" {
		t.Fatalf("server %d says it leads; get servers: %+v", lead+1, rows)
	}
	c.srv[lead].cmd.Process.Signal(syscall.SIGKILL)
	other := (lead + 1) % 3
	if !eventually(30*time.Second, 100*time.Millisecond, func() bool { return settled(other, "", lead) }) {
		t.Fatalf("after the leader's SIGKILL, get servers through server %d: %v %+v", other+1, err, rows)
	}
	for i, r := range rows {
		if i != lead && r.Role == "leader" && !(len(r.Term) > len(term0) || len(r.Term) == len(term0) && r.Term > term0) {
			t.Fatalf("the new leader's term %s is not after %s: %+v", r.Term, term0, rows)
		}
	}

	single := startServerAt(t, t.TempDir(), freePort(t))
	rows, err = getServers(t, single.grpc)
	if err != nil || len(rows) != 1 || rows[0].Role != "single" || !strings.Contains(single.grpc, rows[0].Address) {
		t.Fatalf("get servers on a single server: %v %+v", err, rows)
	}
}

// TestReplicatedMetrics: a member's /metrics reports its raft state — the
// leader is_leader 1 with every member's match index and progress, a
// follower is_leader 0 and the same term — and /healthz says reads are
// linearizable while a leader confirms them.
func TestReplicatedMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := newReplCell(t)
	lead := c.leader(-1)
	follower := (lead + 1) % 3
	scrape := func(s *serverProc) string {
		resp, err := http.Get("http://" + s.http + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var lm, fm string
	if !eventually(30*time.Second, 100*time.Millisecond, func() bool {
		lm, fm = scrape(c.srv[lead]), scrape(c.srv[follower])
		return strings.Contains(lm, "omega_raft_is_leader 1") && strings.Contains(fm, "omega_raft_is_leader 0") &&
			strings.Contains(lm, `omega_raft_peer_progress{member="`+fmt.Sprint(follower+1)+`",state="replicate"} 1`)
	}) {
		t.Fatalf("metrics:\nleader:\n%s\nfollower:\n%s", grepLines(lm, "omega_raft"), grepLines(fm, "omega_raft"))
	}
	for _, want := range []string{"omega_raft_term ", "omega_raft_commit_index ", "omega_raft_applied_index ", "omega_raft_proposals_pending ", "omega_raft_snapshots_total ", `omega_raft_peer_match_index{member="1"}`} {
		if !strings.Contains(lm, want) {
			t.Fatalf("the leader's metrics lack %s:\n%s", want, grepLines(lm, "omega_raft"))
		}
	}
	if body, err := healthBody(c.srv[follower].http); err != nil || !strings.Contains(body, "reads linearizable") {
		t.Fatalf("a follower's /healthz: %v\n%s", err, body)
	}
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
