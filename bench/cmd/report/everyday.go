package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// The section on the everyday faults takes its tables from two
// places, neither measured by bench/run.sh's other steps: the chaos
// module's README (real faults on loopback, through retryhttp and the peers,
// written there by TestEverydayRealFaults -update) and the output of the
// root module's TestEverydayFaultsAnchors (the fake-time scenarios through
// other libraries' budgets), which bench/run.sh saves.

// The markers between which chaos/README.md holds the tables of
// TestEverydayRealFaults (chaos/everyday_test.go writes them).
const (
	everydayBegin = "<!-- TestEverydayRealFaults tables: begin -->"
	everydayEnd   = "<!-- TestEverydayRealFaults tables: end -->"
)

// The commands that fill the section's two parts.
const (
	everydayCmd = "cd chaos && go test -run TestEverydayRealFaults -count=1 -update"
	anchorsCmd  = "go test -count=1 -run '^TestEverydayFaultsAnchors$' -faults.anchors -v . >bench/results/anchors.txt"
)

// everydayTables returns what lies between the markers of readme, the text
// of chaos/README.md, without the blank lines around it.
func everydayTables(readme string) (string, error) {
	_, rest, ok := strings.Cut(readme, everydayBegin)
	if !ok {
		return "", errors.New("no TestEverydayRealFaults tables: no begin marker")
	}
	tables, _, ok := strings.Cut(rest, everydayEnd)
	if !ok {
		return "", errors.New("no TestEverydayRealFaults tables: no end marker")
	}
	tables = strings.TrimSpace(tables)
	if !strings.Contains(tables, "\n|---") {
		return "", errors.New("no table between the markers")
	}
	return tables, nil
}

// The columns of TestEverydayFaultsAnchors as its output names them, and as
// the table names them.
var anchorNames = map[string]string{
	"default": "default", "throttle": "throttle",
	"finagle": "Finagle", "envoy": "Envoy", "grpc": "gRPC", "aws": "AWS SDK",
}

// anchorsHead starts the header line of TestEverydayFaultsAnchors' table.
const anchorsHead = "scenario"

// An anchors row is a scenario's name, then for each column its share
// served ("99.9%") and its attempts per request ("1.24").
var (
	anchorsRow  = regexp.MustCompile(`^(.*?\S)((?:\s+\d+(?:\.\d+)?%\s+\d+(?:\.\d+)?)+)\s*$`)
	anchorsCell = regexp.MustCompile(`(\d+(?:\.\d+)?)%\s+(\d+(?:\.\d+)?)`)
)

// anchorsTable returns as a Markdown table the table that
// TestEverydayFaultsAnchors logs (out is go test -v's output): a header
// line "scenario" and the columns' names, then a line per
// scenario, its name and "served% attempts" per column. The cells read
// "99.9 %, 1.24", as in README.md's "Everyday faults".
func anchorsTable(out string) (string, error) {
	lines := strings.Split(out, "\n")
	h := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), anchorsHead) {
			h = i
			break
		}
	}
	if h < 0 {
		return "", fmt.Errorf("no line starting %q", anchorsHead)
	}
	cols := strings.Fields(strings.TrimPrefix(strings.TrimSpace(lines[h]), anchorsHead))
	if len(cols) == 0 {
		return "", errors.New("no columns in the header line")
	}
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, c := range cols {
		if n, ok := anchorNames[c]; ok {
			c = n
		}
		b.WriteString(" " + c + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(cols)) + "\n")
	rows := 0
	for _, l := range lines[h+1:] {
		m := anchorsRow.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			break
		}
		cells := anchorsCell.FindAllStringSubmatch(m[2], -1)
		if len(cells) != len(cols) {
			return "", fmt.Errorf("%q: %d cells for %d columns", strings.TrimSpace(l), len(cells), len(cols))
		}
		b.WriteString("| " + m[1] + " |")
		for _, c := range cells {
			b.WriteString(fmt.Sprintf(" %s %%, %s |", c[1], c[2]))
		}
		b.WriteString("\n")
		rows++
	}
	if rows == 0 {
		return "", errors.New("no row under the header line")
	}
	return b.String(), nil
}

// readTables reads path and makes tables of it with parse; it returns ""
// and why when path is empty, unreadable or holds no table.
func readTables(path string, parse func(string) (string, error)) (string, error) {
	if path == "" {
		return "", errors.New("not given")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return parse(string(b))
}

// everyday writes the section on the everyday faults: the tables of
// chaos/README.md read from readmePath, and the anchors' table made of
// the output saved in anchorsPath. A part whose input is missing says so,
// and which command fills it.
func (r *report) everyday(readmePath, anchorsPath string) {
	r.p("## Everyday faults: real faults, and other libraries' budgets\n\n")
	r.prose(`Everyday faults, two ways: real faults on loopback through retryhttp and the
peers above, and the core's fake-time scenarios (README.md's "Everyday faults") through the
retry budgets that other systems ship.`)

	r.p("### Real faults on loopback\n\n")
	r.prose(`The chaos module's TestEverydayRealFaults (chaos/README.md, "Everyday faults against the
peers") runs four faults in real time on 127.0.0.1: toxiproxy's reset_peer, a backend restarted
behind a reverse proxy, an HTTP/2 server resetting its connections, and 429 bursts. Through each
go the bare transport, retryhttp's default Transport (its zero Policy but for idempotency keys
where POSTs are sent, and its default budget), the same with ` + "`UnlimitedBudget()`" + `, and
go-retryablehttp, failsafe-go and rehttp configured as in "How each library was configured"
below (4 attempts, backoff from 100 ms; go-retryablehttp through its RoundTripper adapter).
Every call has a 10 s deadline; "attempts per call" counts what reached the transport beneath
each library. These figures are in real time, so they vary a little from run to run; they are
copied from chaos/README.md, which bench/run.sh does not rewrite.`)
	if tabs, err := readTables(readmePath, everydayTables); err != nil {
		r.prose("Not in this report (%s: %v): `%s` writes these tables into chaos/README.md, and bench/run.sh "+
			"copies them from there (`-everyday ../chaos/README.md`).", orNone(readmePath), err, everydayCmd)
	} else {
		r.p("%s\n\n", tabs)
	}

	r.p("### Other libraries' budgets\n\n")
	r.prose(`The core module's fake-time scenarios (testing/synctest, an in-memory dependency
answering in 10 ms; README.md's "Everyday faults" describes them) through the default Transport,
the same with ` + "`Policy.Throttle`" + ` on, and four retry budgets that others ship, each modelled as
a ` + "`Policy.Retryable`" + ` over ` + "`UnlimitedBudget()`" + ` that vetoes the retries it would refuse
(faults_anchors_test.go says how): Finagle's RetryBudget (retries in any 10 s up to 20 %% of the
requests plus 10 a second), Envoy's retry budget (retries in flight at most 20 %% of the attempts
in flight, and at least 3), gRPC's retry throttling (10 tokens, a failure takes 1, a success gives
back 0.1, retries while more than 5 are left) and the AWS SDK's retry quota (500 tokens, a retry
costs 5, or 10 after a timeout, refunded if it succeeds, and a success at the first attempt gives
back 1). Each cell is the share of requests served and the attempts per
request. bench/run.sh runs the test at the repository root and saves its output in
bench/results/anchors.txt.`)
	if tab, err := readTables(anchorsPath, anchorsTable); err != nil {
		r.prose("Not in this report (%s: %v): at the repository root, `%s` fills it "+
			"(bench/run.sh runs it, and passes the file with `-anchors`).", orNone(anchorsPath), err, anchorsCmd)
	} else {
		r.p("%s\n", tab)
	}
}

// orNone returns path, or "no file" when it is empty.
func orNone(path string) string {
	if path == "" {
		return "no file"
	}
	return path
}
