package retryhttp

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The package's exported API is the list in API.md: every exported
// declaration (a const, var, func, type, method, struct field or interface
// method, with its type or signature) appears there in a code span, and
// every declaration there exists. A change to the API is thus an edit of
// that list, made on purpose, with its reason beside it.
func TestTheAPIIsTheList(t *testing.T) {
	got := exportedAPI(t, ".")
	doc, err := os.ReadFile("API.md")
	require.NoError(t, err)
	var listed []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)`").FindAllStringSubmatch(string(doc), -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	for _, d := range got {
		assert.Contains(t, listed, d, "exported but not in API.md (add it, with why it is public)")
	}
	for _, d := range listed {
		assert.Contains(t, got, d, "in API.md but not exported (remove it from the list)")
	}
	if t.Failed() {
		t.Logf("the exported declarations:\n%s", strings.Join(got, "\n"))
	}
}

// exportedAPI returns the exported declarations of the package in dir,
// test files aside, one per line, sorted: "const Name Type" (or "const
// Name" when untyped), "var Name Type", "func Name(...) ...", "func (T)
// Name(...) ...", "type Name kind", "T.Field Type", "T.Method(...) ...".
func exportedAPI(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []*ast.File // the package's files: none has build constraints
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
			require.NoError(t, err)
			files = append(files, f)
		}
	}
	src := func(n ast.Node) string {
		var b bytes.Buffer
		require.NoError(t, printer.Fprint(&b, fset, n))
		return strings.Join(strings.Fields(b.String()), " ")
	}
	// sig writes a func type with its parameters' types only: their names
	// are not part of the API.
	sig := func(ft *ast.FuncType) string {
		list := func(fl *ast.FieldList) []string {
			var ts []string
			if fl == nil {
				return nil
			}
			for _, f := range fl.List {
				for range max(len(f.Names), 1) {
					ts = append(ts, src(f.Type))
				}
			}
			return ts
		}
		s := "(" + strings.Join(list(ft.Params), ", ") + ")"
		switch res := list(ft.Results); len(res) {
		case 0:
		case 1:
			s += " " + res[0]
		default:
			s += " (" + strings.Join(res, ", ") + ")"
		}
		return s
	}
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				sig := sig(d.Type)
				if d.Recv == nil {
					out = append(out, "func "+d.Name.Name+sig)
					continue
				}
				recv := d.Recv.List[0].Type
				name := strings.TrimPrefix(src(recv), "*")
				if ast.IsExported(name) {
					out = append(out, "func ("+src(recv)+") "+d.Name.Name+sig)
				}
			case *ast.GenDecl:
				var typ ast.Expr // a const's type, carried down its block
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						switch ts := s.Type.(type) {
						case *ast.StructType:
							out = append(out, "type "+s.Name.Name+" struct")
							for _, fl := range ts.Fields.List {
								for _, n := range fl.Names {
									if n.IsExported() {
										out = append(out, s.Name.Name+"."+n.Name+" "+src(fl.Type))
									}
								}
							}
						case *ast.InterfaceType:
							out = append(out, "type "+s.Name.Name+" interface")
							for _, m := range ts.Methods.List {
								for _, n := range m.Names {
									out = append(out, s.Name.Name+"."+n.Name+sig(m.Type.(*ast.FuncType)))
								}
							}
						case *ast.FuncType:
							out = append(out, "type "+s.Name.Name+" func"+sig(ts))
						default:
							out = append(out, "type "+s.Name.Name+" "+src(s.Type))
						}
					case *ast.ValueSpec:
						if d.Tok == token.CONST && (s.Type != nil || len(s.Values) > 0) {
							typ = s.Type
						}
						for _, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							decl := d.Tok.String() + " " + n.Name
							if d.Tok == token.CONST && typ != nil {
								decl += " " + src(typ)
							}
							if d.Tok == token.VAR && s.Type != nil {
								decl += " " + src(s.Type)
							}
							out = append(out, decl)
						}
					}
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// go doc -all fits 100 columns (a tab taken as 8), for the core package and
// retryhttptest: what a reader sees in a terminal.
func TestGoDocFits100Columns(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for _, pkg := range []string{".", "./retryhttptest"} {
		out, err := exec.Command(goTool, "doc", "-all", pkg).CombinedOutput()
		require.NoError(t, err, "%s", out)
		for i, line := range strings.Split(string(out), "\n") {
			var col int
			for _, r := range line {
				if r == '\t' {
					col += 8 - col%8
				} else {
					col++
				}
			}
			assert.LessOrEqual(t, col, 100, "%s: go doc line %d: %q", pkg, i+1, line)
		}
	}
}
