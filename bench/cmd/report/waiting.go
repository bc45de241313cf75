package main

import (
	"errors"
	"strings"
)

// waitingCmd writes bench/WAITING.md, whose tables the section on a waiting
// request copies.
const waitingCmd = "cd bench && go run ./cmd/waiting -runs 3 -md WAITING.md"

// waitingTables returns the tables under the headings "## Target" and
// "## Results" of text, bench/WAITING.md as cmd/waiting writes it.
func waitingTables(text string) (string, error) {
	var parts []string
	for _, heading := range []string{"## Target", "## Results"} {
		tab, err := tableUnder(text, heading)
		if err != nil {
			return "", err
		}
		parts = append(parts, tab)
	}
	return strings.Join(parts, "\n\n"), nil
}

// tableUnder returns the first Markdown table after the line heading.
func tableUnder(text, heading string) (string, error) {
	_, rest, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		return "", errors.New("no heading " + heading)
	}
	var rows []string
	for _, line := range strings.Split(rest, "\n") {
		switch {
		case strings.HasPrefix(line, "|"):
			rows = append(rows, line)
		case len(rows) > 0:
			return strings.Join(rows, "\n"), nil
		case strings.HasPrefix(line, "## "):
			return "", errors.New("no table under " + heading)
		}
	}
	if len(rows) < 3 {
		return "", errors.New("no table under " + heading)
	}
	return strings.Join(rows, "\n"), nil
}

// waiting writes the section on what a request waiting to be retried
// costs, from bench/WAITING.md (read from path): its target and its results.
func (r *report) waiting(path string) {
	r.p("## A waiting request: 10,000 GETs through a 2 s outage\n\n")
	r.prose(`What a request costs while it waits to be retried: 10,000 GETs start at once through one
client while the in-memory dependency answers 503 (with realistic bodies) for 2 s, then 200; 1.5 s
into the outage the live heap and the goroutine stacks are measured, per waiting request, and
then the time to serve them all after the recovery. Each library runs in a process of its own,
three runs, medians with the least and the most in brackets. bench/WAITING.md has each
library's configuration; these tables are copied from it.`)
	if tabs, err := readTables(path, waitingTables); err != nil {
		r.prose("Not in this report (%s: %v): `%s` writes bench/WAITING.md, and bench/run.sh "+
			"copies its tables (`-waiting WAITING.md`).", orNone(path), err, waitingCmd)
	} else {
		r.p("%s\n\n", tabs)
	}
}
