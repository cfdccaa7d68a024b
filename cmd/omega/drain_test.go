package main_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/api/omega/v1/cellgrpc"
	"github.com/omega-cell/omega/internal/testkit"
	"github.com/omega-cell/omega/txn"
)

// holdCommit opens a Commit call on the server at addr and never sends its
// transaction: a commit in flight for as long as the test likes, which a
// graceful stop waits for. It returns once the server has the call (a
// call after it on the same connection was answered, and the server reads
// a connection's frames in order).
func holdCommit(t *testing.T, addr string) grpc.ClientStream {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	held, err := conn.NewStream(ctx, &grpc.StreamDesc{StreamName: "Commit", ClientStreams: true}, cellgrpc.Cell_Commit_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	defer gcancel()
	_, err = cellgrpc.NewCellClient(conn).Get(gctx, &cellgrpc.GetRequest{Kind: omegav1.ObjectKind_OBJECT_KIND_MACHINE, Uid: testkit.UID('x', 1, 1).String()})
	if s, ok := grpcstatus.FromError(err); !ok || s.Code() != codes.NotFound {
		t.Fatalf("the call after the held commit: %v, want NotFound from the server", err)
	}
	return held
}

// waitServerLog waits, at most within, for want in the server's log: each
// line it logs wakes the wait.
func waitServerLog(t *testing.T, p *serverProc, want string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for !strings.Contains(p.log(), want) {
		select {
		case <-p.wrote:
		case <-deadline:
			t.Fatalf("no %q in the server's log within %v:\n%s", want, within, p.log())
		}
	}
}

// TestDrainCutShortBySecondSignal: a server drains on SIGTERM, waiting
// (up to --drain, ten minutes here) for a commit in flight; a second
// SIGTERM, or an interrupt, stops it at once: it exits 1, saying the drain
// was cut short, the commit in flight unacknowledged, and the store it
// left reopens with every acknowledged commit.
func TestDrainCutShortBySecondSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	for _, second := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(second.String(), func(t *testing.T) {
			data := t.TempDir()
			p := startServerAt(t, data, "127.0.0.1:0", "--drain", "10m")
			c, _ := newRemoteClient(t, p.grpc, "tester")
			tx := c.NewTxn(c.View())
			uid := c.NewUID()
			tx.Ops = []txn.Op{txn.CreateMachine(testkit.Machine(uid, "m0", testkit.Res(4000, 1<<34)))}
			res, err := c.Commit(context.Background(), tx)
			if err != nil || res.Committed != 1 {
				t.Fatalf("commit: %+v %v", res, err)
			}
			held := holdCommit(t, p.grpc)

			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			waitServerLog(t, p, "msg=draining", 30*time.Second)
			select {
			case err := <-p.exited:
				t.Fatalf("the server exited (%v) with a commit in flight, within --drain:\n%s", err, p.log())
			default:
			}
			if err := p.cmd.Process.Signal(second); err != nil {
				t.Fatal(err)
			}
			var exit error
			select {
			case exit = <-p.exited:
				p.exited <- exit // for the cleanup
			case <-time.After(30 * time.Second):
				t.Fatalf("the server did not stop within 30 s of a second signal (%v) during its drain:\n%s", second, p.log())
			}
			var ee *exec.ExitError
			if !errors.As(exit, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("exit %v after the drain was cut short, want status 1:\n%s", exit, p.log())
			}
			for _, want := range []string{"the drain is cut short", "not acknowledged", "omega: stopped at once by a second signal"} {
				if !strings.Contains(p.log(), want) {
					t.Fatalf("the server's log does not say %q:\n%s", want, p.log())
				}
			}
			if strings.Contains(p.log(), "msg=stopped") {
				t.Fatalf("the server says it stopped as after a drain:\n%s", p.log())
			}
			if err := held.RecvMsg(&omegav1.TransactionResult{}); err == nil {
				t.Fatal("the commit in flight was acknowledged")
			}

			p2 := startServer(t, data)
			c2, _ := newRemoteClient(t, p2.grpc, "tester")
			if m, ok := c2.View().Machine(uid); !ok || c2.View().Revision() != res.Revision {
				t.Fatalf("after the restart: revision %d, machine %v; want %d with the machine committed before", c2.View().Revision(), m, res.Revision)
			}
			if err := p2.stop(t); err != nil {
				t.Fatalf("a drain with nothing in flight: %v\n%s", err, p2.log())
			}
		})
	}
}
