package main

import (
	"fmt"
	"math"
	"strings"
)

// The libraries of the measured paths, in the order of their tables.
var perfLibs = []string{"retryhttp", "bare", "retryablehttp", "retryablehttp-client", "failsafe-go", "rehttp"}

// The units cmd/measure writes.
const (
	cpuUnit    = "cpu-ns/op"
	wallUnit   = "ns/op"
	bytesUnit  = "B/op"
	allocsUnit = "allocs/op"
)

// nanos formats a time in nanoseconds.
func nanos(v float64) string { return duration(v / 1e9) }

// allocNum formats a count of allocations per operation, to a tenth.
func allocNum(v float64) string {
	r := math.Round(v*10) / 10
	if r == math.Trunc(r) {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.1f", r)
}

// times formats a ratio.
func times(q float64) string {
	switch {
	case math.IsInf(q, 1):
		return "∞"
	case q >= 100:
		return fmt.Sprintf("%.0f×", q)
	case q >= 10:
		return fmt.Sprintf("%.1f×", q)
	default:
		return fmt.Sprintf("%.2f×", q)
	}
}

// span formats the range from a to b, writing a shared unit once.
func span(format func(float64) string, a, b float64) string {
	fa, fb := format(a), format(b)
	if i := strings.LastIndexByte(fa, ' '); i > 0 && strings.HasSuffix(fb, fa[i:]) {
		fa = fa[:i]
	}
	return fa + "–" + fb
}

// ratioCell formats the median of per-round ratios with their middle half.
func ratioCell(v []float64) string {
	s := summarize(v)
	if s.n == 0 {
		return "–"
	}
	m, lo, hi := times(s.median), times(s.q1), times(s.q3)
	if lo == hi {
		return m
	}
	return m + " (" + strings.TrimSuffix(lo, "×") + "–" + hi + ")"
}

// median returns the median of lib's samples on bench in unit, NaN if none.
func (r *report) median(bench, lib, unit string) float64 {
	s := summarize(r.cpu.values(bench, lib, unit, false))
	if s.n == 0 {
		return math.NaN()
	}
	return s.median
}

// ratio returns the median of lib's per-round ratios to ref on bench.
func (r *report) pairedRatio(bench, lib, ref, unit string) float64 {
	s := summarize(r.cpu.ratios(bench, lib, ref, unit, false))
	if s.n == 0 {
		return math.NaN()
	}
	return s.median
}

// pathTable writes the table of an in-memory path: CPU time per operation
// (median, middle half, extremes, and per-round ratios to bare and to
// retryhttp), the median wall-clock time, bytes and allocations; one row
// per library of libs that was measured, in that order.
func (r *report) pathTable(bench string, libs []string) {
	r.p("| library | CPU time/op | middle half | min–max | CPU ÷ bare | CPU ÷ retryhttp | wall time/op | B/op | allocs/op |\n")
	r.p("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, lib := range libs {
		cpu := summarize(r.cpu.values(bench, lib, cpuUnit, false))
		if cpu.n == 0 {
			continue
		}
		r.p("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", lib,
			nanos(cpu.median), span(nanos, cpu.q1, cpu.q3), span(nanos, cpu.min, cpu.max),
			ratioCell(r.cpu.ratios(bench, lib, "bare", cpuUnit, false)),
			ratioCell(r.cpu.ratios(bench, lib, "retryhttp", cpuUnit, false)),
			nanos(r.median(bench, lib, wallUnit)),
			bytesNum(r.median(bench, lib, bytesUnit)), allocNum(r.median(bench, lib, allocsUnit)))
	}
	r.p("\n")
}

// loopbackTable writes the table of the loopback paths, one group of rows
// per number of callers: requests per second (wall-clock; median, middle
// half, and per-round ratio to bare), CPU time per request and its ratio
// to bare, and allocations per request.
func (r *report) loopbackTable(callers []int) {
	r.p("| callers | library | req/s | middle half | req/s ÷ bare | CPU time/req | CPU ÷ bare | allocs/req |\n")
	r.p("|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range callers {
		bench := fmt.Sprintf("Loopback/callers=%d", n)
		for _, lib := range perfLibs {
			rps := summarize(r.cpu.values(bench, lib, wallUnit, true))
			if rps.n == 0 {
				continue
			}
			r.p("| %d | %s | %s | %s | %s | %s | %s | %s |\n", n, lib,
				num(rps.median), span(num, rps.q1, rps.q3),
				ratioCell(r.cpu.ratios(bench, lib, "bare", wallUnit, true)),
				nanos(r.median(bench, lib, cpuUnit)),
				ratioCell(r.cpu.ratios(bench, lib, "bare", cpuUnit, false)),
				allocNum(r.median(bench, lib, allocsUnit)))
		}
	}
	r.p("\n")
}

// perfTargets writes the rows of the targets table for the measured paths.
func (r *report) perfTargets() {
	m := r.median
	const rt = "retryhttp"

	// GET: CPU time at most 3x bare's, and below rehttp's.
	q := r.pairedRatio("GET", rt, "bare", cpuUnit)
	r.p("| GET success path: CPU time at most 3× the bare base's | retryhttp %s, bare %s: %s (median of per-round ratios, middle half in brackets) | %s |\n",
		nanos(m("GET", rt, cpuUnit)), nanos(m("GET", "bare", cpuUnit)), ratioCell(r.cpu.ratios("GET", rt, "bare", cpuUnit, false)), verdict(q <= 3))
	q = r.pairedRatio("GET", rt, "rehttp", cpuUnit)
	r.p("| GET success path: CPU time below rehttp's | retryhttp %s, rehttp %s: %s | %s |\n",
		nanos(m("GET", rt, cpuUnit)), nanos(m("GET", "rehttp", cpuUnit)), ratioCell(r.cpu.ratios("GET", rt, "rehttp", cpuUnit, false)), verdict(q < 1))

	// GET: fewer allocs and bytes than every peer, at most 1 alloc over bare.
	ok := true
	var figs []string
	for _, p := range perfLibs[2:] {
		ok = ok && m("GET", rt, allocsUnit) < m("GET", p, allocsUnit) && m("GET", rt, bytesUnit) < m("GET", p, bytesUnit)
		figs = append(figs, fmt.Sprintf("%s %s allocs, %s", p, allocNum(m("GET", p, allocsUnit)), bytesNum(m("GET", p, bytesUnit))))
	}
	r.p("| GET success path: fewer allocations and bytes than every peer | retryhttp %s allocs, %s; %s | %s |\n",
		allocNum(m("GET", rt, allocsUnit)), bytesNum(m("GET", rt, bytesUnit)), strings.Join(figs, "; "), verdict(ok))
	over := m("GET", rt, allocsUnit) - m("GET", "bare", allocsUnit)
	r.p("| GET success path: at most 1 allocation over bare | retryhttp %s allocs/op, bare %s | %s |\n",
		allocNum(m("GET", rt, allocsUnit)), allocNum(m("GET", "bare", allocsUnit)), verdict(math.Round(over) <= 1))

	// PUT: no body copy; >= 100x fewer bytes than the peers that copy.
	extra := m("PUT1MiB", rt, bytesUnit) - m("PUT1MiB", "bare", bytesUnit)
	r.p("| 1 MiB PUT: no body copy | retryhttp %s/op, bare %s/op: %s more than bare, against a body of 1 MiB | %s |\n",
		bytesNum(m("PUT1MiB", rt, bytesUnit)), bytesNum(m("PUT1MiB", "bare", bytesUnit)), bytesNum(max(extra, 0)), verdict(extra < 10<<10))
	for _, p := range []string{"retryablehttp", "failsafe-go"} {
		q := m("PUT1MiB", p, bytesUnit) / m("PUT1MiB", rt, bytesUnit)
		r.p("| 1 MiB PUT: at least 100× fewer bytes than %s | %s %s/op ÷ retryhttp %s/op = %s | %s |\n",
			p, p, bytesNum(m("PUT1MiB", p, bytesUnit)), bytesNum(m("PUT1MiB", rt, bytesUnit)), times(q), verdict(q >= 100))
	}

	// Retry: at most rehttp's allocations, bytes and CPU time.
	a, b := m("Retry", rt, allocsUnit), m("Retry", "rehttp", allocsUnit)
	r.p("| retry path: at most rehttp's allocations | retryhttp %s, rehttp %s | %s |\n", allocNum(a), allocNum(b), verdict(math.Round(a) <= math.Round(b)))
	a, b = m("Retry", rt, bytesUnit), m("Retry", "rehttp", bytesUnit)
	r.p("| retry path: at most rehttp's bytes | retryhttp %s, rehttp %s | %s |\n", bytesNum(a), bytesNum(b), verdict(math.Round(a) <= math.Round(b)))
	q = r.pairedRatio("Retry", rt, "rehttp", cpuUnit)
	r.p("| retry path: at most rehttp's CPU time | retryhttp %s, rehttp %s: %s | %s |\n",
		nanos(m("Retry", rt, cpuUnit)), nanos(m("Retry", "rehttp", cpuUnit)), ratioCell(r.cpu.ratios("Retry", rt, "rehttp", cpuUnit, false)), verdict(q <= 1))
}
