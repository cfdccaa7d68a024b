package main_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omega-cell/omega/client/remote"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// TestReplicatedLeaderStopped: SIGSTOP of the leader under clients that
// commit through every server, the stopped one included: the other two
// elect a leader and commit; resumed, the old leader follows the new one,
// and every commit any client saw acknowledged — through the old leader
// too — is in every server's cell (it acknowledged nothing of its old
// term that the cell then lost).
func TestReplicatedLeaderStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	cell := newReplCell(t)
	ports, srv := cell.ports, cell.srv
	leader := func(skip int) (int, uint64) { i := cell.leader(skip); return i, uint64(i + 1) }
	old, _ := leader(-1)
	var mu sync.Mutex
	var acked []string
	ackedThrough := map[int]int{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Add(1)
		go func() { // client c commits through server c
			defer wg.Done()
			tr, err := remote.Dial(ports[c])
			if err != nil {
				t.Error(err)
				return
			}
			defer tr.Close()
			for n := 0; ctx.Err() == nil; n++ {
				name := fmt.Sprintf("s%d-%d", c, n)
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := tr.Commit(cctx, &txn.Txn{Component: "client", Ops: []txn.Op{txn.CreateJob(testkit.Job(uuid.New(), name, "batch"))}})
				cancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, name)
					ackedThrough[c]++
					mu.Unlock()
				}
			}
		}()
	}
	waitAcks := func(more int) {
		mu.Lock()
		want := len(acked) + more
		mu.Unlock()
		if !eventually(30*time.Second, 10*time.Millisecond, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(acked) >= want
		}) {
			var hs []string
			for i, s := range srv {
				r, m, l, ok := health(s.http)
				hs = append(hs, fmt.Sprintf("server %d: revision %d member %d leader %d ok %v", i+1, r, m, l, ok))
			}
			mu.Lock()
			t.Fatalf("fewer than %d more commits in 30 s (through each server: %v)\n%s\nthe new leader's log:\n%s", more, ackedThrough, strings.Join(hs, "\n"), srv[(old+1)%3].log())
		}
	}
	waitAcks(30)
	srv[old].cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	next, nextID := leader(old)
	waitAcks(30)
	t.Logf("leader %d stopped; member %d leads %v later", old+1, nextID, time.Since(stopped).Round(time.Millisecond))
	srv[old].cmd.Process.Signal(syscall.SIGCONT)
	// Resumed, it follows the new leader.
	var m, l uint64
	if !eventually(30*time.Second, 20*time.Millisecond, func() bool {
		var ok bool
		_, m, l, ok = health(srv[old].http)
		return ok && l != 0 && l != m
	}) {
		t.Fatalf("the resumed old leader does not follow another: member %d leader %d", m, l)
	}
	waitAcks(30)
	stop()
	wg.Wait()
	_ = next
	cell.requireJobs(acked)
	t.Logf("%d commits acknowledged (through each server: %v), all in every cell", len(acked), ackedThrough)
}
