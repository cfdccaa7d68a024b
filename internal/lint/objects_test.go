package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// objectReaders are the folders whose code reads the cell's objects
// (txn.Machine, txn.Task, txn.Job) the way a custom scheduler does: through
// their value fields and methods (txn/access.go), never through the
// protobuf wire form they keep in Meta, Spec and Status, and never by
// building one as a struct literal (txn.PlannedTask builds a task a
// decision creates). The store's heap can then be flattened under them
// (DESIGN.md "Schedulers"). The txn, store and client packages, which own
// the representation, are not held to it.
var objectReaders = []string{"schedulers", "agents", "jobs", "examples"}

func TestObjectsAreReadThroughTheirMethods(t *testing.T) {
	root := repoRoot(t)
	checked := 0
	for _, dir := range objectReaders {
		walkGo(t, root, dir, nil, func(rel string, src []byte) error {
			problems, err := checkObjectReads(rel, src)
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
		t.Fatal("no file checked")
	}
}

// checkObjectReads flags x.Meta.GetF(), x.Spec.GetF() and x.Status.GetF()
// (reading an object's wire form; a protobuf message's own chain is
// written x.GetSpec().GetF()), and txn.Task{...}, txn.Machine{...},
// txn.Job{...} literals.
func checkObjectReads(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			inner, ok := n.X.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(n.Sel.Name, "Get") {
				return true
			}
			switch inner.Sel.Name {
			case "Meta", "Spec", "Status":
				out = append(out, fmt.Sprintf("%s: .%s.%s reads an object's wire form: use the object's method (txn/access.go), or x.Get%s().%s on a protobuf message",
					fset.Position(n.Pos()), inner.Sel.Name, n.Sel.Name, inner.Sel.Name, n.Sel.Name))
			}
		case *ast.CompositeLit:
			if sel, ok := n.Type.(*ast.SelectorExpr); ok {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "txn" {
					switch sel.Sel.Name {
					case "Task", "Machine", "Job":
						out = append(out, fmt.Sprintf("%s: a txn.%s literal builds an object from its representation: use txn.PlannedTask, or the object the view gives", fset.Position(n.Pos()), sel.Sel.Name))
					}
				}
			}
		}
		return true
	})
	return out, nil
}

func TestCheckObjectReadsFindsViolations(t *testing.T) {
	src := `package p
func f(t *txn.Task, j *txn.Job, p *omegav1.Task) {
	_ = t.Spec.GetConstraints()
	_ = j.Meta.GetName()
	_ = j.Status.GetPhase()
	_ = &txn.Task{UID: u}
	_ = p.GetSpec().GetPriority() // a protobuf chain: fine
	_ = t.Constraints()           // the method: fine
}`
	problems, err := checkObjectReads("x.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 4 {
		t.Fatalf("%d problems, want 4:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
