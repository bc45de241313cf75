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

	"github.com/stretchr/testify/require"
)

// The package stays readable as it grows: no function over maxFuncLines
// lines unless its doc comment says why (a line starting "Long:"). Files
// are cut by what they hold, not by length. Tests are not held to it.
const maxFuncLines = 80

var longWhy = regexp.MustCompile(`(?m)^Long: `)

func TestLayoutKeepsFunctionsShort(t *testing.T) {
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

// The companion modules and the examples use the core through its public
// API alone: a user can copy an example, and a companion released on its
// own cannot depend on another module's internals. Their tests may share
// the core's test helpers (internal/testutil).
func TestCompanionsAndExamplesUseThePublicAPI(t *testing.T) {
	const internal = `"github.com/retryhttp/retryhttp/internal/`
	for _, dir := range []string{"bench", "chaos", "examples", "h3retry", "otelretry", "sdk"} {
		require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				if strings.HasPrefix(imp.Path.Value, internal) {
					t.Errorf("%s imports %s: companions and examples use the public API", path, imp.Path.Value)
				}
			}
			return nil
		}))
	}
}
