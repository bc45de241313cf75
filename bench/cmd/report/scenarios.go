package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// scenarios writes the section on the budget scenarios: the storm, the
// fleet and the blip. The prose that reads figures takes them from the run.
func (r *report) scenarios() {
	v := func(bench, lib, unit string) float64 { return r.value(r.scen, bench, lib, unit) }
	r.p(`## Budget scenarios: storm, fleet, blip

Three scenarios of retryhttp's budget tests, run through every library. They run in fake time
(`+"`testing/synctest`"+`): a minute of traffic takes a fraction of a second, and every library's
waits (sleeps and timers) run on the fake clock, so none had to run in real time and no backoff
was shortened. Between runs only the libraries' random jitter differs (and the order in which
goroutines woken at the same instant run); each figure is benchstat's median of %s runs with
its 95 %% confidence interval, which shows how much, and ratio columns are to retryhttp (below
1× means less than retryhttp). The dependency is in memory and takes 10 ms to answer each
attempt. Each call is a GET of a URL of its own, so the dependency knows which attempt of its
call each arrival is: a *retry* below is any attempt after a call's first. The figures come
from the tests TestStorm, TestFleet and TestBlip run at full size (`+"`-scenarios.full`"+`; the
commands are under Reproduce below); `+"`go test`"+` runs quick variants of them that check
retryhttp's figures.

Each library runs as a user gets it: its own default backoff, attempt limit and budget, and no
logging (`+"`bench.Defaults`"+`):

| library | configuration | attempts at most | waits before retries |
|---|---|---:|---|
| retryhttp | `+"`&retryhttp.Transport{Base: base}`"+`: default policy and budget (10 retries of credit, 0.2 earned per success; a retry the credit cannot pay for waits in line) | 4 | full jitter: U(0, 100 ms·2ⁿ), at most 10 s |
| retryhttp-nobudget | the same with `+"`Budget: retryhttp.UnlimitedBudget()`"+`, to show what the budget does | 4 | the same |
| retryablehttp | `+"`retryablehttp.NewClient()`"+` with `+"`Logger: nil`"+` and its base, as a `+"`RoundTripper`"+` | 5 | 1, 2, 4, 8 s (exponential, no jitter) |
| failsafe-go | `+"`failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build())`"+` | 3 | none (Retry-After only) |
| failsafe-go-budget | the same with `+"`.WithBudget(budget.New())`"+`, failsafe-go's retry budget: retries in flight may be 20 %% of the executions in flight, and at least 3; a retry beyond it ends the call with `+"`budget.ErrExceeded`"+` (failsafe-go's bulkhead bounds executions, not retries, so it is not used) | 3 | none |
| rehttp | no defaults at all: retryhttp's default retry conditions, `+"`RetryMaxRetries(3)`"+` and its `+"`ExpJitterDelay(100ms, 10s)`"+` | 4 | full jitter, as retryhttp |
| bare | the base alone: one attempt per call | 1 | – |

In the blip every library's attempt limit is set to 8 (`+"`Policy{MaxAttempts: 8}`"+`,
`+"`RetryMax = 7`"+`, `+"`WithMaxAttempts(8)`"+`, `+"`RetryMaxRetries(7)`"+`); nothing else changes.

- *attempts per call, outage*: the attempts the dependency received during the outage, per call
  started during it (1 without retries).
- *outage calls served*: calls started during the outage that succeeded, their retries reaching
  the dependency after it recovered; *calls after it served*: calls started after the recovery.
- *peak*: the most attempts in any window (100 ms, or 10 ms in the blip), windows sliding from
  arrival to arrival so that no burst is split; with the retries among them and when the window
  starts, in seconds from the outage's start (the first of equally busy windows; before the
  outage, a negative time).
- *longest call*: from its start to its end, retries and waits included.

### Storm: one busy client through a long outage

One client (one RoundTripper) sending 200 GETs a second at a steady pace, 20 per 100 ms. The
dependency is healthy for 10 s, answers 503 to every attempt for 60 s, then is healthy again;
the load goes on for 5 s after the recovery, and every call is followed to its end.

`, r.runs)
	r.scenarioTable("Storm", stormCols)
	r.p(`Where the peaks are: the busiest 100 ms of the outage's first second, of the rest of the
outage (and when, in seconds from its start) and of the first second after it, with the retries
among them. The client offers 20 per 100 ms.

`)
	r.peaksTable("Storm")
	r.prose(`Why the peaks are where they are:

- **retryhttp**: the budget starts with 10 retries of credit, and the outage's first failures
  spend it at once: the outage's first second peaks at %s attempts (%s retries). Credit is earned
  only by successes, and the outage has none, so nothing pays for a retry again until the
  dependency is back. %s The retries the credit cannot pay for wait in line while the client's
  first attempts keep failing (each failure is news of the dependency, so no probe goes), each
  until the time its remaining backoff schedule would have taken has passed (at most 0.7 s:
  100 + 200 + 400 ms), its caller then getting the 503: hence %.4f attempts per call and a
  longest call of %.2f s. After the recovery the first success releases the line, in 100 ms
  rounds of at most half the first attempts that succeeded in the round before (10 here), each
  released retry then waiting its own backoff: %s attempts (%s retries) in the busiest 100 ms
  of the first second after it.
- **retryhttp-nobudget** and **rehttp** (the same full jitter): a call's three retries all come
  within 0.7 s of its first attempt, so from the outage's first second on the dependency gets
  about 4× the offered load, a plateau with random bumps; the peak is the largest bump, anywhere
  in the outage.
- **retryablehttp**: no jitter, so a call's attempts come exactly 0, 1, 3, 7 and 15 s after its
  start. The load steps up to 2× at 1 s, 3× at 3 s, 4× at 7 s and 5× from 15 s on (%s per
  100 ms), and stays there: its peak is the first window of that plateau, not a burst. The
  retries of the outage's last 15 s reach the dependency after the recovery, still 5× the load
  at first; they serve %.1f %% of the outage's calls, after up to %.2f s.
- **failsafe-go**: no delay, so its three attempts go back to back: 3× the offered load from the
  outage's first instant to its end (%s per 100 ms); the peak is the outage's first window.
- **failsafe-go-budget**: at 200 calls a second of 10 to 30 ms each, a handful of calls are in
  flight, so the floor of 3 retries in flight rules: %.2f attempts per call, a plateau from the
  outage's start.

### Fleet: many quiet clients through an outage

100 clients, each a RoundTripper of its own (so a budget of its own, where the library has
one), each sending 12 GETs a second (1,200 a second in all, 120 per 100 ms; the clients' phases
spread evenly). The dependency is down from the first call for 30 s, then healthy for 5 s;
every call is followed to its end.

`, count(v("Storm", "retryhttp", "start-peak/100ms")), count(v("Storm", "retryhttp", "start-peak-retries")),
		r.echo("Storm", 20),
		v("Storm", "retryhttp", "attempts/call"), v("Storm", "retryhttp", "longest-call-sec"),
		count(v("Storm", "retryhttp", "recovery-peak/100ms")), count(v("Storm", "retryhttp", "recovery-peak-retries")),
		count(v("Storm", "retryablehttp", "rest-peak/100ms")),
		v("Storm", "retryablehttp", "outage-success-%"), v("Storm", "retryablehttp", "longest-call-sec"),
		count(v("Storm", "failsafe-go", "rest-peak/100ms")),
		v("Storm", "failsafe-go-budget", "attempts/call"))
	r.scenarioTable("Fleet", stormCols)
	r.p("Where the peaks are (the fleet offers 120 per 100 ms):\n\n")
	r.peaksTable("Fleet")
	r.prose(`Each retryhttp client spends its 10 retries of credit when the outage begins and earns none
back during it: about 1 + 10/360 attempts per call for a client's 360 calls, %.4f measured. A
hundred budgets spend their credit together, though: the outage's first second peaks at %s
attempts per 100 ms (%s retries), against 120 offered. %s After the recovery each client
releases its own line, about 1 retry per 100 ms round (the least a round releases after a long
outage: half of a quiet client's first attempts is less), so the fleet's releases add up: %s attempts (%s retries) in
the busiest 100 ms of the first second after it. The libraries without a budget keep their single client's multiple of the
load, now from a hundred clients. So does failsafe-go's budget: it counts each client's retries
in flight, at least 3 allowed, and a client sending 12 calls a second never has 3 in flight, so
failsafe-go-budget does exactly what failsafe-go does.

### Blip: a crowd of callers through a short outage

1,000 callers of one RoundTripper start at once; the dependency is down for 1 s, then serves 20
attempts per 10 ms and answers 503 to the ones beyond. Every library makes at most 8 attempts.
*peak per 10 ms once up* is the busiest 10 ms from the moment the dependency is back (its time
counted from then); *last caller served at* is the time from the start until the last caller
that was served got its response, which is the time until all were served when *callers
served* is 100 %%; *last call ended at* includes the callers that gave up.

`, v("Fleet", "retryhttp", "attempts/call"),
		count(v("Fleet", "retryhttp", "start-peak/100ms")), count(v("Fleet", "retryhttp", "start-peak-retries")),
		r.echo("Fleet", 120),
		count(v("Fleet", "retryhttp", "recovery-peak/100ms")), count(v("Fleet", "retryhttp", "recovery-peak-retries")))
	r.scenarioTable("Blip", blipCols)
	r.prose(`- **retryhttp**: its credit lets 10 retries go while the dependency is down; the other
  callers' retries wait in line. After a second without news the head of the line goes as a
  probe; the dependency being back by then, its success starts a recovery, 2 releases in the first
  100 ms and then twice the retries that succeeded in the round before while none failed, half
  once some did: %.1f %% served with %.2f attempts per caller, at most %s attempts per 10 ms
  against the 20 served, all by %.2f s.
- **retryhttp-nobudget** and **rehttp**: full jitter spreads each round of retries over a window
  that doubles, so the crowd thins out and every caller is served, at about 6 attempts per
  caller (%.2f and %.2f), by %.2f s and %.2f s.
- **retryablehttp**: without jitter all the callers retry at the same instants (about 1, 3, 7,
  15, 31, 61 and 91 s after the start): %s attempts in one 10 ms, of which 20 are served each time;
  %.1f %% served after 8 attempts, the last at %.2f s.
- **failsafe-go**: no delay, so its 8 attempts all come within the second the dependency is
  down: none served.
- **failsafe-go-budget**: its budget lets retries be in flight up to 20 %% of the executions in
  flight; the crowd's first retries fill it at once, and every call whose retry finds it full
  ends at once with `+"`budget.ErrExceeded`"+`. The retries let through come back within the
  second the dependency is down: %.2f attempts per caller, none served.

`, v("Blip", "retryhttp", "success-%"), v("Blip", "retryhttp", "attempts/caller"),
		count(v("Blip", "retryhttp", "peak/10ms")), v("Blip", "retryhttp", "last-served-sec"),
		v("Blip", "retryhttp-nobudget", "attempts/caller"), v("Blip", "rehttp", "attempts/caller"),
		v("Blip", "retryhttp-nobudget", "last-served-sec"), v("Blip", "rehttp", "last-served-sec"),
		count(v("Blip", "retryablehttp", "peak/10ms")), v("Blip", "retryablehttp", "success-%"),
		v("Blip", "retryablehttp", "last-served-sec"),
		v("Blip", "failsafe-go-budget", "attempts/caller"))
}

// echo says whether retryhttp's budget let retries through in the outage
// after its first second: a time-windowed budget would, one window after
// the onset, as the retries it paid for then leave its window.
func (r *report) echo(bench string, offered int) string {
	n := r.value(r.scen, bench, "retryhttp", "rest-peak/100ms")
	k := r.value(r.scen, bench, "retryhttp", "rest-peak-retries")
	if k == 0 {
		return fmt.Sprintf("After the outage's first second the busiest 100 ms holds %s attempts, none a retry: "+
			"the first attempts alone (%d offered). No burst echoes the onset one budget window later, as "+
			"with a budget that counts retries over a sliding window of time (retryhttp's former budget "+
			"had 10 s), whose room comes back at once when the retries spent at the onset leave the window: "+
			"this budget has no window.", count(n), offered)
	}
	return fmt.Sprintf("After the outage's first second the busiest 100 ms holds %s attempts, %s of them retries "+
		"(%d first attempts offered): the budget still let retries through during the outage.", count(n), count(k), offered)
}

// prose writes text formatted with args as Markdown paragraphs and list
// items, each reflowed to lines of at most 96 characters.
func (r *report) prose(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	for _, block := range strings.Split(strings.TrimSpace(text), "\n\n") {
		var items []string
		for _, line := range strings.Split(block, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "- ") || len(items) == 0 {
				items = append(items, line)
			} else {
				items[len(items)-1] += " " + line
			}
		}
		for _, item := range items {
			indent := ""
			if strings.HasPrefix(item, "- ") {
				indent = "  "
			}
			r.p("%s\n", wrap(item, 96, indent))
		}
		r.p("\n")
	}
}

// wrap breaks s at spaces into lines of at most width characters (longer
// words stay whole), indenting every line but the first.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
		case n+1+utf8.RuneCountInString(w) > width:
			b.WriteString("\n" + indent)
			n = len(indent)
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += utf8.RuneCountInString(w)
	}
	return b.String()
}
