package retryhttp_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every ```go block of README.md is the code of an Example function in some
// *_test.go file of the repository (the core's, or a companion module's),
// so that it compiles, and an edit of either without the other fails here.
//
// A block matches when its lines, each stripped of its indentation and with
// its runs of spaces and tabs made one space, blank lines left out, are
// consecutive lines of an Example function's body (nested function literals
// included), normalized alike. One exception: a line of the block that is a
// comment beginning "// ..." (code left out of the README, such as
// "// ... exercise your client against srv.URL, then:") must appear too, but
// any number of lines of the example may follow it before the rest of the
// block.
func TestReadmeGoBlocksAreExamples(t *testing.T) {
	if _, err := os.Stat(filepath.Join("otelretry", "go.mod")); err != nil {
		// The core's module without its companions (as the module cache
		// holds it): the examples of some blocks are not here.
		t.Skip("not a checkout of the whole repository:", err)
	}
	blocks := readmeGoBlocks(t, "README.md")
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block: has the fence changed?")
	}
	examples := exampleBodies(t, ".")
	if len(examples) == 0 {
		t.Fatal("no Example function found in the repository's *_test.go files")
	}
	for _, b := range blocks {
		found := false
		for _, ex := range examples {
			if containsBlock(ex.lines, b.lines) {
				found = true
				t.Logf("README.md:%d: in %s", b.line, ex.name)
				break
			}
		}
		if !found {
			t.Errorf("README.md:%d: this ```go block is in no Example function of a *_test.go file;"+
				" change the example with the README (or add one that holds the block):\n%s",
				b.line, strings.Join(b.lines, "\n"))
		}
	}
}

type goBlock struct {
	line  int      // of the opening fence, from 1
	lines []string // normalized: see normalizeLines
}

// readmeGoBlocks returns the ```go blocks of the Markdown file at path.
func readmeGoBlocks(t *testing.T, path string) []goBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []goBlock
	var cur *goBlock
	var raw []string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		fence := strings.TrimSpace(line)
		switch {
		case cur == nil && fence == "```go":
			cur, raw = &goBlock{line: n}, nil
		case cur != nil && fence == "```":
			cur.lines = normalizeLines(raw)
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			raw = append(raw, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: a ```go block is never closed", path, cur.line)
	}
	return blocks
}

type example struct {
	name  string // file: function
	lines []string
}

// exampleBodies returns the body of every Example function in the *_test.go
// files under root, normalized. Directories whose name starts with "." or
// is testdata are skipped.
func exampleBodies(t *testing.T, root string) []example {
	t.Helper()
	var out []example
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Body == nil || !strings.HasPrefix(fd.Name.Name, "Example") {
				continue
			}
			from := fset.Position(fd.Body.Lbrace).Offset + 1
			to := fset.Position(fd.Body.Rbrace).Offset
			out = append(out, example{
				name:  path + ": " + fd.Name.Name,
				lines: normalizeLines(strings.Split(string(src[from:to]), "\n")),
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// normalizeLines strips each line of its indentation and trailing blanks,
// makes each run of spaces and tabs one space (gofmt aligns comments by
// their neighbours), and leaves blank lines out.
func normalizeLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// isElision reports whether a block's line stands for code the README
// leaves out.
func isElision(line string) bool { return strings.HasPrefix(line, "// ...") }

// containsBlock reports whether block's lines are consecutive lines of
// body, but for the elisions (see TestReadmeGoBlocksAreExamples).
func containsBlock(body, block []string) bool {
	for i := range body {
		if matchAt(body[i:], block) {
			return true
		}
	}
	return false
}

// matchAt reports whether block matches body from body's first line on.
func matchAt(body, block []string) bool {
	if len(block) == 0 {
		return true
	}
	if len(body) == 0 || body[0] != block[0] {
		return false
	}
	if !isElision(block[0]) {
		return matchAt(body[1:], block[1:])
	}
	for skip := 1; skip <= len(body); skip++ {
		if matchAt(body[skip:], block[1:]) {
			return true
		}
	}
	return false
}

// The matching itself: what matches, and what fails.
func TestReadmeBlockMatching(t *testing.T) {
	body := normalizeLines(strings.Split(`
	srv := start()
	defer srv.Close()
	// ... use srv, then:
	get(srv.URL)
	get(srv.URL)

	for _, r := range srv.Requests() {
		fmt.Println(r)
	}
	// Output: x
`, "\n"))
	for _, c := range []struct {
		block string
		want  bool
	}{
		{"srv := start()\ndefer srv.Close()", true},
		{"  srv   :=   start()\n\n\tdefer srv.Close()  ", true},
		{"defer srv.Close()\nsrv := start()", false},                        // out of order
		{"srv := start()\nget(srv.URL)", false},                             // not consecutive
		{"srv := start()\ndefer srv.Close()\nfor _, r := range x {", false}, // changed
		{"defer srv.Close()\n// ... use srv, then:\nfor _, r := range srv.Requests() {\nfmt.Println(r)\n}", true},
		{"// ... use srv, then:\nget(srv.URL)", true}, // an elision may stand for no line
		{"// ... something else\nfor _, r := range srv.Requests() {", false},
		{"fmt.Println(r)\n}\n// Output: y", false},
	} {
		if got := containsBlock(body, normalizeLines(strings.Split(c.block, "\n"))); got != c.want {
			t.Errorf("block %q: matched %v, want %v", c.block, got, c.want)
		}
	}
}
