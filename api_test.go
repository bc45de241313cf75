package retryhttp

import (
	"go/ast"
	"go/parser"
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

// The package exports at most 40 package-level names (types, functions,
// constants, variables; methods and fields aside): few enough to hold in
// one's head. .ci/apidiff checks each change against the last release.
func TestAtMost40Names(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	assert.LessOrEqual(t, len(names), 40, "%d names: %v", len(names), names)
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

// Every example the package doc names exists, and every example of the
// package's is named there: go doc users find them through it.
func TestPackageDocNamesTheExamples(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	named := regexp.MustCompile(`\bExample[A-Za-z_]*`).FindAllString(string(doc), -1)
	named = slices.DeleteFunc(named, func(s string) bool { return s == "Examples" })
	files, err := filepath.Glob("example*_test.go")
	require.NoError(t, err)
	var have []string
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && strings.HasPrefix(fn.Name.Name, "Example") {
				have = append(have, fn.Name.Name)
			}
		}
	}
	slices.Sort(named)
	slices.Sort(have)
	assert.Equal(t, slices.Compact(have), slices.Compact(named))
}
