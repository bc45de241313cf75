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
// flight (alone, it would be refused). A retry waits in line only while
// its request's schedule lasts: from its failure, the longest wait its
// backoff can draw, and the longest each retry after it could take (its
// longest wait, and an attempt as long as the last), less what earlier
// waits in line took past their own longest; then, unsent, its request
// gives up. A probe goes from the line once the dependency has been silent
// (no attempt failed or succeeded, no probe went) for the pace of the
// retry at the head of the line, its own longest backoff, stretched by a
// draw in [1, 2) from the Transport's random source (drawn when the line
// forms, at each probe and at each success). The dependency's first
// success lets the line go as a ramp: rounds of 100 ms, 2 retries in the
// first (at its start and 50 ms later), then twice the retries that
// succeeded in the round before if no attempt failed, or half of them if
// some did, spread evenly over the round, until a round in which no retry
// succeeds; while no attempt has failed since the ramp began, each retry's
// success lets two more go in the round besides, and the first failure
// ends the round it comes in (it lets no more go than it has); and each
// success lets one more go while the credit pays for it. Each release
// spends a retry of the credit if it has one. (After an outage of over 5 s
// the ramp is gentler; these outages are shorter.) A retry let go waits
// what is left of its backoff, counted from its failure.
const (
	probeAfter = 100 * time.Millisecond // the pace of a probe for a first retry (the backoffs' base)
	round      = 100 * time.Millisecond // a round of the ramp
)

// retryhttp's budget serves every client, at under two and a half
// attempts each. Only the client whose first attempt fails first retries
// at its backoff, paid by the credit: no other client had failed yet.
// Every other client's retry, and that client's next, waits in line: every
// client waits once at least. Each client's schedule (8 attempts: 12.7 s of
// the longest waits) outlasts the 500 ms outage. While the dependency is
// down the line lets only probes through, each after a silence of at least
// its pace (100 ms for a first retry, more for a later one) since the last
// news, the first since the line formed: the k-th comes k paces after the
// first failures at the earliest, so at most 4 come in the outage (a fifth
// would find it over). So while it is down the dependency sees the first
// attempts, the paid retry and the probes, less than the first attempts
// and the credit, which is what failing fast (failing each retry the
// credit cannot pay for) would cost it.
func TestTheBudgetServesEveryClientWithFewAttempts(t *testing.T) {
	sc := small()
	probes := int((sc.Outage - 1) / probeAfter) // the probes before the outage ends, at most
	require.Equal(t, 4, probes)
	r := byName(sc)
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		assert.Equal(t, sc.Clients, b.Succeeded, name)
		assert.LessOrEqual(t, b.PerClient(), 2.5, name)
		assert.Less(t, b.PerClient(), r[name].PerClient()/1.5, "%s: fewer attempts than without a budget", name)
		assert.GreaterOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+1, "%s: while down, the first attempts and the paid retry", name)
		assert.LessOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+1+probes, "%s: while down, the line lets through 4 probes at most", name)
		assert.LessOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+defaultCredit,
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
// failed): the credit pays for its retry at that failure, and it goes at its
// backoff (for no jitter, 100 ms after its first attempt). Every other retry
// waits in line, and so does that one's next. The line lets only probes
// through, each after a silence of its pace, the longest backoff of the
// first retry at its head (100 ms; decorrelated's, 300 ms), stretched by a
// draw in [1, 2), from the last news: for the first, the failure of the
// paid retry (it goes within that longest backoff, before any probe), for
// the next, the previous probe. A probe is a first retry whose backoff has
// passed: it is sent as it is let go, and spends a retry of the credit. So
// the k-th probe comes within [k, 2k) paces of the paid retry, and at most 4
// come while the dependency is down. The first probe sent once the outage is
// over is the dependency's first answer, at T (with this seed: for no
// jitter, the third probe, at 617 ms; for decorrelated, the first).
//
// T starts a recovery, in rounds of 100 ms from T. The probe's success lets
// the round's first release go at T, sent at once (as every first retry let
// go is: each has waited in line longer than its backoff). Its success lets
// two more go in the round, and, paid by the credit, one more at the same
// instant, whose success does the same...: a chain, which the dependency
// ends once it has served its 5 of the 10 ms, by failing the next. That is
// the recovery's first failure, and it ends the round: the round lets no
// more go than the one release it made. So at T the dependency serves 5
// (the probe and 4 retries) and fails 1, and the first round's other
// arrivals are later retries' (attempt 3 or more), with what their
// successes let go. The chain needs the credit: it pays for the probe, the
// release and 4 retries, and for the failed one's retry, 7 in all, less
// 0.55 for each of its 5 successes: 4.25, which its last payment needs
// before T. The credit holds 10, less the paid retry, less a retry for each
// probe while down (at most 4), plus its refill (a retry a second) since
// the first failure, when the paid retry was paid for (before 10 ms): at
// least 5.49 at T. The failure
// that ends the chain has no other failure since the dependency's last
// success for evidence: the credit pays for its retry, sent at its own
// backoff (for decorrelated, drawn up to 3 times the wait made before it,
// the line's included), not in line.
//
// From the second round on, each round lets go twice the retries that
// succeeded in the round before if no attempt failed in it, half of them
// (at least 1) if some did, spread evenly over the round; nothing more goes
// for a success within a round, since an attempt failed at T. The test
// counts them from the arrivals, as the line does, through the fifth round.
// The second round lets go 2, half the 4 retries that succeeded at T, but
// for full jitter, whose paid retry comes back within the first round with
// this seed (its second wait is under 200 ms): that retry's success starts
// a chain, which the dependency ends likewise (and the credit pays for its
// failure's retry too), so 9 retries succeeded, 2 failed, and the second
// round lets go 4. Each retry a round lets go is a first retry, sent at
// once, while the line holds one (the first retries joined it in the
// outage, ahead of every later retry); any other instant of a round is a
// later retry's (paid at its backoff, or let go with its backoff still
// running), with what its success lets go.
//
// Without jitter, the waits draw no sample, and the instants follow from
// the credit: 10, less the paid retry and 2 probes, plus 0.617 refilled by
// T, 617 ms after the first failure: 7.617. T's chain leaves 3.367.
// Round 2 lets go 2, at T+100 and T+150 ms. At T+100 (3.467 with the
// refill) the release is paid, and its chain meets the capacity (5 served,
// 1 failed) and leaves 0.217: the credit cannot pay for the failed one's
// retry, which waits in line. At T+150 (0.267) the release goes unpaid
// (the credit has no whole retry), and its success, to 0.817, pays for no
// other: 1 served. Round 3 lets go 3, half the 6 that succeeded: at T+200
// (0.867), with the retry paid at T, due at its 200 ms backoff: the two
// successes, and those of the 3 retries they pay for in turn, leave 0.617:
// 5 served, what the dependency serves in 10 ms; at T+233 (0.650) and
// T+267 (0.784), a release whose success pays for one more: 2 served each,
// 0.884 left. Round 4 lets go twice the 9 that succeeded, 18, every 5.6 ms:
// each an unpaid release whose success pays for one more, or for two once
// the credit reaches 0.9, which leaves it under 0.65: 2 or 3 served, never
// 3 twice running, so no slot (two instants at most) takes more than the
// dependency serves. Round 5, twice round 4's successes, overshoots what
// the dependency serves, and the rounds after halve.
//
// So no 10 ms slot sees more than three times what the dependency serves
// (without a budget, up to 40 times), and 100 ms after the first answer
// nine in ten of the line still wait (a herd would let it all go at once).
func TestTheBudgetLetsTheLineGoAsARamp(t *testing.T) {
	sc := small()
	r := byName(sc)
	ms := time.Millisecond
	// The longest first wait of each backoff, which is the pace of a probe
	// whose retry is a first one; and the bounds of the first wait and of
	// the second, the second bound excluded (decorrelated's second: up to 3
	// times the wait made before it, set below).
	paces := map[string]time.Duration{"no jitter": probeAfter, "full jitter": probeAfter,
		"equal jitter": probeAfter, "decorrelated": 3 * probeAfter}
	waits := map[string][2][2]time.Duration{
		"no jitter":    {{100 * ms, 100*ms + 1}, {200 * ms, 200*ms + 1}},
		"full jitter":  {{0, 100 * ms}, {0, 200 * ms}},
		"equal jitter": {{50 * ms, 100 * ms}, {100 * ms, 200 * ms}},
		"decorrelated": {{100 * ms, 300 * ms}, {100 * ms, 0}}, // (0: 3 times the wait made)
	}
	failedFirstRound := map[string]int{"no jitter": 1, "full jitter": 2, "equal jitter": 1, "decorrelated": 1}
	secondRound := map[string]int{"no jitter": 2, "full jitter": 4, "equal jitter": 2, "decorrelated": 2}
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		retries := retryArrivals(b)
		pace := paces[name]

		// The paid retry: the first client's, at its backoff, and the first of all.
		first, lastFirst := 0, time.Duration(0) // the client that failed first; the last first attempt
		for c, run := range b.Clients {
			if run.Arrivals[0] < b.Clients[first].Arrivals[0] {
				first = c
			}
			lastFirst = max(lastFirst, run.Arrivals[0])
		}
		require.Greater(t, len(b.Clients[first].Arrivals), 1, name)
		failedAt := b.Clients[first].Arrivals[0]
		paid := b.Clients[first].Arrivals[1]
		require.Equal(t, paid, retries[0].at, "%s: the first retry is the paid one", name)
		assert.GreaterOrEqual(t, paid-failedAt, waits[name][0][0], "%s: the paid retry goes at its backoff", name)
		assert.Less(t, paid-failedAt, waits[name][0][1], "%s: the paid retry goes at its backoff", name)

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
		require.LessOrEqual(t, len(probes)-1, 4, "%s: at most 4 probes while down", name)
		assert.Equal(t, sc.Clients+1+len(probes)-1, b.WhileDown(sc.Outage),
			"%s: while down, the first attempts, the paid retry and the probes", name)
		jittered := false
		for i, at := range probes {
			assert.GreaterOrEqual(t, at-news, pace, "%s: probe %d's silence", name, i+1)
			assert.Less(t, at-news, 2*pace, "%s: probe %d's silence", name, i+1)
			jittered = jittered || at-news > pace+slot
			news = at
		}
		assert.True(t, jittered, "%s: the probes' silences are stretched", name)
		switch name {
		case "no jitter":
			assert.Equal(t, failedAt+100*ms, paid, "%s: the paid retry", name)
			assert.Len(t, probes, 3, "%s: with this seed, the third probe answers", name)
			assert.Equal(t, 610*ms, answer.Truncate(slot), "%s: T", name)
		case "decorrelated":
			assert.Len(t, probes, 1, "%s: with this seed, the first probe answers", name)
		}

		// The first round: T's chain, and later retries.
		got := byInstant(retries, answer, answer+round)
		assert.Equal(t, tally{5, 1}, got[answer], "%s: T's chain", name)
		for at := range got {
			if at != answer {
				assert.True(t, slices.ContainsFunc(retries, func(a arrival) bool { return a.at == at && a.attempt > 2 }),
					"%s: the first round's arrival at T+%v is a later retry's, or its chain's", name, at-answer)
			}
		}
		failedFirst := 0 // the requests that failed in the first round
		for c, run := range b.Clients {
			for i, at := range run.Arrivals {
				if at >= answer && at < answer+round && i+1 < len(run.Arrivals) {
					failedFirst++
					made, wait := at-run.Arrivals[i-1], run.Arrivals[i+1]-at
					hi := waits[name][1][1]
					if name == "decorrelated" {
						hi = 3 * made
					}
					assert.GreaterOrEqual(t, wait, waits[name][1][0], "%s: client %d's paid retry goes at its backoff", name, c)
					assert.Less(t, wait, hi, "%s: client %d's paid retry goes at its backoff", name, c)
				}
			}
		}
		assert.Equal(t, failedFirstRound[name], failedFirst, "%s: the first round's failed requests retry", name)

		// Each round from the second lets go what the round before allows,
		// each release sent at once while first retries wait in line.
		lastFirstRetry := time.Duration(0) // when the line let its last first retry go
		for _, a := range retries {
			if a.attempt == 2 {
				lastFirstRetry = a.at
			}
		}
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
			got := byInstant(retries, start, start+round)
			for at := range ramp {
				if at <= lastFirstRetry {
					assert.Contains(t, got, at, "%s: round %d lets a retry go at T+%v", name, k+1, at-answer)
				}
			}
			for at := range got {
				later := slices.ContainsFunc(retries, func(a arrival) bool { return a.at == at && a.attempt > 2 })
				assert.True(t, ramp[at] || later, "%s: round %d: arrivals at T+%v", name, k+1, at-answer)
			}
			if name != "no jitter" {
				continue
			}
			switch k {
			case 1:
				assert.Equal(t, map[time.Duration]tally{answer + 100*ms: {5, 1}, answer + 150*ms: {1, 0}},
					got, "%s: the second round's chains", name)
			case 2:
				assert.Equal(t, map[time.Duration]tally{start: {5, 0}, start + round/3: {2, 0}, start + 2*round/3: {2, 0}},
					got, "%s: the third round's chains", name)
			case 3:
				require.Len(t, got, 18, "%s: the fourth round's releases", name)
				prev := 0
				for i := range 18 {
					n := got[start+time.Duration(int64(round)*int64(i)/18)]
					assert.Contains(t, []tally{{2, 0}, {3, 0}}, n, "%s: the fourth round's release %d", name, i)
					assert.False(t, prev == 3 && n.Served == 3, "%s: the fourth round's release %d: two chains of 3 running", name, i)
					prev = n.Served
				}
			}
		}
		assert.Equal(t, secondRound[name], lets[0], "%s: the retries the second round lets go", name)
		if name == "no jitter" {
			assert.Equal(t, []int{2, 3, 18}, lets[:3], "%s: the retries rounds 2 to 4 let go", name)
		}

		// Not a herd.
		for i := int(sc.Outage / slot); i < len(b.Served); i++ {
			assert.LessOrEqual(t, b.Served[i]+b.Failed[i], 3*sc.Capacity, "%s: slot %d", name, i)
		}
		slotT := int(answer / slot)
		require.Less(t, slotT+int(round/slot), len(b.InLine), name)
		waiting := b.InLine[slotT]
		require.Greater(t, waiting, sc.Clients/2, "%s: the line at T", name)
		assert.GreaterOrEqual(t, 10*b.InLine[slotT+int(round/slot)], 9*waiting, "%s: 100 ms after T, still in line", name)
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
		require.LessOrEqual(t, sc.MaxAttempts-1, defaultCredit, "%s herd: the credit pays for every retry", scName)
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

// A retry to a dependency that other clients fail waits in line, but only
// while its request's schedule lasts. 11 clients at 0 against a dependency
// that never comes back, one Transport, 4 attempts each, 1.5 s apart: a
// schedule of 4.5 s. Client 0's first attempt fails first, with no
// evidence (no other client has failed): the credit pays for its retry,
// sent at 1.5 s. Every other client's fails at 0 after it, with client 0's
// request in flight: on that evidence its retry waits in line from 0, in
// client order, until its schedule ends at 4.5 s. A probe goes after a
// silence of the head's pace, its 1.5 s backoff, stretched by a draw in
// [1, 2): client 0's failure at 1.5 s is news, so client 1 probes in
// [3.0, 4.5) s, and is sent at once (its backoff has passed); its failure
// leaves its request too little of its schedule for another 1.5 s wait,
// and it gives up. The next probe would need 1.5 s more of silence: past
// 4.5 s, when every other client gives up, client 0 too (its second retry
// waited in line from 1.5 s). Each seed draws another stretch.
func TestARetryWaitsInLineForAProbeOrUntilItsScheduleEnds(t *testing.T) {
	const backoff = 1500 * time.Millisecond
	const schedule = 3 * backoff
	probedAt := map[time.Duration]bool{} // when client 1 probed, over the seeds
	for seed := uint64(1); seed <= 20; seed++ {
		sc := scenario{Clients: 11, Outage: time.Hour, Capacity: 1, MaxAttempts: 4, Transports: 1, Seed: seed}
		r := simulate(sc, newStrategy("constant", retryhttp.Constant(backoff), inLine))

		assert.Equal(t, clientRun{Arrivals: []time.Duration{0, backoff}, End: budgetDenied}, r.Clients[0], "seed %d: client 0", seed)
		require.Len(t, r.Clients[1].Arrivals, 2, "seed %d: client 1 probed", seed)
		at := r.Clients[1].Arrivals[1]
		assert.GreaterOrEqual(t, at, 2*backoff, "seed %d: the probe, 1.5 s of silence after client 0's failure", seed)
		assert.Less(t, at, schedule, "seed %d: the probe, within its schedule", seed)
		assert.Equal(t, budgetDenied, r.Clients[1].End, "seed %d: client 1", seed)
		probedAt[at] = true
		for c := 2; c < sc.Clients; c++ {
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0}, End: budgetDenied}, r.Clients[c], "seed %d: client %d", seed, c)
		}
		gaveUp := make([]int, len(r.GaveUp))
		gaveUp[int(at/slot)]++
		gaveUp[int(schedule/slot)] += sc.Clients - 1
		assert.Equal(t, gaveUp, r.GaveUp, "seed %d: when the clients gave up", seed)
		assert.Equal(t, schedule, r.LastEnd, "seed %d: no client past its schedule", seed)
		assert.Equal(t, 1, r.BudgetWaits, "seed %d: the line let client 1's probe go, and refused the others", seed)
		assert.Equal(t, sc.Clients+2, r.Attempts, "seed %d: the first attempts, client 0's paid retry, the probe", seed)
	}
	assert.Greater(t, len(probedAt), 10, "the jitter comes from the Transport's random source: other seeds, other probes")
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
