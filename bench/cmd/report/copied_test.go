package main

import (
	"strings"
	"testing"
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

// The anchors' table is copied as the test logs it, its header and its
// rows, without the test's indentation; a line indented otherwise ends it.
func TestAnchorsTable(t *testing.T) {
	r := report{anchorsOut: anchorsFixture}
	want := "```\nscenario      default     throttle    finagle     envoy       grpc        aws\n" +
		"resets 20%, 100/s, 30 s     99.9% 1.24  99.9% 1.24  99.9% 1.24  93.7% 1.17  80.5% 1.00  99.9% 1.24\n" +
		"503 300 ms, 200 at once    100.0% 2.00   9.5% 1.10   0.0% 1.70   1.0% 1.20   0.0% 1.02   0.0% 1.50\n" +
		"overload 150/s, cap 100/s  73.5% 1.53  70.5% 1.38  66.8% 1.26  66.8% 1.00  66.8% 1.00  66.8% 1.22\n```\n"
	if got := r.anchors(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Output without the table (the test skipped, as it is without
// -faults.anchors, or not built), or with a header and no row, is not a
// table: the report says it is missing.
func TestAnchorsTableRefusesWhatIsNotOne(t *testing.T) {
	for name, out := range map[string]string{
		"skipped": "=== RUN   TestEverydayFaultsAnchors\n    faults_anchors_test.go:140: run with -faults.anchors\n" +
			"--- SKIP: TestEverydayFaultsAnchors (0.00s)\nPASS\n",
		"not built": "# github.com/retryhttp/retryhttp\n./x.go:1:1: syntax error\nFAIL\n",
		"no rows":   "        scenario      default     throttle\n--- PASS: TestEverydayFaultsAnchors (0.01s)\n",
		"":          "",
	} {
		r := report{anchorsOut: out}
		if got := r.anchors(); !strings.HasPrefix(got, "*Not in this report") {
			t.Errorf("%s: %s", name, got)
		}
	}
}

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

// The tables between chaos/README.md's markers are copied alone; without
// both markers, or without a table between them, the report says so.
func TestEverydayTables(t *testing.T) {
	r := report{everyday: chaosReadme}
	got := r.everydayTables()
	if !strings.HasPrefix(got, "**1. Resets**") || !strings.HasSuffix(got, "| retryhttp | 99.7 % | 1.31 |\n") ||
		strings.Contains(got, "prose") || strings.Contains(got, "<!--") {
		t.Errorf("not the tables alone:\n%s", got)
	}
	for name, text := range map[string]string{
		"no begin":  strings.Replace(chaosReadme, everydayBegin, "", 1),
		"no end":    strings.Replace(chaosReadme, everydayEnd, "", 1),
		"no tables": "a\n" + everydayBegin + "\n\n" + everydayEnd + "\n",
	} {
		r := report{everyday: text}
		if got := r.everydayTables(); !strings.HasPrefix(got, "*Not in this report") {
			t.Errorf("%s: %s", name, got)
		}
	}
}

// waitingFixture is bench/WAITING.md as cmd/waiting writes it, cut short.
const waitingFixture = `# A waiting request's memory

Measured: 2026-12-01 22:10 UTC, go1.26.8 linux/amd64, 2 CPUs. The readings ended
1.52 to 1.61 s after the start.

## Target

| target | figures | status |
|---|---|---|
| waiting request: directly | retryhttp 1 B: 0.99× | **met** |
| waiting request: http.Client | retryhttp-httpclient 2 B: 1.01× | **not met** |

## Results

| library | heap B/request |
|---|---:|
| retryhttp | 3,019 |

Prose that stays out.

## Configuration

| library | configuration |
|---|---|
| retryhttp | defaults |
`

// The report copies WAITING.md's target rows into its Targets table, and
// its results table with the line saying when it was measured.
func TestWaitingTables(t *testing.T) {
	r := report{waiting: waitingFixture}
	if got, want := r.waitingTargets(), "| waiting request: directly | retryhttp 1 B: 0.99× | **met** |\n"+
		"| waiting request: http.Client | retryhttp-httpclient 2 B: 1.01× | **not met** |\n"; got != want {
		t.Errorf("target rows\n%s\nwant\n%s", got, want)
	}
	if got, want := r.waitingResults(), "Measured: 2026-12-01 22:10 UTC, go1.26.8 linux/amd64, 2 CPUs. The readings ended\n1.52 to 1.61 s after the start.\n\n"+
		"| library | heap B/request |\n|---|---:|\n| retryhttp | 3,019 |\n"; got != want {
		t.Errorf("results\n%s\nwant\n%s", got, want)
	}
	r = report{waiting: "# A waiting request's memory\n\n## Target\n\nnothing yet\n"}
	if got := r.waitingTargets(); !strings.Contains(got, "not in this report") || !strings.HasSuffix(got, "| – |\n") {
		t.Errorf("no table: %q", got)
	}
}
