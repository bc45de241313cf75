package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
)

// small is a herd small enough to simulate in a few milliseconds that
// still overwhelms the dependency when it comes back.
func small() scenario {
	return scenario{
		Clients:     200,
		Spread:      10 * time.Millisecond,
		Outage:      500 * time.Millisecond,
		Capacity:    5,
		MaxAttempts: 8,
		Transports:  1,
		Seed:        7,
	}
}

// backoffNames are the backoffs every budget runs with.
var backoffNames = []string{"no jitter", "full jitter", "equal jitter", "decorrelated"}

// byName runs every strategy on sc and returns the results by name.
func byName(sc scenario) map[string]*result {
	out := map[string]*result{}
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		out[s.Name] = simulate(sc, s)
	}
	return out
}

func TestEachBackoffRunsWithEachBudget(t *testing.T) {
	var names []string
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		names = append(names, s.Name)
	}
	var want []string
	for _, b := range backoffNames {
		want = append(want, b, b+" + retryhttp budget")
	}
	assert.Equal(t, want, names)
}

func TestSameSeedSameRunOtherSeedOtherRun(t *testing.T) {
	sc := small()
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		assert.Equal(t, simulate(sc, s), simulate(sc, s), "%s: a seed must give one result", s.Name)
	}

	other := sc
	other.Seed++
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		if s.BackoffName == "full jitter" {
			assert.False(t, reflect.DeepEqual(simulate(sc, s).Served, simulate(other, s).Served), "%s: another seed must draw other delays", s.Name)
		}
	}
}

func TestTheProgramPrintsTheSameForASeed(t *testing.T) {
	dir := t.TempDir()
	outputs := make([]string, 2)
	svgs := make([][]byte, 2)
	for i := range outputs {
		var buf bytes.Buffer
		path := filepath.Join(dir, "herd.svg")
		require.NoError(t, run(&buf, small(), 100*time.Millisecond, 10*time.Second, path))
		outputs[i] = strings.ReplaceAll(buf.String(), path, "FILE")
		var err error
		svgs[i], err = os.ReadFile(path)
		require.NoError(t, err)
	}
	assert.Equal(t, outputs[0], outputs[1])
	assert.Equal(t, svgs[0], svgs[1])
	for _, b := range backoffNames {
		assert.Regexp(t, "\n"+b+", one row per [0-9.]+m?s:\n +no budget +retryhttp budget\n", outputs[0], "histograms per backoff")
	}
}

// The terminal output fits 100 columns, for the default scenario as for
// the small one.
func TestTheOutputFits100Columns(t *testing.T) {
	def := scenario{Clients: 1000, Spread: 10 * time.Millisecond, Outage: time.Second, Capacity: 20,
		MaxAttempts: 8, Transports: 1, Seed: 1}
	for name, sc := range map[string]scenario{"default": def, "small": small()} {
		var buf bytes.Buffer
		require.NoError(t, run(&buf, sc, defaultBase, defaultCap, ""))
		for i, line := range strings.Split(buf.String(), "\n") {
			assert.LessOrEqual(t, len([]rune(line)), 100, "%s: line %d: %q", name, i+1, line)
			assert.Equal(t, strings.TrimRight(line, " "), line, "%s: line %d ends in spaces", name, i+1)
		}
	}
}

// The summary table prints each result's figures on its row.
func TestTheTableShowsEachResult(t *testing.T) {
	sc := small()
	var results []*result
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		results = append(results, simulate(sc, s))
	}
	var buf bytes.Buffer
	writeTable(&buf, sc, results)
	for _, r := range results {
		done := "never"
		if r.Unfinished() == 0 {
			done = seconds(r.LastSuccess)
		}
		row := regexp.QuoteMeta(r.Strategy.BackoffName) + ` +` + r.Strategy.Budget.short() +
			` +` + strconv.Itoa(r.Peak(sc.Outage)) + ` +` + strconv.Itoa(r.Attempts) + ` +` +
			strconv.FormatFloat(r.PerClient(), 'f', 2, 64) + ` +` + regexp.QuoteMeta(done) + ` +` +
			strconv.Itoa(r.Exhausted) + ` +` + strconv.Itoa(r.BudgetRefusals) + "\n"
		assert.Regexp(t, row, buf.String(), r.Strategy.Name)
	}
}

// A histogram's bar is barWidth long at what the dependency serves in its
// row; a longer one is cut there and marked, and every cell of a column has
// one width.
func TestHistogramBarsAreCutAtCapacity(t *testing.T) {
	const full, capacity = 100, 5
	width := -1
	for _, b := range []bucket{
		{Served: 50, Failed: 50, Peak: 5},  // exactly what is served: not cut
		{Served: 25, Failed: 75, Peak: 5},  // both parts round up (3.5 and 10.5)
		{Served: 0, Failed: 101, Peak: 30}, // over: cut
		{Served: 100, Failed: 900, Peak: 1000},
		{Served: 1, Failed: 0, Peak: 1}, // at least a character
		{},
	} {
		cell := histCell(b, full, 4, 6, capacity)
		bar := strings.TrimRight(strings.Fields(cell + " x")[0], "»")
		n := b.Served + b.Failed
		switch {
		case n > full:
			assert.Contains(t, cell, "»", "%+v", b)
			assert.Equal(t, barWidth, len([]rune(bar)), "%+v", b)
		case n > 0:
			assert.NotContains(t, cell, "»", "%+v", b)
			assert.LessOrEqual(t, len([]rune(bar)), barWidth, "%+v", b)
			assert.Equal(t, chars(b.Served, full), strings.Count(bar, "█"), "%+v", b)
		}
		if width >= 0 {
			assert.Equal(t, width, len([]rune(cell)), "%+v: one width for every cell", b)
		}
		width = len([]rune(cell))
	}
}

func TestWithoutJitterTheHerdHitsInLockstep(t *testing.T) {
	r := byName(small())
	noJitter, full := r["no jitter"].Peak(small().Outage), r["full jitter"].Peak(small().Outage)

	// Every client that is still failing comes back in the same 10 ms.
	assert.Greater(t, noJitter, 150, "no jitter: peak once the dependency is back")
	assert.Less(t, full, 30, "full jitter: peak once the dependency is back")
	assert.Greater(t, noJitter, 8*full)
	assert.Positive(t, r["no jitter"].Exhausted, "a lockstep herd drains at capacity per volley, too slowly for 8 attempts")
	for _, name := range []string{"full jitter", "equal jitter", "decorrelated"} {
		assert.Zero(t, r[name].Unfinished(), "%s serves every client within 8 attempts", name)
	}
}

// Without a budget, jitter spreads the herd but not its load: each client
// makes several attempts, most of them while the dependency is down.
func TestWithoutABudgetEachClientMakesManyAttempts(t *testing.T) {
	sc := small()
	r := byName(sc)
	for _, name := range backoffNames {
		assert.GreaterOrEqual(t, r[name].PerClient(), 3.5, name)
		assert.Greater(t, r[name].WhileDown(sc.Outage), 2*sc.Clients, "%s: attempts while down", name)
	}
}

// The rules of retryhttp's default Budget that the figures of the tests
// below are derived from. The clients of one Transport share its budget,
// and the dependency is one host: one credit, one line. The credit holds
// 10 retries and starts full; each retry it pays for spends one, each
// success earns 0.55, and it refills by itself in 10 s (a tenth of it a
// second). A client's request is in flight from its first attempt until
// it ends, its waits included. When an attempt fails (here a 503 without
// Retry-After), its retry goes at its backoff, paid by the credit, unless
// another request is in flight and another client failed since the
// dependency's last success (in the last 10 s): then it waits in the line,
// as it does when the credit cannot pay for it and another request is in
// flight (alone, it would be refused). A probe goes from the line once the
// dependency has been silent (no attempt failed or succeeded, no probe
// went) for the probe's pace stretched by a jitter: the pace is 100 ms,
// doubling with each probe up to 5 s (a success resets it), and the
// stretch a draw in [1, 2) from the Transport's random source (drawn when
// the line forms, at each probe and at each success), so that the silence
// lies in [pace, 2*pace), and clients whose lines formed together do not
// probe together. The dependency's first success lets the line go as a
// ramp: rounds of 100 ms, 2 retries in the first (at its start and 50 ms
// later), then twice the retries that succeeded in the round before if no
// attempt failed, or half of them if some did, spread evenly over the
// round, until a round in which no retry succeeds; and each success lets
// one more go while the credit pays for it. (After an outage of over 5 s
// the ramp is gentler; these outages are shorter.) A retry let go waits
// what is left of its backoff, counted from its failure. A request without
// a deadline waits in line until 10 s after its first wait (or its backoff
// schedule, if longer; and a retry waits at least its backoff), and then
// gives up.
const (
	probeAfter    = 100 * time.Millisecond // the pace of a line's first probe
	maxProbeAfter = 5 * time.Second        // the pace at most
	lineWait      = 10 * time.Second       // how long a request without a deadline waits in line, from its first wait
	round         = 100 * time.Millisecond // a round of the ramp
	credit        = defaultCredit          // retries of credit, at the start and at most
)

// pace returns the pace of the k-th probe of a line since the dependency's
// last success (k from 1): 100 ms, doubling with each probe, up to 5 s.
// The probe goes after a silence in [pace(k), 2*pace(k)).
func pace(k int) time.Duration {
	p := probeAfter
	for i := 1; i < k && p < maxProbeAfter; i++ {
		p *= 2
	}
	return min(p, maxProbeAfter)
}

// retryhttp's budget serves every client, at about two attempts each. Only
// the client whose first attempt fails first retries at its backoff, paid
// by the credit: no other client had failed yet. Every other client's
// retry, and that client's next, waits in line: every client waits once at
// least. While the dependency is down the line lets only probes through:
// one after at least 100 ms of silence, the next at least 200 ms after
// that one, a third at least 400 ms after that: past the 500 ms outage (the
// jitter only stretches these). So while it is down the dependency sees the
// first attempts, the paid retry and at most 2 probes, less than the first
// attempts and the credit, which is what failing fast (failing each retry
// the credit cannot pay for) would cost it.
func TestTheBudgetServesEveryClientWithFewAttempts(t *testing.T) {
	sc := small()
	probes := 0 // the probes let go before the outage ends, at the earliest
	for at := pace(1); at < sc.Outage; at += pace(probes + 1) {
		probes++
	}
	require.Equal(t, 2, probes)
	r := byName(sc)
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		assert.Equal(t, sc.Clients, b.Succeeded, name)
		assert.LessOrEqual(t, b.PerClient(), 2.2, name)
		assert.Less(t, b.PerClient(), r[name].PerClient()/1.5, "%s: fewer attempts than without a budget", name)
		assert.GreaterOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+1, "%s: while down, the first attempts and the paid retry", name)
		assert.LessOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+1+probes, "%s: while down, the line lets through 2 probes at most", name)
		assert.LessOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+credit,
			"%s: while down, the line costs the dependency no more than failing fast", name)
		assert.GreaterOrEqual(t, b.BudgetWaits, sc.Clients, "%s: every client waited in line", name)
	}
}

// An arrival is a retry at the dependency: when, its attempt's number, and
// whether it was served (a request ends with its first served attempt).
type arrival struct {
	at      time.Duration
	attempt int
	served  bool
}

// retryArrivals returns the retries of r, every attempt but the first
// ones, in time order.
func retryArrivals(r *result) []arrival {
	var out []arrival
	for _, c := range r.Clients {
		for i := 1; i < len(c.Arrivals); i++ {
			out = append(out, arrival{at: c.Arrivals[i], attempt: i + 1, served: c.End == served && i == len(c.Arrivals)-1})
		}
	}
	slices.SortStableFunc(out, func(a, b arrival) int { return int(a.at - b.at) })
	return out
}

// A tally is what the arrivals at one instant came to.
type tally struct{ Served, Failed int }

// byInstant counts the arrivals in [from, to) by instant.
func byInstant(as []arrival, from, to time.Duration) map[time.Duration]tally {
	out := map[time.Duration]tally{}
	for _, a := range as {
		if a.at >= from && a.at < to {
			n := out[a.at]
			if a.served {
				n.Served++
			} else {
				n.Failed++
			}
			out[a.at] = n
		}
	}
	return out
}

// The line is let go as fast as the dependency answers, not as a herd.
//
// While the dependency is down, two kinds of retry reach it. The client
// whose first attempt fails first has no evidence yet (no other client has
// failed): the credit pays for its retry, sent at its backoff (for no
// jitter, 100 ms after its first attempt). Every other retry waits in line,
// and so does that one's next. The line lets only probes through, the k-th
// after a silence in [pace(k), 2*pace(k)) from the last news: for the
// first, the paid retry's failure (or the last first attempt's, just
// before 10 ms, if later), for the next, the previous probe. The first
// probe sent once the outage is over is the dependency's first answer, at
// T: the second probe if it comes after 500 ms (it comes 300 to 600 ms
// after the paid retry), else the third. With this seed, the second, for
// every backoff (each draws as many samples, so the stretches are the
// same): for no jitter, at 575 ms. The first retry of the three backoffs
// but decorrelated is no longer than the first probe's silence, so a probe
// is sent as soon as it is let go; decorrelated's (up to 300 ms) may hold
// it back, which delays the next probes' silences too, so for it the
// silences are only bounded below.
//
// T starts a recovery, in rounds of 100 ms from T. The first round lets 2
// retries go, at T and T+50 ms. Each has waited in line longer than its
// backoff, so it is sent at once, and its success lets one more go at the
// same instant, paid by the credit, whose success lets one more go...: a
// chain, which the dependency ends once it has served its 5 of the 10 ms,
// by failing the next. So at T the dependency serves 5 (the probe and 4
// retries) and fails 1; at T+50 ms, 5 and 1; between, it sees nothing. A
// success is news that the dependency answers: the failure that ends a
// chain has no other failure since for evidence, so the credit pays for
// its retry, sent at its own backoff (for no jitter, 200 ms later), not in
// line.
//
// The credit is full at T: only the paid retry spent it, 475 ms before (a
// refill of 0.475), and the probe's success earns 0.55. T's chain pays for
// 4 retries and the failed one's, and earns 0.55 for 3 of its successes
// (the first two find the credit full): 6.65 retries are left. A later
// chain that meets the capacity pays for 6 and earns 0.55 for 5 successes:
// it costs 3.25, less the refill (a retry a second): 3.45 retries are left
// after T+50 ms's.
//
// The second round lets go half the 9 retries that succeeded in the first
// (the probe's success started the recovery: it does not count), as
// attempts failed: 4, at T+100, T+125, T+150 and T+175 ms. T+100 ms's
// chain meets the capacity and leaves 0.25; the retry let go at T+125 ms
// earns 0.55, too little to let one more go: 1 served; at T+150 ms, with
// the refill, 2; at T+175 ms, 3. (The first round's failed requests, whose
// retries go at their own backoff, come back later, each success letting
// one more go.) From there each round lets go twice the retries that
// succeeded in the round before if none failed, half of them if some did,
// spread evenly over the round: the test counts them from the arrivals, as
// the line does, through the fifth round. (Without jitter, the retry paid
// at its 200 ms backoff comes back exactly as the third round starts: its
// outcome counts in the third.)
// Each retry a round lets go is a first retry, sent at once; any other
// instant of the round is a later retry's (paid at its backoff, or let go
// with its backoff still running), with what its success lets go.
//
// So no 10 ms slot sees more than twice what the dependency serves
// (without a budget, up to 40 times), and 200 ms after the first answer
// most of the line still waits (a herd would let it all go at once).
func TestTheBudgetLetsTheLineGoAsARamp(t *testing.T) {
	sc := small()
	r := byName(sc)
	// The bounds of each backoff's first and second waits, the second
	// bound excluded (decorrelated's second: up to 3 times its first).
	waits := map[string][2][2]time.Duration{
		"no jitter":    {{100 * time.Millisecond, 100*time.Millisecond + 1}, {200 * time.Millisecond, 200*time.Millisecond + 1}},
		"full jitter":  {{0, 100 * time.Millisecond}, {0, 200 * time.Millisecond}},
		"equal jitter": {{50 * time.Millisecond, 100 * time.Millisecond}, {100 * time.Millisecond, 200 * time.Millisecond}},
		"decorrelated": {{100 * time.Millisecond, 300 * time.Millisecond}, {100 * time.Millisecond, 900 * time.Millisecond}},
	}
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		retries := retryArrivals(b)

		// The paid retry: the first client's, at its backoff, and the first of all.
		first, lastFirst := 0, time.Duration(0) // the client that failed first; the last first attempt
		for c, run := range b.Clients {
			if run.Arrivals[0] < b.Clients[first].Arrivals[0] {
				first = c
			}
			lastFirst = max(lastFirst, run.Arrivals[0])
		}
		require.Greater(t, len(b.Clients[first].Arrivals), 1, name)
		paid := b.Clients[first].Arrivals[1]
		require.Equal(t, paid, retries[0].at, "%s: the first retry is the paid one", name)
		wait := paid - b.Clients[first].Arrivals[0]
		assert.GreaterOrEqual(t, wait, waits[name][0][0], "%s: the paid retry goes at its backoff", name)
		assert.Less(t, wait, waits[name][0][1], "%s: the paid retry goes at its backoff", name)

		// The probes, and T.
		news := max(lastFirst, paid)
		var probes []time.Duration // the retries sent while the dependency is down, then T
		for _, a := range retries[1:] {
			probes = append(probes, a.at)
			if a.at >= sc.Outage {
				break
			}
		}
		answer := probes[len(probes)-1]
		require.GreaterOrEqual(t, answer, sc.Outage, name)
		assert.Contains(t, []int{2, 3}, len(probes), "%s: the first answer is the second or third probe", name)
		assert.Equal(t, sc.Clients+1+len(probes)-1, b.WhileDown(sc.Outage),
			"%s: while down, the first attempts, the paid retry and the probes", name)
		jittered := false
		for i, at := range probes {
			k := i + 1
			assert.GreaterOrEqual(t, at-news, pace(k), "%s: probe %d's silence", name, k)
			if name != "decorrelated" {
				assert.Less(t, at-news, 2*pace(k), "%s: probe %d's silence", name, k)
			}
			jittered = jittered || at-news > pace(k)+slot
			news = at
		}
		assert.True(t, jittered, "%s: the probes' silences are stretched", name)
		if name == "no jitter" {
			assert.Equal(t, b.Clients[first].Arrivals[0]+100*time.Millisecond, paid, "%s: the paid retry", name)
			assert.Len(t, probes, 2, "%s: with this seed, the second probe answers", name)
			assert.Equal(t, 570*time.Millisecond, answer.Truncate(slot), "%s: T", name)
		}
		require.GreaterOrEqual(t, answer-paid, 450*time.Millisecond, "%s: the credit is full at T", name)

		// The first round, and the retries of its failures, paid at their backoff.
		ms := time.Millisecond
		assert.Equal(t, map[time.Duration]tally{answer: {5, 1}, answer + 50*ms: {5, 1}},
			byInstant(retries, answer, answer+round), "%s: the first round's chains", name)
		failedFirst := 0
		for c, run := range b.Clients {
			for i, at := range run.Arrivals {
				if at >= answer && at < answer+round && i+1 < len(run.Arrivals) {
					failedFirst++
					wait := run.Arrivals[i+1] - at
					assert.GreaterOrEqual(t, wait, waits[name][1][0], "%s: client %d's paid retry goes at its backoff", name, c)
					assert.Less(t, wait, waits[name][1][1], "%s: client %d's paid retry goes at its backoff", name, c)
				}
			}
		}
		assert.Equal(t, 2, failedFirst, "%s: the first round's failed requests retry", name)

		// Each round from the second lets go what the round before allows.
		var lets []int // the retries each round from the second lets go
		for k := 1; k < 5; k++ {
			start := answer + time.Duration(k)*round
			succ, fail := 0, 0
			for _, n := range byInstant(retries, start-round, start) {
				succ, fail = succ+n.Served, fail+n.Failed
			}
			if k == 1 {
				succ-- // the probe's success started the recovery
			}
			allowed := 2 * succ
			if fail > 0 {
				allowed = max(succ/2, 1)
			}
			lets = append(lets, allowed)
			ramp := map[time.Duration]bool{}
			for i := range allowed {
				ramp[start+time.Duration(int64(round)*int64(i)/int64(allowed))] = true
			}
			later := map[time.Duration]bool{} // the instants of later retries
			for _, a := range retries {
				if a.at >= start && a.at < start+round && a.attempt > 2 {
					later[a.at] = true
				}
			}
			got := byInstant(retries, start, start+round)
			for at := range ramp {
				assert.Contains(t, got, at, "%s: round %d lets a retry go at T+%v", name, k+1, at-answer)
			}
			for at := range got {
				assert.True(t, ramp[at] || later[at], "%s: round %d: arrivals at T+%v", name, k+1, at-answer)
			}
			if k == 1 {
				ramps := map[time.Duration]tally{}
				for at := range ramp {
					ramps[at] = got[at]
				}
				assert.Equal(t, map[time.Duration]tally{answer + 100*ms: {5, 1}, answer + 125*ms: {1, 0}, answer + 150*ms: {2, 0}, answer + 175*ms: {3, 0}},
					ramps, "%s: the second round's chains", name)
			}
		}
		assert.Equal(t, 4, lets[0], "%s: the retries the second round lets go", name)

		// Not a herd.
		slotT := int(answer / slot)
		require.Less(t, slotT+int(2*round/slot), len(b.Served), name)
		assert.LessOrEqual(t, b.Peak(sc.Outage), 2*sc.Capacity, name)
		assert.Positive(t, b.InLine[slotT], "%s: retries still waited when the recovery began", name)
		assert.Greater(t, 2*b.InLine[slotT+int(2*round/slot)], b.InLine[slotT],
			"%s: 200 ms into the recovery, most of the line still waits", name)
	}
}

// A budget per client (each client its own Transport) leaves each client
// its policy. Alone, a client has no evidence from others (no other
// request is in flight on its budget), and its credit, 10 retries, pays
// for all its retries (7, with 8 attempts): each retry goes at its backoff,
// and none waits in line. So each run is the run without a budget, attempt
// for attempt: the same arrivals, outcomes and draws, in this herd and in
// the program's (1000 clients). Such budgets do nothing against a herd
// (without jitter, it hits in lockstep as without a budget): that takes a
// budget the clients share, whose line holds the retries of each client on
// the evidence of the others' failures.
func TestABudgetPerClientLeavesEachClientItsPolicy(t *testing.T) {
	def := scenario{Clients: 1000, Spread: 10 * time.Millisecond, Outage: time.Second, Capacity: 20,
		MaxAttempts: 8, Seed: 1}
	for scName, sc := range map[string]scenario{"small": small(), "the program's": def} {
		require.LessOrEqual(t, sc.MaxAttempts-1, credit, "%s herd: the credit pays for every retry", scName)
		sc.Transports = sc.Clients // each client its own Transport
		r := byName(sc)
		for _, name := range backoffNames {
			none, own := r[name], r[name+" + "+inLine.String()]
			assert.Zero(t, own.BudgetWaits, "%s herd, %s: no retry waited", scName, name)
			assert.Zero(t, own.BudgetRefusals, "%s herd, %s: no retry denied", scName, name)
			same := *own
			same.Strategy = none.Strategy
			assert.Equal(t, none, &same, "%s herd, %s: the run without a budget", scName, name)
		}
		shared := sc
		shared.Transports = 1
		assert.Less(t, 8*simulate(shared, newStrategy("no jitter", noJitter{Base: defaultBase, Cap: defaultCap}, inLine)).Peak(sc.Outage),
			r["no jitter + "+inLine.String()].Peak(sc.Outage), "%s herd: a budget per client holds no lockstep herd back; a shared one does", scName)
	}
}

func TestEnoughAttemptsServeEveryClient(t *testing.T) {
	sc := small()
	// The lockstep herd gets capacity served per volley: clients/capacity
	// volleys after the outage's.
	sc.MaxAttempts = 60
	for name, r := range byName(sc) {
		assert.Zero(t, r.Unfinished(), name)
		assert.Equal(t, sc.Clients, r.Succeeded, name)
	}
}

func TestTheDependencyServesOnlyWhenUpAndWithinCapacity(t *testing.T) {
	sc := small()
	for name, r := range byName(sc) {
		arrivals, served, gaveUp := 0, 0, 0
		for i := range r.Served {
			assert.LessOrEqual(t, r.Served[i], sc.Capacity, "%s: slot %d", name, i)
			if time.Duration(i)*slot < sc.Outage {
				assert.Zero(t, r.Served[i], "%s: slot %d is in the outage", name, i)
			}
			arrivals += r.Served[i] + r.Failed[i]
			served += r.Served[i]
			gaveUp += r.GaveUp[i]
		}
		assert.Equal(t, r.Attempts, arrivals, name)
		assert.Equal(t, r.Succeeded, served, name)
		assert.Equal(t, r.Exhausted+r.BudgetRefusals, gaveUp, name)
		assert.Equal(t, sc.Clients, r.Succeeded+r.Exhausted+r.BudgetRefusals, "%s: every client ends once", name)
		assert.Zero(t, r.InLine[len(r.InLine)-1], "%s: nobody waits at the end", name)
	}
}

func TestOneClientFollowsTheBackoffSchedule(t *testing.T) {
	sc := scenario{Clients: 1, Outage: time.Second, Capacity: 1, MaxAttempts: 8, Transports: 1, Seed: 1}
	r := simulate(sc, newStrategy("no jitter", noJitter{Base: 100 * time.Millisecond, Cap: 10 * time.Second}, noBudget))
	// Attempts at 0, 0.1, 0.3, 0.7 s fail; the one at 1.5 s is served.
	assert.Equal(t, 5, r.Attempts)
	assert.Equal(t, 1500*time.Millisecond, r.LastSuccess)
	for _, i := range []int{0, 10, 30, 70} {
		assert.Equal(t, 1, r.Failed[i], "slot %d", i)
	}
	assert.Equal(t, 1, r.Served[150])
}

// A retry to a dependency that other clients fail waits in line. Once the
// dependency has been silent for the probe's pace stretched by a draw in
// [1, 2), the first retry in line goes as a probe, and then waits what is
// left of its backoff; each probe doubles the pace, up to 5 s. A retry not
// let go gives up at its horizon: without a deadline, 10 s after its
// request's first wait in line, or when its backoff ends, if later.
func TestARetryWaitsInLineForAProbeOrUntilItsHorizon(t *testing.T) {
	// 11 clients at 0 against a dependency that never comes back, one
	// Transport, 3 attempts each, 1.5 s apart; each seed draws other
	// stretches.
	const backoff = 1500 * time.Millisecond
	const clientHorizon = backoff + lineWait // client 0's: it first waits at 1.5 s
	sentAt := map[time.Duration]bool{}       // when client 4 probed, over the seeds
	sixth := map[string]int{}                // seeds, by who sent the sixth probe
	for seed := uint64(1); seed <= 20; seed++ {
		sc := scenario{Clients: 11, Outage: time.Hour, Capacity: 1, MaxAttempts: 3, Transports: 1, Seed: seed}
		r := simulate(sc, newStrategy("constant", retryhttp.Constant(backoff), inLine))

		// The clients start in client order. Client 0's first attempt fails
		// first, with no evidence (no other client has failed): the credit
		// pays for its retry, sent at 1.5 s. Every other client's fails at
		// 0 after it, with client 0's request in flight: on that evidence
		// its retry waits in line from 0, in client order, its horizon at
		// 10 s. The first three probes go after silences in [100, 200),
		// [200, 400) and [400, 800) ms, by 1.4 s (clients 1, 2 and 3),
		// each then waiting the rest of its 1.5 s backoff: all three are
		// sent at 1.5 s with client 0's retry, fail, and wait again,
		// behind clients 4 to 10. Client 0's horizon is 10 s after its
		// first wait: 11.5 s.
		for c := range 4 {
			require.Equal(t, []time.Duration{0, backoff}, r.Clients[c].Arrivals[:2], "seed %d: client %d", seed, c)
		}
		for c := 1; c < 4; c++ {
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0, backoff}, End: budgetDenied}, r.Clients[c], "seed %d: client %d", seed, c)
		}
		// Their failures are news: the next probes (clients 4, 5, then 6,
		// each sent at once, its backoff past) go after silences in
		// [0.8, 1.6) s from 1.5 s, [1.6, 3.2) s and [3.2, 6.4) s from the
		// previous probe: client 4 in [2.3, 3.1) s, client 5 in
		// [3.9, 6.3) s, client 6 in [7.1, 12.7) s, if before 10 s.
		news, probes := backoff, 3
		for c := 4; c < 7 && len(r.Clients[c].Arrivals) > 1; c++ {
			at := r.Clients[c].Arrivals[1]
			probes++
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0, at}, End: budgetDenied}, r.Clients[c], "seed %d: client %d", seed, c)
			assert.GreaterOrEqual(t, at-news, pace(probes), "seed %d: client %d, probe %d", seed, c, probes)
			assert.Less(t, at-news, 2*pace(probes), "seed %d: client %d, probe %d", seed, c, probes)
			assert.Less(t, at, lineWait, "seed %d: client %d", seed, c)
			if c == 4 {
				sentAt[at] = true
			}
			news = at
		}
		require.Contains(t, []int{5, 6}, probes, "seed %d: the probes before 10 s", seed)
		for c := probes + 1; c < sc.Clients; c++ {
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0}, End: budgetDenied}, r.Clients[c], "seed %d: client %d", seed, c)
		}

		// At 10 s the clients still in line give up, but client 6 if it
		// probed after 8.5 s: a retry waits at least its backoff. Client 0,
		// alone in line from then, sends the sixth probe if it comes
		// before its horizon, 11.5 s (its third attempt: it ends, out of
		// attempts); else it gives up then. A seventh would come 5 s after
		// the sixth at least: past every horizon.
		lastEnd := clientHorizon // client 0's end
		end6 := lineWait         // client 6's
		attempts := sc.Clients + 1 + probes
		switch c0 := r.Clients[0]; {
		case probes == 6:
			sixth["client 6"]++
			end6 = max(lineWait, news+backoff)
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0, backoff}, End: budgetDenied}, c0, "seed %d: client 0", seed)
		case len(c0.Arrivals) == 3:
			sixth["client 0"]++
			at := c0.Arrivals[2]
			assert.GreaterOrEqual(t, at-news, pace(6), "seed %d: client 0, probe 6", seed)
			assert.Less(t, at-news, 2*pace(6), "seed %d: client 0, probe 6", seed)
			assert.GreaterOrEqual(t, at, lineWait, "seed %d: client 0, probe 6", seed)
			assert.Less(t, at, clientHorizon, "seed %d: client 0, probe 6", seed)
			assert.Equal(t, exhausted, c0.End, "seed %d: client 0", seed)
			lastEnd, attempts = at, attempts+1
		default:
			sixth["nobody"]++
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0, backoff}, End: budgetDenied}, c0, "seed %d: client 0", seed)
			assert.Greater(t, news+2*pace(6), clientHorizon, "seed %d: the sixth probe could come after 11.5 s", seed)
		}
		gaveUp := make([]int, len(r.GaveUp))
		gaveUp[int(lineWait/slot)] += sc.Clients - 2 // clients 1 to 10 but 6
		gaveUp[int(end6/slot)]++
		gaveUp[int(lastEnd/slot)]++
		assert.Equal(t, lastEnd, r.LastEnd, "seed %d", seed)
		assert.Equal(t, gaveUp, r.GaveUp, "seed %d: when the clients gave up", seed)
		assert.Equal(t, sc.Clients+probes, r.BudgetWaits, "seed %d: each client waited once, and each probe before 10 s again", seed)
		assert.Equal(t, attempts, r.Attempts, "seed %d", seed)
	}
	// The jitter comes from the Transport's random source: other seeds,
	// other probes; and the seeds cover the three endings.
	assert.Greater(t, len(sentAt), 10, "client 4's retry, over 20 seeds")
	assert.Len(t, sixth, 3, "who sent the sixth probe, over 20 seeds: %v", sixth)
}

func TestTheSVGIsWellFormedAndLabelsEveryCutSpike(t *testing.T) {
	sc := small()
	var results []*result
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		results = append(results, simulate(sc, s))
	}
	var buf bytes.Buffer
	writeSVG(&buf, sc, results)
	texts, xs, axisX := svgParts(t, buf.Bytes())
	for _, r := range results {
		assert.Contains(t, texts, r.Strategy.Name, "a panel per strategy")
		assert.Contains(t, texts, panelSummary(sc, r))
	}
	for _, title := range []string{"arrivals per 10 ms", "seconds since the outage began", "clients"} {
		assert.Contains(t, texts, title, "axis title")
	}
	require.NotEmpty(t, axisX)
	assert.Greater(t, xs, axisX[0], "the first column stands off the y axis line")

	// What the budgets did shows: the line of waiting retries in each
	// retryhttp budget panel, the failures so far in each panel with any.
	waits, failures := 0, 0
	for _, r := range results {
		if r.BudgetWaits > 0 {
			waits++
		}
		if r.Unfinished() > 0 {
			failures++
		}
	}
	assert.Equal(t, len(backoffNames), waits)
	// Each series has one line in the legend besides the panels'.
	assert.Equal(t, waits, strings.Count(buf.String(), `stroke="`+colLine+`"`)-1, "retries in line, per budget panel")
	assert.Equal(t, failures, strings.Count(buf.String(), `stroke="`+colGaveUp+`"`)-1, "failed so far, per panel with failures")

	// The no-jitter herd: one panel, whose every spike is one slot over the
	// axis's top, far from the next.
	herd := results[0]
	require.Equal(t, "no jitter", herd.Strategy.Name)
	var want []string
	for i := range herd.Served {
		if n := herd.Served[i] + herd.Failed[i]; n > svgHeadroom*sc.Capacity {
			want = append(want, strconv.Itoa(n))
		}
	}
	require.Len(t, want, 8, "the herd's volleys: 0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3, 12.7 s")
	buf.Reset()
	writeSVG(&buf, sc, []*result{herd})
	svgParts(t, buf.Bytes())
	labels := regexp.MustCompile(`<text class="spike"[^>]*>([0-9]+)</text>`).FindAllStringSubmatch(buf.String(), -1)
	var got []string
	for _, l := range labels {
		got = append(got, l[1])
	}
	assert.Equal(t, want, got, "a label for every cut spike, in time order")
}

// svgParts parses an SVG and returns its texts, the smallest x at which a
// path draws, and the x of each vertical line that starts at a plot's
// baseline (the y axes).
func svgParts(t *testing.T, svg []byte) (texts []string, minPathX float64, axisX []float64) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	minPathX = 1e9
	var in bool
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		switch tok := tok.(type) {
		case xml.StartElement:
			in = tok.Name.Local == "text"
			for _, a := range tok.Attr {
				if tok.Name.Local == "path" && a.Name.Local == "d" {
					for _, m := range regexp.MustCompile(`M([0-9.]+) `).FindAllStringSubmatch(a.Value, -1) {
						x, _ := strconv.ParseFloat(m[1], 64)
						minPathX = min(minPathX, x)
					}
				}
			}
			if tok.Name.Local == "line" {
				v := map[string]string{}
				for _, a := range tok.Attr {
					v[a.Name.Local] = a.Value
				}
				if v["x1"] == v["x2"] && v["stroke"] == colText {
					x, _ := strconv.ParseFloat(v["x1"], 64)
					axisX = append(axisX, x)
				}
			}
		case xml.CharData:
			if in {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			in = false
		}
	}
	return texts, minPathX, axisX
}

func TestBadFlagsAreRefused(t *testing.T) {
	sc := small()
	sc.Clients = 0
	assert.Error(t, run(io.Discard, sc, 100*time.Millisecond, 10*time.Second, ""))
}
