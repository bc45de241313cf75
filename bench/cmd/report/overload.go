package main

import (
	"fmt"
	"strings"

	"github.com/retryhttp/retryhttp"
)

// overloadCols are the columns of the overload's table.
var overloadCols = []scenarioCol{
	{unit: "max-attempts", title: "attempts at most", format: count, noCI: true},
	{unit: "received/accepted", title: "received per accepted", format: fixed(2)},
	{unit: "goodput-%", title: "goodput", format: percent},
	{unit: "hot-success-%", title: "calls served at 300/s", format: percent},
	{unit: "unsent-%", title: "never sent", format: percent},
	{unit: "early-success-%", title: "served at 80/s, first 10 s", format: percent},
	{unit: "late-success-%", title: "served at 80/s, after 10 s", format: percent},
}

// overloadTargets writes the target row of the overload scenario.
func (r *report) overloadTargets() {
	v := func(lib, unit string) float64 { return r.value(r.scen, "Overload", lib, unit) }
	const lib = "retryhttp-throttle"
	q, g, late := v(lib, "received/accepted"), v(lib, "goodput-%"), v(lib, "late-success-%")
	var peers []string
	for _, p := range []string{"retryhttp", "retryablehttp", "failsafe-go", "failsafe-go-breaker", "bare"} {
		peers = append(peers, fmt.Sprintf("%s %.2f, goodput %.1f %%", p, v(p, "received/accepted"), v(p, "goodput-%")))
	}
	r.p("| overload, retryhttp with throttling: at most 2.2 attempts received per one accepted, goodput at least 95 %% of capacity, at least 99 %% of the calls at 80/s served after 10 s | %.2f received per accepted, goodput %.1f %%, %.1f %% served (%s) | %s |\n",
		q, g, late, strings.Join(peers, "; "), verdict(q <= 2.2 && g >= 95 && late >= 99))
}

// overload writes the section on the overload scenario.
func (r *report) overload() {
	v := func(lib, unit string) float64 { return r.value(r.scen, "Overload", lib, unit) }
	r.p(`## Overload: one client offering three times the capacity

A dependency that serves 100 attempts a second (10 in each 100 ms, counted in fixed slices of
time) and answers 503 to the attempts beyond is offered 300 calls a second, evenly spaced, by
one client (one RoundTripper) for 60 s, then 80 calls a second for 20 s; every call is followed
to its end. Like the budget scenarios it runs in fake time (` + "`testing/synctest`" + `, the test
TestOverload at full size), the dependency taking 10 ms per attempt.

| library | configuration | attempts at most |
|---|---|---:|
| bare | the base alone: one attempt per call | 1 |
| retryhttp | ` + "`&retryhttp.Transport{Base: base}`" + `: its defaults, default budget | 4 |
| retryhttp-throttle | ` + "`&retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Throttle: &retryhttp.Throttle{}}}`" + `: adaptive throttling with its defaults (K 2, a window of 10 s), default budget | 4 |
| retryablehttp | ` + "`retryablehttp.NewClient()`" + ` with ` + "`Logger: nil`" + `, as a ` + "`RoundTripper`" + ` | 5 |
| failsafe-go | ` + "`failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build())`" + ` | 3 |
| failsafe-go-breaker | composed as a user would: the same retry policy around a circuit breaker, ` + "`failsafehttp.NewRoundTripper(base, retryPolicy, breaker)`" + `, the breaker ` + "`circuitbreaker.NewBuilder[*http.Response]().HandleIf(...).Build()`" + ` with its defaults (opens on one failure, stays open 1 minute, closes on one success), told to count as failures what the retry policy retries (errors, 429, 5xx but 501): by default it counts only errors, and a 503 is not one | 3 |

- *received per accepted*: the attempts of the 300/s phase's calls that reached the dependency,
  per attempt of theirs it served (3.00 without retries: 300 offered for 100 served).
- *goodput*: the attempts the dependency served during the 300/s phase, as a share of its
  capacity over the phase.
- *never sent*: the 300/s phase's calls refused in the client (throttled, or the circuit open)
  that never reached the dependency.
- *served at 80/s*: the calls of the second phase that succeeded, those started in its first
  10 s (the throttle's window) and those started after.

`)
	r.scenarioTable("Overload", overloadCols)
	r.prose(`- **retryhttp** with its defaults: the dependency's 503s carry no Retry-After, so each is a
  failure of the host, and with other calls in flight the retries wait in line. The host's
  successes, 100 a second, let them
  go: each earns %.2g of a retry and pays one waiting retry while the credit allows, and they
  keep the ramp going (half the retries that succeeded in a round, since some fail): about %.2f
  retries reach the dependency for each attempt it serves, %.2f attempts received per accepted
  against 3.00 for the bare base, and %.1f %% of the 300/s calls served (%.1f %% bare). A call
  whose retries the line does not let go within 10 s gets the dependency's 503. %s
- **retryhttp-throttle**: the client counts, per host over 10 s, what it sent and what was
  accepted, and rejects new attempts in the client with probability max(0, (requests − 2 ×
  accepts) / (requests + 1)): the dependency receives about twice what it accepts, %.2f, at
  %.1f %% of its capacity, and %.1f %% of the 300/s calls fail at once in the client with
  ErrThrottled. When the load falls to 80/s the window still remembers the overload: %.1f %% of
  the calls of its first 10 s are served, %.1f %% after.
- **retryablehttp**: 4 retries each, 1 to 8 s apart and without jitter: %.2f attempts received
  per accepted. Its retries go on after the load has dropped and take capacity from the calls
  at 80/s: %.1f %% of those of the first 10 s served.
- **failsafe-go**: 2 retries at once: %.2f received per accepted.
- **failsafe-go-breaker**: the first 503, a few milliseconds into the overload, opens the
  circuit for a minute, during which every call fails in the client with `+"`circuitbreaker.ErrOpen`"+`
  (%.1f %% of the 300/s calls never sent) and the dependency, though it could serve 100 a
  second, serves %.1f %% of its capacity. The minute ends about when the load falls to 80/s,
  and the first call after it closes the circuit again: %.1f %% of the calls of the first 10 s
  at 80/s served. A breaker that opens on 503 turns an overload into an outage of its own.

`, retryhttp.DefaultBudgetRatio,
		v("retryhttp", "received/accepted")-100/v("retryhttp", "hot-success-%"), v("retryhttp", "received/accepted"),
		v("retryhttp", "hot-success-%"), v("bare", "hot-success-%"), r.afterOverload(),
		v("retryhttp-throttle", "received/accepted"), v("retryhttp-throttle", "goodput-%"), v("retryhttp-throttle", "unsent-%"),
		v("retryhttp-throttle", "early-success-%"), v("retryhttp-throttle", "late-success-%"),
		v("retryablehttp", "received/accepted"), v("retryablehttp", "early-success-%"), v("failsafe-go", "received/accepted"),
		v("failsafe-go-breaker", "unsent-%"), v("failsafe-go-breaker", "goodput-%"), v("failsafe-go-breaker", "early-success-%"))
}

// afterOverload says what retryhttp's default budget does for the calls at
// 80/s that follow the overload. Its releases are paid by the dependency's
// successes, not sized to the load: at the capacity's 100 successes a
// second the credit alone pays for DefaultBudgetRatio×100 retries a second,
// and 80 calls a second leave room for 20.
func (r *report) afterOverload() string {
	v := func(unit string) float64 { return r.value(r.scen, "Overload", "retryhttp", unit) }
	early, late := v("early-success-%"), v("late-success-%")
	paid := retryhttp.DefaultBudgetRatio * 100
	if early >= 100 && late >= 100 {
		return fmt.Sprintf("When the load falls to 80/s every call is served (%.1f %% of those of the first 10 s, "+
			"%.1f %% after).", early, late)
	}
	return fmt.Sprintf("The releases are paid by the dependency's successes, not sized to the load: when it falls "+
		"to 80/s, the credit that 100 successes a second earn still pays for about %.0f retries a second, where "+
		"80 calls a second leave room for 20, so attempts beyond the capacity go on failing and the line "+
		"refills while the load lasts: %.1f %% of the calls of the first 10 s at 80/s are served, %.1f %% "+
		"of those after, the others out of attempts or of time in line.", paid, early, late)
}
