// Package lint holds the project's conventions that run as tests
// (STYLE.md, habit 11).
package lint

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// decisionPackages are the folders (with their subfolders) whose code must
// run unchanged under the simulation's virtual clock: no wall clock, no
// goroutines of their own (DESIGN.md "Layout"). The agents' core (the
// tracker, executor, membership and reporter, the simulated fleet, the dead
// machine's transaction), the job controller and the virtual-time engine
// (bench/vtime) are decision code too.
// Live code — schedulers/live, the live agent and the gRPC transport with
// the live cell — waits only through an injected client.Clock and context
// deadlines, and where it must own goroutines it is listed in notDecision
// with the reason. A folder that does not exist yet is skipped.
var decisionPackages = []string{"txn", "client", "schedulers", "agents", "jobs", "bench/vtime", "replica"}

// notDecision are folders below decisionPackages that are not decision
// code, and why.
var notDecision = map[string]string{
	// The conformance suite drives a transport as its users do: committers
	// on goroutines, a Next that blocks while another commits.
	"client/transport/transporttest": "a test kit: it runs transports, it decides nothing",
	// The gRPC transport receives a watch's stream on a goroutine of its
	// own and bounds calls with deadlines (live code beside the client).
	"client/remote": "live code: the gRPC transport",
	// The process executor waits on each task's supervisor on a goroutine
	// of its own and times the grace of a kill.
	"agents/process": "live code: the process executor",
	// A raft member as a server runs it: the wall clock's ticks, a goroutine
	// owning the member, one streaming to each peer.
	"replica/live": "live code: the replicated member's driver and peer transport",
}

// forbiddenTime lists the package time functions that read the wall clock
// or wait on it. Since and Until are Now in disguise; AfterFunc is a timer
// and a goroutine.
var forbiddenTime = map[string]bool{
	"Now": true, "Sleep": true, "After": true, "NewTimer": true, "NewTicker": true, "Tick": true,
	"AfterFunc": true, "Since": true, "Until": true,
}

// allowed lists, per file (slash path from the repository root), the
// functions ("Recv.Name" or "Name") that may break the rule, and why.
var allowed = map[string]map[string]string{
	"client/client.go": {
		// RealClock is the one place live components get the wall clock
		// from: everything else takes a Clock, so the simulation passes its
		// virtual clock instead.
		"RealClock.Now":   "the wall clock behind the Clock interface",
		"RealClock.Sleep": "the wall clock's timer behind the Clock interface",
	},
	// The live agent's runtime around its core (Core.Step, decision code):
	// the wall clock, the ticker and the probes' goroutines.
	"agents/live/run.go": {
		"Run":   "live code: the wall clock's time for the core's listing",
		"drive": "live code: the ticker, the wall clock's time for each step, a goroutine per probe",
		"probe": "live code: the time of a probe's answer",
	},
	// A scheduler instance assembled around its driver: the membership's
	// follower on a goroutine of its own, waited for before Run returns.
	"schedulers/live/run.go": {
		"Run": "live code: the goroutine that follows the gossip membership",
	},
}

func TestNoWallClockOrGoroutinesInDecisionCode(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	for _, pkg := range decisionPackages {
		if _, err := os.Stat(filepath.Join(root, pkg)); errors.Is(err, fs.ErrNotExist) {
			t.Logf("%s: not there yet, skipped", pkg)
			continue
		}
		walkGo(t, root, pkg, func(rel string) bool { return notDecision[rel] != "" }, func(rel string, src []byte) error {
			problems, err := check(rel, src, allowed[rel])
			if err != nil {
				return err
			}
			for _, p := range problems {
				t.Error(p)
			}
			checked++
			return nil
		})
	}
	if checked == 0 {
		t.Fatalf("no file checked under %v in %s", decisionPackages, root)
	}
}

// walkGo calls visit with every non-test Go file below dir (relative to
// root, slash-separated), skipping testdata, hidden and underscore folders
// and the folders skip names; a walk or visit error fails the test.
func walkGo(t *testing.T, root, dir string, skip func(rel string) bool, visit func(rel string, src []byte) error) {
	t.Helper()
	top := filepath.Join(root, dir)
	err := filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path != top && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
				return filepath.SkipDir
			}
			if skip != nil && skip(rel) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return visit(rel, src)
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
}

// check parses one file and returns a line per violation: a call of (or
// reference to) a forbidden time function, or a go statement, outside the
// allowed functions.
func check(name string, src []byte, allow map[string]string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", name, err)
	}
	// The names package time is imported under in this file.
	timeNames := map[string]bool{}
	var problems []string
	report := func(pos token.Pos, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s: %s", fset.Position(pos), fmt.Sprintf(format, args...)))
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if path != "time" {
			continue
		}
		switch {
		case imp.Name == nil:
			timeNames["time"] = true
		case imp.Name.Name == ".":
			report(imp.Pos(), `dot import of "time" hides wall-clock calls; import it by name`)
		case imp.Name.Name != "_":
			timeNames[imp.Name.Name] = true
		}
	}
	for _, decl := range f.Decls {
		fn := declName(decl)
		if _, ok := allow[fn]; ok {
			continue
		}
		where := fn
		if where == "" {
			where = "package level"
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				report(n.Pos(), "go statement in %s: decision code starts no goroutine (the caller owns them)", where)
			case *ast.SelectorExpr:
				id, ok := n.X.(*ast.Ident)
				// id.Obj is set when the name resolves to something declared
				// in this file (a local variable shadowing the import).
				if ok && id.Obj == nil && timeNames[id.Name] && forbiddenTime[n.Sel.Name] {
					report(n.Pos(), "%s.%s in %s: take the time from an injected Clock", id.Name, n.Sel.Name, where)
				}
			}
			return true
		})
	}
	return problems, nil
}

// declName names a function declaration "Recv.Name" or "Name"; other
// declarations have no name.
func declName(d ast.Decl) string {
	fn, ok := d.(*ast.FuncDecl)
	if !ok {
		return ""
	}
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		case *ast.ParenExpr:
			typ = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fn.Name.Name
		}
		return fn.Name.Name
	}
}

// repoRoot walks up from the working directory to the folder holding go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestCheckFindsViolations holds the checker itself to account.
func TestCheckFindsViolations(t *testing.T) {
	src := `package p

import (
	"context"
	clock "time"
)

var started = clock.Now()

type RealClock struct{}

func (RealClock) Now() clock.Time { return clock.Now() }

func (c *Cache[K]) Refresh() { go c.loop() }

func wait(ctx context.Context) {
	t := clock.NewTimer(clock.Second)
	defer t.Stop()
	<-clock.After(clock.Second)
	f := clock.Since
	_ = f
	_ = clock.Duration(3) // a type: fine
}

func shadow() {
	clock := fakeClock{}
	clock.Now() // a local, not the package
}
`
	got, err := check("p/p.go", []byte(src), map[string]string{"RealClock.Now": "test"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"p/p.go:8:15: clock.Now in package level",
		"p/p.go:14:32: go statement in Cache.Refresh",
		"p/p.go:17:7: clock.NewTimer in wait",
		"p/p.go:19:4: clock.After in wait",
		"p/p.go:20:7: clock.Since in wait",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d: %q, want it to start with %q", i, got[i], want[i])
		}
	}

	dot := "package p\n\nimport . \"time\"\n\nfunc f() { Sleep(1) }\n"
	got, err = check("p/dot.go", []byte(dot), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.Contains(got[0], "dot import") {
		t.Fatalf("dot import: %v", got)
	}

	// The allow-list names functions that exist.
	root := repoRoot(t)
	for file, fns := range allowed {
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if errors.Is(err, fs.ErrNotExist) {
			t.Errorf("allow-list names %s, which does not exist", file)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, d := range f.Decls {
			names = append(names, declName(d))
		}
		for fn := range fns {
			if !slices.Contains(names, fn) {
				t.Errorf("allow-list names %s in %s, which does not declare it", fn, file)
			}
		}
	}
}
