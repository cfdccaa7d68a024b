package schedulers

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	omegav1 "github.com/omega-cell/omega/api/omega/v1"
	"github.com/omega-cell/omega/txn"
)

// Sample examines distinct machines (a random start and a stride coprime
// with the count), stops at want feasible ones or limit examined, and visits
// only feasible machines.
func TestSampleVisitsDistinctFeasibleMachines(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 6, 7, 12, 16, 30} {
		c := newCell(t, uint64(n))
		ms := c.addMachines(uniform(n, 2000, 8*gib, 0)...)
		full := map[uuid.UUID]bool{}
		for i := 0; i < n; i += 3 {
			full[ms[i]] = true
		}
		if len(full) > 0 {
			var list []uuid.UUID
			for i := 0; i < n; i += 3 {
				list = append(list, ms[i])
			}
			c.fill(1500, gib, list...)
		}
		v := c.view()
		var x MachineIndex
		x.Refresh(v)
		if x.Len() != n || !slices.IsSortedFunc(x.uids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }) {
			t.Fatalf("n=%d: index of %d machines, sorted %t", n, x.Len(), slices.IsSortedFunc(x.uids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }))
		}
		req := txn.Resources{CPU: 1000, Memory: gib}
		for seed := uint64(1); seed <= 20; seed++ {
			p := NewPlacer(v, nil)
			seen := map[uuid.UUID]int{}
			examined := Sample(&x, v, p, env(seed), req, nil, n, n, func(m *txn.Machine) bool { seen[m.UID]++; return true })
			if examined != n || len(seen) != n-len(full) {
				t.Fatalf("n=%d seed %d: examined %d, visited %d distinct; want %d and %d", n, seed, examined, len(seen), n, n-len(full))
			}
			for u, k := range seen {
				if k != 1 || full[u] {
					t.Fatalf("n=%d seed %d: machine %s visited %d times (full %t)", n, seed, u, k, full[u])
				}
			}
			// Stops at want feasible machines, or when visit says so.
			got := 0
			Sample(&x, v, p, env(seed), req, nil, 2, n, func(*txn.Machine) bool { got++; return true })
			if want := min(2, n-len(full)); got != want {
				t.Fatalf("n=%d seed %d: want=2 visited %d, want %d", n, seed, got, want)
			}
			got = 0
			Sample(&x, v, p, env(seed), req, nil, n, n, func(*txn.Machine) bool { got++; return false })
			if got > 1 {
				t.Fatalf("n=%d seed %d: visited %d after visit returned false", n, seed, got)
			}
			// The limit bounds the machines examined.
			if ex := Sample(&x, v, p, env(seed), req, nil, n, n/2, func(*txn.Machine) bool { return true }); ex != n/2 {
				t.Fatalf("n=%d seed %d: limit %d examined %d", n, seed, n/2, ex)
			}
		}
	}
	var empty MachineIndex
	c := newCell(t, 1)
	v := c.view()
	empty.Refresh(v)
	if ex := Sample(&empty, v, NewPlacer(v, nil), env(1), txn.Resources{}, nil, 1, 10, func(*txn.Machine) bool { t.Fatal("visited a machine of an empty cell"); return true }); ex != 0 {
		t.Fatalf("empty cell: examined %d", ex)
	}
}

// The machine index follows machines added to and removed from the cell.
func TestMachineIndexFollowsTheMachineSet(t *testing.T) {
	c := newCell(t, 1)
	ms := c.addMachines(uniform(3, 1000, gib, 3)...)
	var x MachineIndex
	x.Refresh(c.view())
	if x.Len() != 3 || x.Domains() != 3 {
		t.Fatalf("len %d domains %d", x.Len(), x.Domains())
	}
	c.fill(500, gib/2, ms[0]) // an allocation change is not a machine-set change
	x.Refresh(c.view())
	added := c.addMachines(machineSpec{cpu: 1000, mem: gib, domain: "d0"})
	x.Refresh(c.view())
	if x.Len() != 4 || x.Domains() != 3 {
		t.Fatalf("after adding: len %d domains %d", x.Len(), x.Domains())
	}
	c.commit(txn.Delete(omegav1.ObjectKind_OBJECT_KIND_MACHINE, ms[1], 0))
	x.Refresh(c.view())
	var uids []uuid.UUID
	for i := range x.Len() {
		uids = append(uids, x.At(i))
	}
	if x.Len() != 3 || slices.Contains(uids, ms[1]) || !slices.Contains(uids, added[0]) || x.Domains() != 2 {
		t.Fatalf("after removing: %v (domains %d)", uids, x.Domains())
	}
}

func TestClassesGroupInterchangeableTasks(t *testing.T) {
	diff := []*omegav1.Constraint{{Operator: omegav1.Constraint_OPERATOR_DIFFERENT_MACHINES}}
	eqA := []*omegav1.Constraint{{Attribute: "zone", Operator: omegav1.Constraint_OPERATOR_EQUAL, Value: "a"}}
	eqB := []*omegav1.Constraint{{Attribute: "zone", Operator: omegav1.Constraint_OPERATOR_EQUAL, Value: "b"}}
	mk := func(name string, cpu int64, cons []*omegav1.Constraint) *txn.Task {
		return txn.PlannedTask(uuid.Nil, uuid.Nil, &omegav1.Task{Meta: &omegav1.ObjectMeta{Name: name}, Spec: &omegav1.TaskSpec{Constraints: cons}}, txn.Resources{CPU: cpu, Memory: gib})
	}
	tasks := []*txn.Task{
		mk("a1", 1000, nil), mk("b1", 2000, nil), mk("a2", 1000, nil), mk("c1", 1000, diff),
		mk("d1", 1000, eqA), mk("e1", 1000, eqB), mk("d2", 1000, eqA), mk("b2", 2000, nil),
	}
	var got []string
	for _, cl := range Classes(tasks) {
		var names []string
		for _, tk := range cl.Tasks {
			names = append(names, tk.Meta.GetName())
		}
		got = append(got, strings.Join(names, ","))
	}
	want := []string{"a1,a2", "b1,b2", "c1", "d1,d2", "e1"}
	if !slices.Equal(got, want) {
		t.Fatalf("classes %v, want %v", got, want)
	}
}

// Lint: the package's decision code reads no wall clock, does not sleep,
// starts no goroutine and draws no unseeded randomness (STYLE.md: time and
// randomness are injected).
func TestNoWallClockGoroutinesOrGlobalRandomness(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbiddenTime := map[string]bool{"Now": true, "Sleep": true, "Since": true, "Until": true, "After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}
	allowedRand := map[string]bool{"New": true, "NewPCG": true, "NewChaCha8": true, "Rand": true, "Source": true, "PCG": true, "ChaCha8": true}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		imports := map[string]string{} // local name → path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := filepath.Base(path)
			if path == "math/rand/v2" {
				local = "rand"
			}
			if imp.Name != nil {
				local = imp.Name.Name
			}
			imports[local] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: go statement", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				id, ok := n.X.(*ast.Ident)
				if !ok {
					return true
				}
				switch imports[id.Name] {
				case "time":
					if forbiddenTime[n.Sel.Name] {
						t.Errorf("%s: time.%s", fset.Position(n.Pos()), n.Sel.Name)
					}
				case "math/rand/v2", "math/rand":
					if !allowedRand[n.Sel.Name] {
						t.Errorf("%s: %s.%s draws from the global source", fset.Position(n.Pos()), id.Name, n.Sel.Name)
					}
				}
			}
			return true
		})
	}
	if checked < 6 {
		t.Fatalf("checked %d files", checked)
	}
}
