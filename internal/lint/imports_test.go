package lint

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/omega-cell/omega/"

// mayImport is DESIGN.md's layout table: which of the project's packages
// each layer's non-test code may import. Arrows point one way: txn knows
// nothing of storage, store nothing of schedulers, schedulers nothing of
// the bench.
var mayImport = map[string][]string{
	"txn": {"api/omega/v1", "internal/pmap", "internal/vmap"},
	// The test kit: builders every layer's tests share, so below them all.
	"internal/testkit": {"api/omega/v1", "txn"},
	// Its store helpers, for the tests of the layers above the store: opening
	// stores, and the randomized history (Driver) they are tested against.
	"internal/testkit/storekit": {"api/omega/v1", "txn", "store", "internal/testkit"},
	"store":                     {"api/omega/v1", "txn"},
	"client/transport":          {"api/omega/v1", "txn"},
	"client/inproc":             {"api/omega/v1", "txn", "client/transport", "store"},
	// The typed errors as gRPC statuses: the only client piece that links gRPC.
	"client/transport/grpcerr": {"api/omega/v1", "txn", "client/transport"},
	"client/transport/rawgrpc": {},
	// The conformance suite opens stores for the backends it tests, and
	// commits the randomized history (storekit.Driver) through them.
	"client/transport/transporttest": {"api/omega/v1", "txn", "client/transport", "store", "internal/testkit/storekit"},
	"client":                         {"api/omega/v1", "txn", "client/transport"},
	"schedulers":                     {"api/omega/v1", "txn", "client", "client/transport"},
	"agents":                         {"api/omega/v1", "txn", "client", "client/transport", "internal/uidmap", "internal/minheap"},
	// The process executor: live code beside the agent core.
	"agents/process": {"api/omega/v1", "txn", "agents"},
	// The agent's runtime: its core (decision code) over the process
	// executor, and Run, the live code around it, which joins the gossip
	// (membership); the gRPC transport is the command line's to hand in.
	"agents/live": {"api/omega/v1", "txn", "client", "client/transport", "agents", "agents/process", "internal/hostinfo", "membership"},
	// The job controller: a client of the cell like the agents.
	"jobs": {"api/omega/v1", "txn", "client", "client/transport", "internal/uidmap"},
	// A map keyed by uuid, for the components' large per-object maps.
	"internal/uidmap": {},
	// A typed min-heap, for the queues of timed events.
	"internal/minheap": {},
	// The runner of scripted protocol tests (testdata scripts, -rewrite).
	"internal/script": {},
	"internal/vmap":   {"internal/pmap"},
	// Live code: it waits on the real clock (through client.Clock and
	// context deadlines) around the decision code, which never does.
	// The gossip bridge turns the membership's events into the driver's
	// members.
	"schedulers/live": {"api/omega/v1", "txn", "client", "client/transport", "schedulers", "membership"},
	// The cell's gossip membership: the metadata codec, profiles, key and
	// joins every component shares (memberlist and uuid, nothing of ours).
	"membership": {},
	// Hand-written object files, for the CLI.
	"internal/objfile": {"api/omega/v1"},
	// The independent invariant checker of a store's state and of a
	// history (omega audit): a production tool, knowing only the objects.
	"audit": {"api/omega/v1", "txn"},
	// The virtual-time engine: it knows nothing of cells (bench/sim
	// assembles the paper's cell on it).
	"bench/vtime": {},
	// Label selectors: below everything that evaluates them.
	"labels": {},
	// The gRPC service's generated code, apart from the messages so that
	// they link no gRPC.
	"api/omega/v1/cellgrpc": {"api/omega/v1"},
	// The gRPC transport: live code, linking gRPC but never the store.
	"client/remote": {"api/omega/v1", "api/omega/v1/cellgrpc", "txn", "client/transport", "client/transport/grpcerr", "client/transport/rawgrpc"},
	// The store served over gRPC.
	// (Run assembles it with the job controller, an in-process client.)
	"server": {"api/omega/v1", "api/omega/v1/cellgrpc", "txn", "store", "labels", "agents", "client", "client/transport", "client/inproc", "client/transport/grpcerr", "client/transport/rawgrpc", "jobs", "membership"},
}

// remoteOnly are the packages a scheduler or agent binary that talks to a
// remote store links: none of them may pull in the store or pebble, at any
// depth (the in-process transport is client/inproc, of its own).
var remoteOnly = []string{"client", "client/transport", "schedulers", "schedulers/live", "agents", "agents/live", "jobs", "membership"}

// grpcRemote is the gRPC transport a remote component adds to them: it may
// link gRPC, never the store.
var grpcRemote = []string{"client/remote", "api/omega/v1/cellgrpc"}

func TestRemoteComponentsDoNotLinkTheStore(t *testing.T) {
	root := repoRoot(t)
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}"}
	for _, p := range remoteOnly {
		args = append(args, module+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == module+"store" || strings.HasPrefix(dep, "github.com/cockroachdb/pebble") {
			t.Errorf("%v link %s: a remote scheduler or agent would carry the store", remoteOnly, dep)
		}
		if strings.HasPrefix(dep, "google.golang.org/grpc") {
			t.Errorf("%v link %s: only the gRPC transport (client/remote, client/transport/grpcerr, client/transport/rawgrpc) may", remoteOnly, dep)
		}
	}
	args = []string{"list", "-deps", "-f", "{{.ImportPath}}"}
	for _, p := range grpcRemote {
		args = append(args, module+p)
	}
	cmd = exec.Command("go", args...)
	cmd.Dir = root
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == module+"store" || strings.HasPrefix(dep, "github.com/cockroachdb/pebble") {
			t.Errorf("%v link %s: the gRPC transport would carry the store", grpcRemote, dep)
		}
	}
}

func TestLayering(t *testing.T) {
	root := repoRoot(t)
	for pkg, allowed := range mayImport {
		files, _ := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if len(files) == 0 {
			t.Logf("%s: not there yet, skipped", pkg)
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				dep, ok := strings.CutPrefix(path, module)
				if !ok {
					continue
				}
				permitted := false
				for _, a := range allowed {
					if dep == a {
						permitted = true
					}
				}
				if !permitted {
					rel, _ := filepath.Rel(root, f)
					t.Errorf("%s imports %s: %s may import only %v (DESIGN.md, Layout)", rel, dep, pkg, allowed)
				}
			}
		}
	}
}
