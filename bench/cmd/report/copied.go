package main

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The parts of the report copied from files the other commands write:
// bench/WAITING.md (cmd/waiting), chaos/README.md's tables of real faults
// (TestEverydayRealFaults -update), the output of the core's
// TestEverydayFaultsAnchors, and bench/FLEET.txt (examples/herd).

// tableUnder returns the first Markdown table after the line heading.
func tableUnder(text, heading string) (string, error) {
	_, rest, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		return "", errors.New("no heading " + heading)
	}
	var rows []string
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "|") {
			rows = append(rows, line)
		} else if len(rows) > 0 || strings.HasPrefix(line, "#") {
			break
		}
	}
	if len(rows) < 3 {
		return "", errors.New("no table under " + heading)
	}
	return strings.Join(rows, "\n") + "\n", nil
}

// waitingTargets returns the rows of WAITING.md's target table, for the
// Targets table, or a row saying it is missing.
func (r *report) waitingTargets() string {
	tab, err := tableUnder(r.waiting, "## Target")
	if err != nil {
		return "| waiting request: heap + stack at most go-retryablehttp's | not in this report: bench/WAITING.md has no target table (cmd/waiting writes it) | – |\n"
	}
	_, rows, _ := strings.Cut(strings.SplitN(tab, "\n", 2)[1], "\n")
	return rows
}

// waitingResults returns WAITING.md's results table and the paragraph
// saying when it was measured.
func (r *report) waitingResults() string {
	tab, err := tableUnder(r.waiting, "## Results")
	if err != nil {
		return "*Not in this report: bench/WAITING.md has no results table (cmd/waiting writes it).*\n"
	}
	if measured := regexp.MustCompile(`(?m)^Measured: .*(\n.+)*`).FindString(r.waiting); measured != "" {
		return measured + "\n\n" + tab
	}
	return tab
}

// The markers between which chaos/README.md holds the tables of
// TestEverydayRealFaults.
const (
	everydayBegin = "<!-- TestEverydayRealFaults tables: begin -->"
	everydayEnd   = "<!-- TestEverydayRealFaults tables: end -->"
)

// everydayTables returns what lies between the markers of chaos/README.md.
func (r *report) everydayTables() string {
	_, rest, ok1 := strings.Cut(r.everyday, everydayBegin)
	tables, _, ok2 := strings.Cut(rest, everydayEnd)
	if !ok1 || !ok2 || !strings.Contains(tables, "\n|---") {
		return "*Not in this report: no tables between the markers of chaos/README.md.*\n"
	}
	return strings.TrimSpace(tables) + "\n"
}

// The columns of TestEverydayFaultsAnchors' table as it names them, and as
// README.md does.
var anchorNames = map[string]string{"finagle": "Finagle", "envoy": "Envoy", "grpc": "gRPC", "aws": "AWS SDK"}

// An anchors row is a scenario's name, then for each column its share
// served ("99.9%") and its attempts per request ("1.24").
var (
	anchorsRow  = regexp.MustCompile(`^(.*?\S)((?:\s+\d+(?:\.\d+)?%\s+\d+(?:\.\d+)?)+)\s*$`)
	anchorsCell = regexp.MustCompile(`(\d+(?:\.\d+)?)%\s+(\d+(?:\.\d+)?)`)
)

// anchorsTable returns as Markdown the table TestEverydayFaultsAnchors
// logs (out is go test -v's output): a header line "scenario" and the
// columns' names, then a line per scenario with "served% attempts" per
// column, until the first line that is not one.
func anchorsTable(out string) (string, error) {
	lines := strings.Split(out, "\n")
	h := 0
	for h < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[h]), "scenario ") {
		h++
	}
	if h == len(lines) {
		return "", errors.New(`no line starting "scenario"`)
	}
	cols := strings.Fields(lines[h])[1:]
	var b strings.Builder
	b.WriteString("| scenario |")
	for _, c := range cols {
		b.WriteString(" " + cmp.Or(anchorNames[c], c) + " |")
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
			fmt.Fprintf(&b, " %s %%, %s |", c[1], c[2])
		}
		b.WriteString("\n")
		rows++
	}
	if rows == 0 {
		return "", errors.New("no row under the header line")
	}
	return b.String(), nil
}

// anchors returns the anchors' table, or a line saying why it is missing.
func (r *report) anchors() string {
	tab, err := anchorsTable(r.anchorsOut)
	if err != nil {
		return fmt.Sprintf("*Not in this report (bench/results/anchors.txt: %v): bash bench/run.sh runs the test.*\n", err)
	}
	return tab
}
