// Command calltrace counts the calls a request makes through retryhttp: it
// copies the core module to a temporary directory, adds a trace call at the
// start of every function of the root package and of internal/ (not of
// tests), runs the test TestCallTrace there (testdata/calltrace_test.go:
// a GET answered 503 then 200 over an in-memory base), and prints the
// functions entered, the files they are in, and how often the innermost
// function of the package changes file (on a call or a return).
//
//	go run ./.ci/calltrace            # from the repository's root
//	go run ./.ci/calltrace -v         # with the sequence of calls
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

const module = "github.com/retryhttp/retryhttp"

func main() {
	verbose := flag.Bool("v", false, "print the sequence of calls")
	flag.Parse()
	tmp, err := os.MkdirTemp("", "calltrace")
	check(err)
	defer os.RemoveAll(tmp)
	check(copyCore(".", tmp))
	check(instrument(tmp))
	test, err := os.ReadFile(filepath.Join(".ci", "calltrace", "testdata", "calltrace_test.go"))
	check(err)
	check(os.WriteFile(filepath.Join(tmp, "calltrace_test.go"), test, 0o644))
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestCallTrace$", "-v", ".")
	cmd.Dir, cmd.Stdout, cmd.Stderr = tmp, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "GOWORK=off", "CALLTRACE_VERBOSE="+strconv.FormatBool(*verbose))
	check(cmd.Run())
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "calltrace:", err)
		os.Exit(1)
	}
}

// copyCore copies the core module's files (the root package, internal/ and
// retryhttptest/, go.mod and go.sum) from src to dst.
func copyCore(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if rel == "." || rel == "internal" || strings.HasPrefix(rel, "internal"+string(filepath.Separator)) || rel == "retryhttptest" {
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") && rel != "go.mod" && rel != "go.sum" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}

// instrument adds the trace package to dst, and a call of it at the start
// of every function of the root package and of internal/, test files aside.
func instrument(dst string) error {
	if err := os.MkdirAll(filepath.Join(dst, "internal", "calltrace"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dst, "internal", "calltrace", "trace.go"), []byte(tracePkg), 0o644); err != nil {
		return err
	}
	return filepath.WalkDir(dst, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(dst, path)
		if strings.HasPrefix(rel, "retryhttptest") || strings.Contains(rel, "calltrace") {
			return nil
		}
		return instrumentFile(path, rel)
	})
}

func instrumentFile(path, rel string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
	if err != nil {
		return err
	}
	n := 0
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) > 0 {
			name = recvName(fd.Recv.List[0].Type) + "." + name
		}
		call := &ast.DeferStmt{Call: &ast.CallExpr{Fun: &ast.CallExpr{
			Fun:  &ast.SelectorExpr{X: ast.NewIdent("calltrace"), Sel: ast.NewIdent("Enter")},
			Args: []ast.Expr{&ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(filepath.ToSlash(rel))}, &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(name)}},
		}}}
		fd.Body.List = append([]ast.Stmt{call}, fd.Body.List...)
		n++
	}
	if n == 0 {
		return nil
	}
	imp := &ast.ImportSpec{Path: &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(module + "/internal/calltrace")}}
	f.Decls = append([]ast.Decl{&ast.GenDecl{Tok: token.IMPORT, Specs: []ast.Spec{imp}}}, f.Decls...)
	f.Imports = append(f.Imports, imp)
	var buf bytes.Buffer
	if err := printer.Fprint(&buf, fset, f); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// tracePkg records the calls of one goroutine, the one that calls Start.
const tracePkg = `// Package calltrace records calls, for .ci/calltrace.
package calltrace

import (
	"bytes"
	"runtime"
	"sync"
)

// An Event is a function entered (Return false) or left.
type Event struct {
	File, Func string
	Return     bool
}

var (
	mu     sync.Mutex
	on     bool
	gid    string
	events []Event
)

func goid() string {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n])
	if len(f) < 2 {
		return ""
	}
	return string(f[1])
}

// Start starts recording the calling goroutine's calls.
func Start() {
	mu.Lock()
	defer mu.Unlock()
	on, gid, events = true, goid(), nil
}

// Stop stops recording and returns what was recorded.
func Stop() []Event {
	mu.Lock()
	defer mu.Unlock()
	on = false
	return events
}

// Enter records the entry of a function, and returns what records its return.
func Enter(file, fn string) func() {
	mu.Lock()
	rec := on
	mu.Unlock()
	if !rec || goid() != gid {
		return func() {}
	}
	mu.Lock()
	events = append(events, Event{File: file, Func: fn})
	mu.Unlock()
	return func() {
		mu.Lock()
		events = append(events, Event{File: file, Func: fn, Return: true})
		mu.Unlock()
	}
}
`
