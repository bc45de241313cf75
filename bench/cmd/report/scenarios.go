package main

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/retryhttp/retryhttp"
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
attempt, with the realistic answers of the measured paths (a 503 with a body too; see Answers
above), each read to its end by the caller: the scenarios count attempts and calls served,
which the content of an answer does not change, so they run on realistic answers only. Each call is a GET of a URL of its own, so the dependency knows which attempt of its
call each arrival is: a *retry* below is any attempt after a call's first. The figures come
from the tests TestStorm, TestFleet and TestBlip run at full size (`+"`-scenarios.full`"+`; the
commands are under Reproduce below); `+"`go test`"+` runs quick variants of them that check
retryhttp's figures.

Each library runs as a user gets it: its own default backoff, attempt limit and budget, and no
logging (`+"`bench.Defaults`"+`):

| library | configuration | attempts at most | waits before retries |
|---|---|---:|---|
| retryhttp | `+"`&retryhttp.Transport{Base: base}`"+`: default policy and budget (a request alone gets its policy, each retry paid by the host's credit, %d retries held, %.2g earned per success and all of it refilled in 10 s; a retry waits in the host's line while other requests are in flight and another failed the host since its last success, 10 s at most without a deadline: the host's successes let the line go as a ramp and pay one per success from the credit; 100 to 200 ms without news lets one go as a probe, then twice that, up to 5 s before the jitter) | 4 | full jitter: U(0, 100 ms·2ⁿ), at most 10 s |
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

`, r.runs, retryhttp.DefaultBudgetCredit, retryhttp.DefaultBudgetRatio)
	r.scenarioTable("Storm", stormCols)
	r.p(`Where the peaks are: the busiest 100 ms of the outage's first second, of the rest of the
outage (and when, in seconds from its start) and of the first second after it, with the retries
among them. The client offers 20 per 100 ms.

`)
	r.peaksTable("Storm")
	r.prose(`Why the peaks are where they are:

- **retryhttp**: the client's calls are answered at once, so the outage's first call to fail is
  alone, and its retries go at its backoff, paid by the credit. From the next call on, that call
  is still in flight, waiting, and its failures are evidence: each later call's retry waits in
  the host's line for news of it instead of going. A probe would go after 100 to 200 ms without
  news, but %s A call
  without a deadline waits in line at most 10 s, then returns its last failure, the 503: hence
  %.4f attempts per call and a longest call of %.2f s. The dependency's first success after the
  outage starts a ramp of 100 ms rounds. The outage was long (over 5 s without a success), so
  the first round lets 1 retry go, each next one twice the retries that succeeded in the round
  before but no more than half the first attempts that succeeded in it (10 of the 20 offered),
  and no credit pays for more: %s attempts (%s retries) in the busiest 100 ms of the first
  second after it. A released retry goes at once, its wait in line having outlasted its
  backoff. The line holds the calls of the outage's last 10 s, oldest first, and those whose
  10 s end before the ramp reaches them get their 503: %.1f %% of the outage's calls served.
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

`, r.inOutage("Storm", "the client's", "5 ms", 20),
		v("Storm", "retryhttp", "attempts/call"), v("Storm", "retryhttp", "longest-call-sec"),
		count(v("Storm", "retryhttp", "recovery-peak/100ms")), count(v("Storm", "retryhttp", "recovery-peak-retries")),
		v("Storm", "retryhttp", "outage-success-%"),
		count(v("Storm", "retryablehttp", "rest-peak/100ms")),
		v("Storm", "retryablehttp", "outage-success-%"), v("Storm", "retryablehttp", "longest-call-sec"),
		count(v("Storm", "failsafe-go", "rest-peak/100ms")),
		v("Storm", "failsafe-go-budget", "attempts/call"))
	r.scenarioTable("Fleet", stormCols)
	r.p("Where the peaks are (the fleet offers 120 per 100 ms):\n\n")
	r.peaksTable("Fleet")
	r.prose(`Each retryhttp client's first call to fail in the outage is alone (its calls are answered at
once, 83 ms apart), and its retries go at its backoff, paid by its credit: each client's first
retry comes within 100 ms of its failure, and the hundred clients fail within 83 ms of each
other. From a client's next call on, the first is still in flight and its failures are
evidence: the later calls' retries wait in the client's line for news of the host. A probe
would go after 100 to 200 ms without news, but %s Over the outage, %.4f attempts per call. A
call waits in line at most 10 s, then returns its last failure, the 503 (longest call %.2f s).
After the recovery each client lets its own line go as a ramp, after a long outage: 1 retry per
100 ms round, the least a round lets go, since half of a quiet client's 1 or 2 first attempts
in a round is less, and no credit pays for more; the fleet's releases add up to about one per
client per round: %s attempts (%s retries) in the busiest 100 ms of the first second after it.
A client's line holds the calls of the outage's last 10 s, oldest first, and lets one go per
round for as long as they may wait: %.1f %% of the outage's calls served, about %.0f of each
client's 360. The libraries without a budget keep their single client's multiple of the
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

`, r.inOutage("Fleet", "a client's", "83 ms (12 a second)", 120),
		v("Fleet", "retryhttp", "attempts/call"), v("Fleet", "retryhttp", "longest-call-sec"),
		count(v("Fleet", "retryhttp", "recovery-peak/100ms")), count(v("Fleet", "retryhttp", "recovery-peak-retries")),
		v("Fleet", "retryhttp", "outage-success-%"), 3.6*v("Fleet", "retryhttp", "outage-success-%"))
	r.scenarioTable("Blip", blipCols)
	r.prose(`- **retryhttp**: the crowd's first attempts all fail together; the first few to fail, before
  any other did, retry at their backoff, paid by the credit, and every later retry waits in the
  host's line, on the evidence of the others' failures. After 100 to
  200 ms without news the first retry in line goes as a probe, and each probe doubles the
  silence the next one needs (200 to 400 ms, then 400 to 800 ms, ...): the probes fail while
  the dependency is down, and the first after it is back succeeds (it may come as much as one
  probe's silence later). That success starts a recovery, not a long outage's (the host failed for less than
  5 s): 2 releases in the first 100 ms round, then twice the retries that succeeded in the round
  before while none failed, half once some did, and each success besides lets one more go while
  the credit pays for it (%d retries held, %.2g earned per success). A released retry goes at
  once, its wait in line having outlasted its backoff. The releases grow to the dependency's
  capacity within a few rounds: %.1f %% served with %.2f attempts per caller (its first, the
  retry that served it, and a few more: the probes, and the releases beyond the 20 served per
  10 ms, which fail and wait in line again), at most %s attempts per 10 ms against the 20
  served, all by %.2f s.
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

`, retryhttp.DefaultBudgetCredit, retryhttp.DefaultBudgetRatio,
		v("Blip", "retryhttp", "success-%"), v("Blip", "retryhttp", "attempts/caller"),
		count(v("Blip", "retryhttp", "peak/10ms")), v("Blip", "retryhttp", "last-served-sec"),
		v("Blip", "retryhttp-nobudget", "attempts/caller"), v("Blip", "rehttp", "attempts/caller"),
		v("Blip", "retryhttp-nobudget", "last-served-sec"), v("Blip", "rehttp", "last-served-sec"),
		count(v("Blip", "retryablehttp", "peak/10ms")), v("Blip", "retryablehttp", "success-%"),
		v("Blip", "retryablehttp", "last-served-sec"),
		v("Blip", "failsafe-go-budget", "attempts/caller"))
}

// inOutage says what reached the dependency from retryhttp during the
// outage of bench, whose clients' first attempts fail every gap (who names
// the client: "the client's"), offered first attempts per 100 ms: each
// failure is news of the host, so with a gap under 100 ms no probe goes,
// and the figures say whether any retry went all the same.
func (r *report) inOutage(bench, who, gap string, offered int) string {
	v := func(unit string) float64 { return r.value(r.scen, bench, "retryhttp", unit) }
	start, startK := v("start-peak/100ms"), v("start-peak-retries")
	rest, restK := v("rest-peak/100ms"), v("rest-peak-retries")
	if startK == 0 && restK == 0 && v("attempts/call") < 1.00005 {
		return fmt.Sprintf("%s own first attempts fail every %s, and each failure is news: no probe goes, and no "+
			"retry reaches the dependency during the outage. Its busiest 100 ms hold %s attempts in its first "+
			"second and %s after it, the first attempts alone (%d offered): no burst at the onset, nor later.",
			who, gap, count(start), count(rest), offered)
	}
	return fmt.Sprintf("%s own first attempts fail every %s, and each failure is news. Retries reached the "+
		"dependency during the outage all the same: its busiest 100 ms hold %s attempts (%s retries) in its "+
		"first second and %s (%s retries) after it, against %d first attempts offered.",
		who, gap, count(start), count(startK), count(rest), count(restK), offered)
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
