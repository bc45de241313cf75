package main

import (
	"fmt"
	"strings"
)

// The libraries of the measured paths, in the order of their tables.
// bare-again, the loopback paths' second bare case, is the harness's own
// error there.
var perfLibs = []string{"retryhttp", "bare", "bare-again", "retryablehttp", "retryablehttp-client", "failsafe-go", "rehttp"}

// The libraries of the scenarios, in the order of their tables.
var scenarioLibs = []string{"retryhttp", "bare", "retryhttp-nobudget", "retryhttp-throttle", "retryablehttp",
	"failsafe-go", "failsafe-go-budget", "failsafe-go-breaker", "rehttp"}

// The units cmd/measure writes.
const (
	cpuUnit    = "cpu-ns/op"
	wallUnit   = "ns/op"
	bytesUnit  = "B/op"
	allocsUnit = "allocs/op"
)

// The numbers of callers of the loopback paths (bench.LoopbackPath).
var loopbackCallers = []int{1, 16, 64}

func loopbackPath(proto string, callers int) string {
	return fmt.Sprintf("Loopback/proto=%s/callers=%d", proto, callers)
}

// pathTable writes the table of an in-memory path: per library, the median
// CPU time per operation with its middle half, its per-round ratios to bare
// and to retryhttp, and the bytes and allocations per operation.
func (r *report) pathTable(path string) string {
	var b strings.Builder
	b.WriteString("| library | CPU time/op | middle half | CPU ÷ bare | CPU ÷ retryhttp | B/op | allocs/op |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, lib := range perfLibs {
		s, m := summarize(r.paths[path][lib][cpuUnit]), r.paths.median
		if s.n == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", lib, nanos(s.median), span(nanos, s.q1, s.q3),
			ratioCell(r.paths.ratios(path, lib, "bare", cpuUnit)), ratioCell(r.paths.ratios(path, lib, "retryhttp", cpuUnit)),
			bytesNum(m(path, lib, bytesUnit)), count(m(path, lib, allocsUnit)))
	}
	return orMissing(b.String(), path, "results/samples.txt")
}

// loopbackTable writes the table of the loopback paths of proto: per number
// of callers and library, the CPU time per request (the whole process's)
// with its middle half and its per-round ratio to bare, the requests per
// second (wall-clock) and their ratio to bare, and the allocations.
func (r *report) loopbackTable(proto string) string {
	var b strings.Builder
	b.WriteString("| callers | library | CPU time/req | middle half | CPU ÷ bare | req/s | req/s ÷ bare | allocs/req |\n|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range loopbackCallers {
		path := loopbackPath(proto, n)
		for _, lib := range perfLibs {
			s := summarize(r.paths[path][lib][cpuUnit])
			if s.n == 0 {
				continue
			}
			// req/s ÷ bare, round by round, is bare's time per request
			// over the library's.
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %.0f | %s | %s |\n", n, lib, nanos(s.median), span(nanos, s.q1, s.q3),
				ratioCell(r.paths.ratios(path, lib, "bare", cpuUnit)), 1e9/r.paths.median(path, lib, wallUnit),
				ratioCell(r.paths.ratios(path, "bare", lib, wallUnit)), count(r.paths.median(path, lib, allocsUnit)))
		}
	}
	return orMissing(b.String(), "Loopback/proto="+proto, "results/samples.txt")
}

// A column of a scenario's table: a unit, its title and its format.
type column struct {
	unit, title string
	format      func(float64) string
}

// The columns of each scenario's table (the units the scenario tests write).
var scenarioCols = map[string][]column{
	"Storm": stormCols,
	"Fleet": stormCols,
	"Blip": {
		{"max-attempts", "attempts at most", count},
		{"success-%", "callers served", percent},
		{"attempts/caller", "attempts per caller", fixed(2)},
		{"peak/10ms", "peak per 10 ms once up", count},
		{"last-served-sec", "last caller served at", seconds},
		{"last-ended-sec", "last call ended at", seconds},
	},
	"Overload": {
		{"max-attempts", "attempts at most", count},
		{"received/accepted", "received per accepted", fixed(2)},
		{"goodput-%", "goodput", percent},
		{"hot-success-%", "calls served at 300/s", percent},
		{"unsent-%", "never sent", percent},
		{"early-success-%", "served at 80/s, first 10 s", percent},
		{"late-success-%", "served at 80/s, after 10 s", percent},
	},
}

var stormCols = []column{
	{"max-attempts", "attempts at most", count},
	{"attempts/call", "attempts per call, outage", fixed(4)},
	{"outage-success-%", "outage calls served", percent},
	{"after-success-%", "calls after it served", percent},
	{"peak/100ms", "peak per 100 ms", count},
	{"down-peak/100ms", "peak while down", count},
	{"start-peak/100ms", "peak in the outage's first second", count},
	{"recovery-peak/100ms", "peak in the first second after it", count},
	{"longest-call-sec", "longest call", seconds},
}

// scenarioTable writes a row per library of the scenario bench: each
// figure benchstat's median of the runs with its 95 % confidence interval.
func (r *report) scenarioTable(bench string) string {
	cols := scenarioCols[bench]
	var b strings.Builder
	b.WriteString("| library |")
	for _, c := range cols {
		b.WriteString(" " + c.title + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(cols)) + "\n")
	for _, lib := range scenarioLibs {
		if r.scen[bench][lib] == nil {
			continue
		}
		b.WriteString("| " + lib + " |")
		for _, c := range cols {
			v, ci, ok := r.scen.center(bench, lib, c.unit)
			switch {
			case !ok:
				b.WriteString(" – |")
			case ci == "" || c.unit == "max-attempts":
				b.WriteString(" " + c.format(v) + " |")
			default:
				b.WriteString(" " + c.format(v) + " " + ci + " |")
			}
		}
		b.WriteString("\n")
	}
	return orMissing(b.String(), bench, "results/scenarios.txt")
}

// orMissing returns table, or a line saying it is missing when it has no
// row, which input it needed and that run.sh fills it.
func orMissing(table, what, input string) string {
	if strings.Count(table, "\n") > 2 {
		return table
	}
	return fmt.Sprintf("*Not in this report: no figures of %s in bench/%s (bash bench/run.sh measures them).*\n", what, input)
}
