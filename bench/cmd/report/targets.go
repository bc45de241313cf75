package main

import (
	"fmt"
	"math"
	"strings"
)

// The in-memory paths, and how the targets name them.
var inMemory = []struct{ path, name string }{
	{"GET", "GET success path"},
	{"PUT1MiB", "PUT of 1 MiB"},
	{"POST1KiB", "POST of 1 KiB, not retried"},
	{"Retry", "retry path (503, 503, 200)"},
}

// targets writes the Targets table: the guards the project holds, each with
// its figures and whether it was met, or "not measured" when the run lacks
// its figures.
func (r *report) targets() string {
	var b strings.Builder
	b.WriteString("| target | figures | status |\n|---|---|---|\n")
	row := func(target, figures string, ok, measured bool) {
		status := verdict(ok)
		if !measured {
			figures, status = "not measured in this run", "–"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", target, figures, status)
	}
	p, m := r.paths, r.paths.median
	for _, x := range inMemory {
		row(x.name+": CPU time at most rehttp's", fmt.Sprintf("retryhttp %s, rehttp %s: %s",
			nanos(m(x.path, "retryhttp", cpuUnit)), nanos(m(x.path, "rehttp", cpuUnit)), ratioCell(p.ratios(x.path, "retryhttp", "rehttp", cpuUnit))),
			p.ratio(x.path, "retryhttp", "rehttp", cpuUnit) <= 1, p.has(x.path, cpuUnit, "retryhttp", "rehttp"))
	}
	row("GET success path: no allocation", fmt.Sprintf("retryhttp %s allocs/op, %s/op", count(m("GET", "retryhttp", allocsUnit)), bytesNum(m("GET", "retryhttp", bytesUnit))),
		math.Round(m("GET", "retryhttp", allocsUnit)) == 0, p.has("GET", allocsUnit, "retryhttp"))
	extra := m("PUT1MiB", "retryhttp", bytesUnit) - m("PUT1MiB", "bare", bytesUnit)
	row("PUT of 1 MiB: no copy of the body", fmt.Sprintf("retryhttp %s/op, bare %s/op: %s more, against a body of 1 MiB",
		bytesNum(m("PUT1MiB", "retryhttp", bytesUnit)), bytesNum(m("PUT1MiB", "bare", bytesUnit)), bytesNum(max(extra, 0))),
		extra < 10<<10, p.has("PUT1MiB", bytesUnit, "retryhttp", "bare"))
	for _, proto := range []string{"h1", "h2"} {
		figs, ok, measured := r.loopbackTarget(proto)
		row(protoName[proto]+" loopback: CPU time per request within 3 % of bare's", figs, ok, measured)
	}
	r.scenarioTargets(row)
	b.WriteString(r.waitingTargets())
	return b.String()
}

var protoName = map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2"}

// loopbackTarget returns, for each number of callers over proto, the median
// of retryhttp's per-round ratios of CPU time per request to bare's, and
// whether every one is at most 1.03.
//
// The figures also give bare-again's ratios to bare, the same sends twice:
// the harness's own error on each path.
func (r *report) loopbackTarget(proto string) (figures string, ok, measured bool) {
	var figs, again []string
	ok, measured = true, true
	for _, n := range loopbackCallers {
		path := loopbackPath(proto, n)
		measured = measured && r.paths.has(path, cpuUnit, "retryhttp", "bare")
		ok = ok && r.paths.ratio(path, "retryhttp", "bare", cpuUnit) <= 1.03
		figs = append(figs, ratioCell(r.paths.ratios(path, "retryhttp", "bare", cpuUnit)))
		if r.paths.has(path, cpuUnit, "bare-again", "bare") {
			again = append(again, ratioCell(r.paths.ratios(path, "bare-again", "bare", cpuUnit)))
		}
	}
	figures = "retryhttp ÷ bare, 1, 16 and 64 callers: " + strings.Join(figs, ", ")
	if len(again) == len(figs) {
		figures += "; bare-again ÷ bare: " + strings.Join(again, ", ")
	}
	return figures, ok, measured
}

// scenarioTargets writes the rows of the scenarios' targets, retryhttp's
// figures against the bounds its tests hold (TestStorm, TestFleet, TestBlip
// and TestOverload at full size), with its peers' for comparison.
func (r *report) scenarioTargets(row func(target, figures string, ok, measured bool)) {
	v := func(bench, lib, unit string) float64 {
		x, _, ok := r.scen.center(bench, lib, unit)
		if !ok {
			return math.NaN()
		}
		return x
	}
	peers := func(bench, unit string, format func(float64) string) string {
		var f []string
		for _, p := range []string{"retryhttp-nobudget", "retryablehttp", "failsafe-go", "failsafe-go-budget", "rehttp"} {
			f = append(f, p+" "+format(v(bench, p, unit)))
		}
		return strings.Join(f, ", ")
	}
	has := func(bench string) bool { return r.scen[bench]["retryhttp"] != nil }

	a, pk, long := v("Storm", "retryhttp", "attempts/call"), v("Storm", "retryhttp", "down-peak/100ms"), v("Storm", "retryhttp", "longest-call-sec")
	row("storm: at most 1.30 attempts per call over the outage, at most 40 attempts in any 100 ms while down, no call held over 15 s",
		fmt.Sprintf("retryhttp %.4f attempts per call, peak while down %s, longest call %.2f s (attempts per call: %s)", a, count(pk), long, peers("Storm", "attempts/call", fixed(2))),
		a <= 1.30 && pk <= 40 && long <= 15, has("Storm"))
	a, pk = v("Fleet", "retryhttp", "attempts/call"), v("Fleet", "retryhttp", "start-peak/100ms")
	row("fleet: at most 1.35 attempts per call over the outage, at most 180 attempts (1.5× the 120 offered) in any 100 ms of its first second",
		fmt.Sprintf("retryhttp %.4f attempts per call, onset peak %s (attempts per call: %s)", a, count(pk), peers("Fleet", "attempts/call", fixed(2))),
		a <= 1.35 && pk <= 180, has("Fleet"))
	ok, a, pk := v("Blip", "retryhttp", "success-%"), v("Blip", "retryhttp", "attempts/caller"), v("Blip", "retryhttp", "peak/10ms")
	row("blip: at least 99 % of the callers served, at most 3.0 attempts per caller, at most 60 attempts in any 10 ms once up",
		fmt.Sprintf("retryhttp %.1f %%, %.2f attempts per caller, peak %s (served: %s)", ok, a, count(pk), peers("Blip", "success-%", percent)),
		ok >= 99 && a <= 3 && pk <= 60, has("Blip"))
	const t = "retryhttp-throttle"
	q, g, late := v("Overload", t, "received/accepted"), v("Overload", t, "goodput-%"), v("Overload", t, "late-success-%")
	row("overload, retryhttp with throttling: at most 2.2 attempts received per one accepted, goodput at least 95 % of capacity, at least 99 % of the calls at 80/s served after 10 s",
		fmt.Sprintf("%.2f received per accepted, goodput %.1f %%, %.1f %% served (received per accepted without throttling: retryhttp %.2f, retryablehttp %.2f, failsafe-go %.2f, bare %.2f)",
			q, g, late, v("Overload", "retryhttp", "received/accepted"), v("Overload", "retryablehttp", "received/accepted"),
			v("Overload", "failsafe-go", "received/accepted"), v("Overload", "bare", "received/accepted")),
		q <= 2.2 && g >= 95 && late >= 99, r.scen["Overload"][t] != nil)
}
