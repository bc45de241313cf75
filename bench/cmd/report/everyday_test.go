package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// anchorsFixture is what go test -run TestEverydayFaultsAnchors
// -faults.anchors -v prints at the repository root, with three of its
// rows (the last one's name fills its 28 columns).
const anchorsFixture = `=== RUN   TestEverydayFaultsAnchors
    faults_anchors_test.go:176: served and attempts per request, fake time:
        scenario      default     throttle    finagle     envoy       grpc        aws
        resets 20%, 100/s, 30 s     99.9% 1.24  99.9% 1.24  99.9% 1.24  93.7% 1.17  80.5% 1.00  99.9% 1.24
        503 300 ms, 200 at once    100.0% 2.00   9.5% 1.10   0.0% 1.70   1.0% 1.20   0.0% 1.02   0.0% 1.50
        overload 150/s, cap 100/s  73.5% 1.53  70.5% 1.38  66.8% 1.26  66.8% 1.00  66.8% 1.00  66.8% 1.22
--- PASS: TestEverydayFaultsAnchors (5.19s)
PASS
ok  	github.com/retryhttp/retryhttp	5.198s
`

const anchorsWant = `| scenario | default | throttle | Finagle | Envoy | gRPC | AWS SDK |
|---|---:|---:|---:|---:|---:|---:|
| resets 20%, 100/s, 30 s | 99.9 %, 1.24 | 99.9 %, 1.24 | 99.9 %, 1.24 | 93.7 %, 1.17 | 80.5 %, 1.00 | 99.9 %, 1.24 |
| 503 300 ms, 200 at once | 100.0 %, 2.00 | 9.5 %, 1.10 | 0.0 %, 1.70 | 1.0 %, 1.20 | 0.0 %, 1.02 | 0.0 %, 1.50 |
| overload 150/s, cap 100/s | 73.5 %, 1.53 | 70.5 %, 1.38 | 66.8 %, 1.26 | 66.8 %, 1.00 | 66.8 %, 1.00 | 66.8 %, 1.22 |
`

// The anchors' table is made of the lines the test logs: the columns of
// its header line, named as README.md names them, and a row per scenario
// until the first line that is not one.
func TestAnchorsTable(t *testing.T) {
	got, err := anchorsTable(anchorsFixture)
	if err != nil {
		t.Fatal(err)
	}
	if got != anchorsWant {
		t.Errorf("got\n%s\nwant\n%s", got, anchorsWant)
	}
}

// Output without the table (the test skipped, as it is without
// -faults.anchors, or not built), or with a row that lacks a cell, is an
// error, not a table.
func TestAnchorsTableRefusesWhatIsNotOne(t *testing.T) {
	for name, out := range map[string]string{
		"skipped": "=== RUN   TestEverydayFaultsAnchors\n    faults_anchors_test.go:140: run with -faults.anchors\n" +
			"--- SKIP: TestEverydayFaultsAnchors (0.00s)\nPASS\n",
		"not built": "# github.com/retryhttp/retryhttp\n./x.go:1:1: syntax error\nFAIL\n",
		"no rows":   "        scenario      default     throttle\n--- PASS: TestEverydayFaultsAnchors (0.01s)\n",
		"a cell short": "        scenario      default     throttle\n" +
			"        1 resets 20%, 100/s, 30 s     99.9% 1.24\n",
		"": "",
	} {
		if tab, err := anchorsTable(out); err == nil {
			t.Errorf("%s: no error, and the table\n%s", name, tab)
		}
	}
}

// chaosReadme is a chaos/README.md with the tables between their markers.
const chaosReadme = `# chaos

## Everyday faults against the peers

Prose that stays out.

<!-- TestEverydayRealFaults tables: begin -->
**1. Resets**: toxiproxy ` + "`reset_peer`" + ` on 20 % of the attempts

| client | served | attempts per call |
|---|---:|---:|
| bare net/http | 76.7 % | 1.00 |
| retryhttp | 99.7 % | 1.31 |
<!-- TestEverydayRealFaults tables: end -->

More prose that stays out.
`

// What lies between chaos/README.md's markers is copied as it is; without
// both markers, or without a table between them, there is nothing to copy.
func TestEverydayTables(t *testing.T) {
	got, err := everydayTables(chaosReadme)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "**1. Resets**") || !strings.HasSuffix(got, "| retryhttp | 99.7 % | 1.31 |") ||
		strings.Contains(got, "prose") || strings.Contains(got, "<!--") {
		t.Errorf("not the tables alone:\n%s", got)
	}
	for name, text := range map[string]string{
		"no begin":  strings.Replace(chaosReadme, everydayBegin, "", 1),
		"no end":    strings.Replace(chaosReadme, everydayEnd, "", 1),
		"no tables": "a\n" + everydayBegin + "\n\n" + everydayEnd + "\n",
	} {
		if tab, err := everydayTables(text); err == nil {
			t.Errorf("%s: no error, and\n%s", name, tab)
		}
	}
}

// The section embeds both inputs when they are there, and says which
// command fills each one that is not; its prose keeps to 100 columns.
func TestEverydaySection(t *testing.T) {
	dir := t.TempDir()
	readme, anchors := filepath.Join(dir, "README.md"), filepath.Join(dir, "anchors.txt")
	if err := os.WriteFile(readme, []byte(chaosReadme), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(anchors, []byte(anchorsFixture), 0o644); err != nil {
		t.Fatal(err)
	}

	var r report
	r.everyday(readme, anchors)
	got := r.buf.String()
	tabs, _ := everydayTables(chaosReadme)
	for _, want := range []string{"## Everyday faults: real faults, and other libraries' budgets\n", tabs, anchorsWant} {
		if !strings.Contains(got, want) {
			t.Errorf("the section lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, "Not in this report") || strings.Contains(got, "%!") {
		t.Errorf("a missing input, or a bad format, with both inputs there:\n%s", got)
	}
	checkProse(t, got)

	for _, missing := range []struct{ readme, anchors, want string }{
		{filepath.Join(dir, "nothing.md"), anchors, everydayCmd},
		{"", anchors, everydayCmd},
		{readme, filepath.Join(dir, "nothing.txt"), "TestEverydayFaultsAnchors"},
		{readme, "", "-faults.anchors -v ."},
	} {
		var r report
		r.everyday(missing.readme, missing.anchors)
		got := r.buf.String()
		flat := strings.Join(strings.Fields(got), " ")
		if strings.Count(got, "Not in this report") != 1 || !strings.Contains(flat, missing.want) {
			t.Errorf("inputs %q, %q: want one part not in the report, filled by %q:\n%s",
				missing.readme, missing.anchors, missing.want, got)
		}
		checkProse(t, got)
	}
}

// checkProse fails t for a line of prose (not a table's) over 100 columns.
func checkProse(t *testing.T, s string) {
	t.Helper()
	for _, l := range strings.Split(s, "\n") {
		if n := utf8.RuneCountInString(l); n > 100 && !strings.HasPrefix(l, "|") {
			t.Errorf("a line of %d columns: %s", n, l)
		}
	}
}
