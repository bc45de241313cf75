package main

import (
	"errors"
	"regexp"
	"slices"
	"strings"
)

// The parts of the report copied from files the other commands write:
// bench/WAITING.md (cmd/waiting), chaos/README.md's tables of real faults
// (TestEverydayRealFaults -update), the output of the core's
// TestEverydayFaultsAnchors, and bench/FLEET.txt (internal/herd).

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

// anchors returns the table TestEverydayFaultsAnchors logs (in go test -v's
// output), as a block of code: from its header line, "scenario" and the
// columns' names, through the lines indented as it is; or a line saying
// why it is missing.
func (r *report) anchors() string {
	lines := strings.Split(r.anchorsOut, "\n")
	h := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "scenario ") })
	if h < 0 {
		return "*Not in this report: no table in bench/results/anchors.txt (bash bench/run.sh runs the test).*\n"
	}
	indent := lines[h][:len(lines[h])-len(strings.TrimLeft(lines[h], " \t"))]
	var rows []string
	for _, l := range lines[h:] {
		if !strings.HasPrefix(l, indent) || strings.TrimSpace(l) == "" || l[len(indent)] == ' ' {
			break
		}
		rows = append(rows, l[len(indent):])
	}
	if len(rows) < 2 {
		return "*Not in this report: no rows under the table's header in bench/results/anchors.txt.*\n"
	}
	return "```\n" + strings.Join(rows, "\n") + "\n```\n"
}
