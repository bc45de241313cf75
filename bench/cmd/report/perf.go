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

// The kinds of answer every path is measured on (bench.Responses), in the
// order of the columns: the realistic answers' figures come first.
const (
	realistic = "realistic"
	empty     = "empty"
)

var responses = []string{realistic, empty}

// variant names path measured on answers of kind resp, as bench.Variant
// does: "GET/resp=realistic".
func variant(path, resp string) string { return path + "/resp=" + resp }

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

// orDash formats v, or "–" when it is NaN (not measured).
func orDash(format func(float64) string, v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return format(v)
}

// pathTable writes the table of an in-memory path, one row per library of
// libs that was measured, in that order: on realistic answers, CPU time per
// operation (median, middle half, extremes, and per-round ratios to bare
// and to retryhttp), the median wall-clock time, bytes and allocations;
// then on empty answers, the median CPU time, its per-round ratio to bare,
// bytes and allocations.
func (r *report) pathTable(path string, libs []string) {
	re, em := variant(path, realistic), variant(path, empty)
	r.p("| library | CPU time/op | middle half | min–max | CPU ÷ bare | CPU ÷ retryhttp | wall time/op | B/op | allocs/op | empty: CPU time/op | empty: CPU ÷ bare | empty: B/op | empty: allocs/op |\n")
	r.p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, lib := range libs {
		cpu := summarize(r.cpu.values(re, lib, cpuUnit, false))
		if cpu.n == 0 && !r.measured(em, lib) {
			continue
		}
		r.p("| %s |", lib)
		if cpu.n == 0 {
			r.p(" – | – | – | – | – | – | – | – |")
		} else {
			r.p(" %s | %s | %s | %s | %s | %s | %s | %s |",
				nanos(cpu.median), span(nanos, cpu.q1, cpu.q3), span(nanos, cpu.min, cpu.max),
				ratioCell(r.cpu.ratios(re, lib, "bare", cpuUnit, false)),
				ratioCell(r.cpu.ratios(re, lib, "retryhttp", cpuUnit, false)),
				nanos(r.median(re, lib, wallUnit)),
				bytesNum(r.median(re, lib, bytesUnit)), allocNum(r.median(re, lib, allocsUnit)))
		}
		r.p(" %s | %s | %s | %s |\n",
			orDash(nanos, r.median(em, lib, cpuUnit)), ratioCell(r.cpu.ratios(em, lib, "bare", cpuUnit, false)),
			orDash(bytesNum, r.median(em, lib, bytesUnit)), orDash(allocNum, r.median(em, lib, allocsUnit)))
	}
	r.p("\n")
}

// loopbackTable writes the table of the loopback paths, one group of rows
// per number of callers: on realistic answers, requests per second
// (wall-clock; median, middle half, and per-round ratio to bare), CPU time
// per request and its ratio to bare, and allocations per request; then on
// empty answers, requests per second and their ratio to bare, CPU time and
// allocations per request.
func (r *report) loopbackTable(callers []int) {
	r.p("| callers | library | req/s | middle half | req/s ÷ bare | CPU time/req | CPU ÷ bare | allocs/req | empty: req/s | empty: req/s ÷ bare | empty: CPU time/req | empty: allocs/req |\n")
	r.p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range callers {
		path := fmt.Sprintf("Loopback/callers=%d", n)
		re, em := variant(path, realistic), variant(path, empty)
		for _, lib := range perfLibs {
			rps := summarize(r.cpu.values(re, lib, wallUnit, true))
			erps := summarize(r.cpu.values(em, lib, wallUnit, true))
			if rps.n == 0 && erps.n == 0 {
				continue
			}
			r.p("| %d | %s |", n, lib)
			if rps.n == 0 {
				r.p(" – | – | – | – | – | – |")
			} else {
				r.p(" %s | %s | %s | %s | %s | %s |",
					num(rps.median), span(num, rps.q1, rps.q3),
					ratioCell(r.cpu.ratios(re, lib, "bare", wallUnit, true)),
					nanos(r.median(re, lib, cpuUnit)),
					ratioCell(r.cpu.ratios(re, lib, "bare", cpuUnit, false)),
					allocNum(r.median(re, lib, allocsUnit)))
			}
			if erps.n == 0 {
				r.p(" – | – | – | – |\n")
			} else {
				r.p(" %s | %s | %s | %s |\n", num(erps.median),
					ratioCell(r.cpu.ratios(em, lib, "bare", wallUnit, true)),
					nanos(r.median(em, lib, cpuUnit)), allocNum(r.median(em, lib, allocsUnit)))
			}
		}
	}
	r.p("\n")
}

// A check is a target evaluated on one kind of answer: its figures and
// whether it is met, or measured false when the samples lack what it needs.
type check struct {
	figs     string
	ok       bool
	measured bool
}

func met(figs string, ok bool) check { return check{figs: figs, ok: ok, measured: true} }

// targetRow writes a row of the targets table for a target evaluated on
// each kind of answer (eval gets the kind: realistic, empty): the figures
// of each, and the status, met or not where both agree, else each kind's.
func (r *report) targetRow(target string, eval func(resp string) check) {
	var figs, statuses []string
	var checks []check
	agree := true
	for _, resp := range responses {
		c := eval(resp)
		checks = append(checks, c)
		f, st := "not measured in this run", "–"
		if c.measured {
			f, st = c.figs, verdict(c.ok)
		}
		figs = append(figs, resp+": "+f)
		statuses = append(statuses, resp+": "+st)
		agree = agree && c.measured == checks[0].measured && c.ok == checks[0].ok
	}
	status := strings.Join(statuses, "; ")
	switch {
	case agree && !checks[0].measured:
		status = "–"
	case agree:
		status = verdict(checks[0].ok)
	}
	r.p("| %s | %s | %s |\n", target, strings.Join(figs, "<br>"), status)
}

// perfTargets writes the rows of the targets table for the measured paths,
// each evaluated on realistic answers and on empty ones.
func (r *report) perfTargets() {
	m := r.median
	const rt = "retryhttp"
	get := func(resp string) string { return variant("GET", resp) }
	put := func(resp string) string { return variant("PUT1MiB", resp) }
	post := func(resp string) string { return variant("POST1KiB", resp) }
	retry := func(resp string) string { return variant("Retry", resp) }

	// GET: CPU time at most 2x bare's, and at most 0.8x rehttp's.
	r.targetRow("GET success path: CPU time at most 2× the bare base's", func(resp string) check {
		b := get(resp)
		if !r.measured(b, rt, "bare") {
			return check{}
		}
		return met(fmt.Sprintf("retryhttp %s, bare %s: %s (median of per-round ratios, middle half in brackets)",
			nanos(m(b, rt, cpuUnit)), nanos(m(b, "bare", cpuUnit)), ratioCell(r.cpu.ratios(b, rt, "bare", cpuUnit, false))),
			r.pairedRatio(b, rt, "bare", cpuUnit) <= 2)
	})
	r.targetRow("GET success path: CPU time at most 0.8× rehttp's", func(resp string) check {
		b := get(resp)
		if !r.measured(b, rt, "rehttp") {
			return check{}
		}
		return met(fmt.Sprintf("retryhttp %s, rehttp %s: %s",
			nanos(m(b, rt, cpuUnit)), nanos(m(b, "rehttp", cpuUnit)), ratioCell(r.cpu.ratios(b, rt, "rehttp", cpuUnit, false))),
			r.pairedRatio(b, rt, "rehttp", cpuUnit) <= 0.8)
	})

	// GET: fewer allocs and bytes than every peer, at most 1 alloc over bare.
	r.targetRow("GET success path: fewer allocations and bytes than every peer", func(resp string) check {
		b := get(resp)
		if !r.measured(b, perfLibs...) {
			return check{}
		}
		ok := true
		var figs []string
		for _, p := range perfLibs[2:] {
			ok = ok && m(b, rt, allocsUnit) < m(b, p, allocsUnit) && m(b, rt, bytesUnit) < m(b, p, bytesUnit)
			figs = append(figs, fmt.Sprintf("%s %s allocs, %s", p, allocNum(m(b, p, allocsUnit)), bytesNum(m(b, p, bytesUnit))))
		}
		return met(fmt.Sprintf("retryhttp %s allocs, %s; %s", allocNum(m(b, rt, allocsUnit)), bytesNum(m(b, rt, bytesUnit)), strings.Join(figs, "; ")), ok)
	})
	r.targetRow("GET success path: no allocation", func(resp string) check {
		b := get(resp)
		if !r.measured(b, rt, "bare") {
			return check{}
		}
		return met(fmt.Sprintf("retryhttp %s allocs/op, bare %s", allocNum(m(b, rt, allocsUnit)), allocNum(m(b, "bare", allocsUnit))), math.Round(m(b, rt, allocsUnit)) == 0)
	})

	// PUT: no body copy; >= 100x fewer bytes than the peers that copy.
	r.targetRow("1 MiB PUT: no body copy", func(resp string) check {
		b := put(resp)
		if !r.measured(b, rt, "bare") {
			return check{}
		}
		extra := m(b, rt, bytesUnit) - m(b, "bare", bytesUnit)
		return met(fmt.Sprintf("retryhttp %s/op, bare %s/op: %s more than bare, against a body of 1 MiB",
			bytesNum(m(b, rt, bytesUnit)), bytesNum(m(b, "bare", bytesUnit)), bytesNum(max(extra, 0))), extra < 10<<10)
	})
	for _, p := range []string{"retryablehttp", "failsafe-go"} {
		r.targetRow("1 MiB PUT: at least 100× fewer bytes than "+p, func(resp string) check {
			b := put(resp)
			if !r.measured(b, rt, p) {
				return check{}
			}
			q := m(b, p, bytesUnit) / m(b, rt, bytesUnit)
			return met(fmt.Sprintf("%s %s/op ÷ retryhttp %s/op = %s", p, bytesNum(m(b, p, bytesUnit)), bytesNum(m(b, rt, bytesUnit)), times(q)), q >= 100)
		})
	}

	// POST of 1 KiB, not retried: at most 2 allocs over bare, and CPU time
	// at most go-retryablehttp's client's and rehttp's.
	r.targetRow("1 KiB POST, not retried: at most 2 allocations over bare", func(resp string) check {
		b := post(resp)
		if !r.measured(b, rt, "bare") {
			return check{}
		}
		over := m(b, rt, allocsUnit) - m(b, "bare", allocsUnit)
		return met(fmt.Sprintf("retryhttp %s allocs/op, bare %s", allocNum(m(b, rt, allocsUnit)), allocNum(m(b, "bare", allocsUnit))), math.Round(over) <= 2)
	})
	postPeers := []string{"retryablehttp-client", "rehttp"}
	r.targetRow("1 KiB POST, not retried: CPU time at most go-retryablehttp's client's and rehttp's", func(resp string) check {
		b := post(resp)
		if !r.measured(b, append([]string{rt}, postPeers...)...) {
			return check{}
		}
		ok := true
		var figs []string
		for _, p := range postPeers {
			ok = ok && r.pairedRatio(b, rt, p, cpuUnit) <= 1
			figs = append(figs, fmt.Sprintf("%s %s: %s", p, nanos(m(b, p, cpuUnit)), ratioCell(r.cpu.ratios(b, rt, p, cpuUnit, false))))
		}
		return met(fmt.Sprintf("retryhttp %s, %s", nanos(m(b, rt, cpuUnit)), strings.Join(figs, "; ")), ok)
	})

	// Retry: at most rehttp's allocations and bytes, and at most 0.9x its
	// CPU time.
	for _, u := range []struct {
		what, unit string
		format     func(float64) string
	}{{"allocations", allocsUnit, allocNum}, {"bytes", bytesUnit, bytesNum}} {
		r.targetRow("retry path: at most rehttp's "+u.what, func(resp string) check {
			b := retry(resp)
			if !r.measured(b, rt, "rehttp") {
				return check{}
			}
			x, y := m(b, rt, u.unit), m(b, "rehttp", u.unit)
			return met(fmt.Sprintf("retryhttp %s, rehttp %s", u.format(x), u.format(y)), math.Round(x) <= math.Round(y))
		})
	}
	r.targetRow("retry path: CPU time at most 0.9× rehttp's", func(resp string) check {
		b := retry(resp)
		if !r.measured(b, rt, "rehttp") {
			return check{}
		}
		return met(fmt.Sprintf("retryhttp %s, rehttp %s: %s",
			nanos(m(b, rt, cpuUnit)), nanos(m(b, "rehttp", cpuUnit)), ratioCell(r.cpu.ratios(b, rt, "rehttp", cpuUnit, false))),
			r.pairedRatio(b, rt, "rehttp", cpuUnit) <= 0.9)
	})
}
