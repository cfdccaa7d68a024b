package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
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
	// The objects (generated protobuf messages): below everything.
	"api/omega/v1": {},
	"txn":          {"api/omega/v1", "internal/pmap", "internal/vmap"},
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
	// The persistent map keyed by uuid under txn's state.
	"internal/pmap": {},
	// The versioned map over it (txn's tables).
	"internal/vmap": {"internal/pmap"},
	// The finder of NaN and infinite floats in a report, by JSON path.
	"internal/finite": {},
	// What the reports say about the machine running them.
	"internal/hostinfo": {},
	// Transactions built from a fuzzer's bytes, for txn's and store's fuzz
	// targets.
	"internal/txnfuzz": {"api/omega/v1", "txn"},
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
	// The replicated member: the store's txn code under raft's log (decision
	// code), and its live driver with the peer transport and the forwarding
	// of commits to the leader's API.
	"replica":      {"api/omega/v1", "txn"},
	"replica/live": {"api/omega/v1", "api/omega/v1/cellgrpc", "txn", "replica", "client/remote", "client/transport"},
	// The store served over gRPC.
	// (Run assembles it with the job controller, an in-process client.)
	"server": {"api/omega/v1", "api/omega/v1/cellgrpc", "txn", "store", "labels", "agents", "client", "client/transport", "client/inproc", "client/transport/grpcerr", "client/transport/rawgrpc", "jobs", "membership", "replica", "replica/live"},
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

// mayImportAnything are the packages above every layer, which may import
// any of the project's packages and so have no row in mayImport: the
// command tree and the binary that calls it, the bench (which assembles
// whole cells), the examples (which build on the command tree), and this
// lint, which has only tests. A name ending in "/..." stands for the
// folder and everything below it.
var mayImportAnything = []string{"cli", "cmd/...", "bench/...", "examples/...", "internal/lint"}

// internalMayImport are the packages outside internal/ that a package
// under internal/ may import: internal/ holds only what sits below the
// layers (data structures, test kits, small helpers), so of the project it
// sees only the objects and the transactions; only the test kits
// (internal/testkit/...) may see the store as well.
var internalMayImport = []string{"api/omega/v1", "txn"}

// packageDirs returns the folders (slash paths from the repository root)
// that hold a package: at least one non-test .go file. Hidden folders,
// testdata and vendor are no packages.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs
}

// moduleImports returns the project's packages (paths relative to the
// module) that the non-test files of the package in dir import, each with
// the file (slash path from the root) that imports it.
func moduleImports(t *testing.T, root, dir string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	deps := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if dep, ok := strings.CutPrefix(path, module); ok {
				rel, _ := filepath.Rel(root, f)
				deps[dep] = filepath.ToSlash(rel)
			}
		}
	}
	return deps
}

// TestInternalSitsBelowTheLayers holds internal/ to one place in the
// layering: below every layer. Its packages import, of the project, only
// the objects (api/omega/v1), txn and one another; the test kits may open
// stores too. Nothing under internal/ may import the command tree, the
// bench, the server, the schedulers, the agents, the client, the jobs or
// the auditor: a folder that did would sit above and below them at once.
func TestInternalSitsBelowTheLayers(t *testing.T) {
	root := repoRoot(t)
	n := 0
	for _, dir := range packageDirs(t, root) {
		if !strings.HasPrefix(dir, "internal/") {
			continue
		}
		n++
		testKit := dir == "internal/testkit" || strings.HasPrefix(dir, "internal/testkit/")
		for dep, file := range moduleImports(t, root, dir) {
			switch {
			case strings.HasPrefix(dep, "internal/"), slices.Contains(internalMayImport, dep):
			case dep == "store" && testKit:
			case dep == "store":
				t.Errorf("%s imports store: under internal/ only the test kits (internal/testkit/...) may (DESIGN.md, Layout)", file)
			default:
				t.Errorf("%s imports %s: a package under internal/ sits below the layers and may import, of the project, only %v and internal/ (the test kits also store) (DESIGN.md, Layout)", file, dep, internalMayImport)
			}
		}
	}
	if n == 0 {
		t.Fatal("no package under internal/: the walk is broken")
	}
}

// TestEveryPackageIsPlaced fails on a package that neither has a row in
// mayImport nor is one of mayImportAnything, so that a new package cannot
// escape the layering unseen.
func TestEveryPackageIsPlaced(t *testing.T) {
	root := repoRoot(t)
	dirs := packageDirs(t, root)
	if len(dirs) == 0 {
		t.Fatal("no package found: the walk is broken")
	}
	for _, dir := range dirs {
		if _, ok := mayImport[dir]; ok {
			continue
		}
		anything := false
		for _, a := range mayImportAnything {
			if prefix, ok := strings.CutSuffix(a, "/..."); ok {
				anything = anything || dir == prefix || strings.HasPrefix(dir, prefix+"/")
			} else {
				anything = anything || dir == a
			}
		}
		if !anything {
			t.Errorf("package %s has no place in the layering: add it to mayImport in internal/lint/imports_test.go with what it may import and why (DESIGN.md, Layout), or, if it sits above every layer, to mayImportAnything", dir)
		}
	}
	// The reverse: a row for a package that has gone is a stale table.
	for pkg := range mayImport {
		if !slices.Contains(dirs, pkg) {
			t.Errorf("mayImport has a row for %s, which holds no package: remove it (DESIGN.md, Layout)", pkg)
		}
	}
}
