package main

import (
	"fmt"
	"math"
)

// The opt-ins path (bench.PathOptIns), without its kind of answer, and its
// libraries, in the order of its table.
const optInsPath = "OptIns"

var optInLibs = []string{"retryhttp", "bare", "retryhttp-hedge", "retryhttp-throttle", "failsafe-go-hedge", "failsafe-go-throttle"}

// measured reports whether every lib has samples on bench.
func (r *report) measured(bench string, libs ...string) bool {
	for _, lib := range libs {
		if len(r.cpu.values(bench, lib, cpuUnit, false)) == 0 {
			return false
		}
	}
	return true
}

// allocsAndBytes formats lib's median allocations and bytes per operation
// on bench.
func (r *report) allocsAndBytes(bench, lib string) string {
	return fmt.Sprintf("%s %s allocs, %s", lib, allocNum(r.median(bench, lib, allocsUnit)), bytesNum(r.median(bench, lib, bytesUnit)))
}

// sameAllocs reports whether lib and ref allocate as often per operation on
// bench, to the nearest allocation.
func (r *report) sameAllocs(bench, lib, ref string) bool {
	return math.Round(r.median(bench, lib, allocsUnit)) == math.Round(r.median(bench, ref, allocsUnit))
}

// optInTargets writes the rows of the targets table for the opt-ins path,
// each evaluated on realistic answers and on empty ones: what hedging and
// throttling cost a request they do not act on. Where the samples lack a
// library the row says so.
func (r *report) optInTargets() {
	const (
		off      = "retryhttp"
		throttle = "retryhttp-throttle"
		hedge    = "retryhttp-hedge"
		peer     = "failsafe-go-hedge"
	)
	p := func(resp string) string { return variant(optInsPath, resp) }

	r.targetRow("throttling on: no allocation over throttling off for a request not throttled", func(resp string) check {
		b := p(resp)
		if !r.measured(b, off, throttle) {
			return check{}
		}
		return met(r.allocsAndBytes(b, throttle)+"; "+r.allocsAndBytes(b, off), r.sameAllocs(b, throttle, off))
	})

	explained := false // the reason is given once, with the first figures not met
	r.targetRow("hedging on: no allocation over hedging off for a request not hedged", func(resp string) check {
		b := p(resp)
		if !r.measured(b, off, hedge) {
			return check{}
		}
		ok := r.sameAllocs(b, hedge, off)
		figs := r.allocsAndBytes(b, hedge) + "; " + r.allocsAndBytes(b, off)
		if !ok && !explained {
			explained = true
			figs += ". A request that may be hedged runs as a race even when no hedge goes: a cancelable context of its own (context.WithCancel's 2 allocations), and the attempt's state, which holds the request's copy and the body that ends the context when closed (the race and its timer are reused)"
		}
		return met(figs, ok)
	})

	r.targetRow("hedging on, not hedged: at most 0.4× failsafe-go's hedge policy in CPU time, fewer allocations", func(resp string) check {
		b := p(resp)
		if !r.measured(b, hedge, peer) {
			return check{}
		}
		q := r.pairedRatio(b, hedge, peer, cpuUnit)
		fewer := math.Round(r.median(b, hedge, allocsUnit)) < math.Round(r.median(b, peer, allocsUnit))
		return met(fmt.Sprintf("%s %s, %s %s: %s; %s; %s",
			hedge, nanos(r.median(b, hedge, cpuUnit)), peer, nanos(r.median(b, peer, cpuUnit)),
			ratioCell(r.cpu.ratios(b, hedge, peer, cpuUnit, false)),
			r.allocsAndBytes(b, hedge), r.allocsAndBytes(b, peer)), q <= 0.4 && fewer)
	})
}

// optInSection writes the section of the opt-ins path, if it was measured.
func (r *report) optInSection() {
	if len(r.cpu[variant(optInsPath, realistic)]) == 0 && len(r.cpu[variant(optInsPath, empty)]) == 0 {
		return
	}
	r.p(`## Opt-ins that do not act: GET with hedging or throttling on

The GET of the success path, answered 200 at once by the in-memory base (realistic answers, and
empty ones in the columns headed *empty*), through policies that
act only on some requests: hedging (a second copy of a request that is slow to answer) and
adaptive throttling (rejecting requests in the client while a host rejects many). Neither acts
on this request: what the rows add to *retryhttp* is what turning the policy on costs every
request it does not act on. *retryhttp* has its default policy (hedging and throttling off) and
budget; *retryhttp-hedge* adds ` + "`Policy.Hedge: &Hedge{Delay: time.Second}`" + ` (a fixed
delay, which an in-memory answer never waits for; the adaptive one costs the same, but would
hedge the rare request a pause of the process held up for 2 ms); *retryhttp-throttle* adds
` + "`Policy.Throttle: &Throttle{}`" + `. Each run checks that no hedge was sent and no attempt
throttled (` + "`Transport.Stats`" + `) and that the base saw one attempt per request.
*failsafe-go-hedge* is failsafe-go's hedge policy with a delay of 1 s
(` + "`hedgepolicy.NewBuilderWithDelay(1s)`" + `), *failsafe-go-throttle* its adaptive throttler
with its defaults (` + "`adaptivethrottler.NewWithDefaults()`" + `), each alone in a
` + "`failsafehttp.NewRoundTripper`" + `, without a retry policy. A hedged request runs as a race
even when no hedge goes: retryhttp gives its first attempt a context of its own (which a winning
hedge would cancel), a copy of the request carrying it, a timer for the hedge, and a body that
ends that context when the caller closes it.

`)
	r.pathTable(optInsPath, optInLibs)
	r.profileNote(optInsPath, optInLibs...)
}
