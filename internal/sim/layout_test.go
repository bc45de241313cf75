package sim

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The simulation is all test code, and stays as readable as the package
// it tests: no function over maxFuncLines lines (the root's layout_test.go
// holds the Transport's code to the same bound).
const maxFuncLines = 80

func TestLayoutKeepsFunctionsShort(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines (at most %d)", name, fd.Name.Name, n, maxFuncLines)
			}
		}
	}
}
