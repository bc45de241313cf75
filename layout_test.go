package retryhttp

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The package stays readable as it grows: no source file over maxFileLines
// lines, and no function over maxFuncLines unless its doc comment says why
// (a line starting "Long:"). Tests are not held to it.
const (
	maxFileLines = 400
	maxFuncLines = 80
)

var longWhy = regexp.MustCompile(`(?m)^Long: `)

func TestLayoutKeepsFilesAndFunctionsShort(t *testing.T) {
	var dirs []string
	require.NoError(t, filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "." || strings.HasPrefix(path, "internal")) {
			dirs = append(dirs, path)
		}
		return nil
	}))
	fset := token.NewFileSet()
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			require.NoError(t, err)
			lines := fset.File(f.Pos()).LineCount()
			assert.LessOrEqual(t, lines, maxFileLines, "%s: lines", name)
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				if n > maxFuncLines && !longWhy.MatchString(fd.Doc.Text()) {
					t.Errorf("%s: %s is %d lines (at most %d, or a doc line \"Long: why\")", name, fd.Name.Name, n, maxFuncLines)
				}
			}
		}
	}
}
