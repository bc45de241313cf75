package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const waitingSample = `# A waiting request's memory

Intro.

## Target

| target | figures | status |
|---|---|---|
| heap and stack | 1.0x | **met** |

## Results

Each figure is a median.

| library | heap B/request |
|---|---:|
| retryhttp | 2,650 |
| handloop | 1,924 |

The times follow.

## Method
`

// The section copies WAITING.md's target and results tables, and says
// which command fills it when the file is missing or has no table.
func TestWaitingSectionCopiesTheTables(t *testing.T) {
	tabs, err := waitingTables(waitingSample)
	want := "| target | figures | status |\n|---|---|---|\n| heap and stack | 1.0x | **met** |\n\n" +
		"| library | heap B/request |\n|---|---:|\n| retryhttp | 2,650 |\n| handloop | 1,924 |"
	if err != nil || tabs != want {
		t.Fatalf("waitingTables: %v\n%s\nwant\n%s", err, tabs, want)
	}
	if _, err := waitingTables(strings.Replace(waitingSample, "## Results", "## Other", 1)); err == nil ||
		!strings.Contains(err.Error(), "no heading ## Results") {
		t.Errorf("no results heading: %v", err)
	}
	if _, err := waitingTables("# x\n\n## Target\n\nno table\n\n## Results\n"); err == nil {
		t.Error("no table: no error")
	}

	path := filepath.Join(t.TempDir(), "WAITING.md")
	if err := os.WriteFile(path, []byte(waitingSample), 0o644); err != nil {
		t.Fatal(err)
	}
	var r report
	r.waiting(path)
	if !strings.Contains(r.buf.String(), "| retryhttp | 2,650 |") {
		t.Errorf("the section lacks the results:\n%s", r.buf.String())
	}

	var missing report
	missing.waiting(filepath.Join(t.TempDir(), "none.md"))
	text := missing.buf.String()
	if !strings.Contains(strings.ReplaceAll(text, "\n", " "), waitingCmd) || strings.Contains(text, "| retryhttp") {
		t.Errorf("a missing file: the section should name %q and hold no table:\n%s", waitingCmd, text)
	}
}
