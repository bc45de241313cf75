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

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			strconv.Itoa(r.Exhausted) + ` +` + strconv.Itoa(r.BudgetDenied) + "\n"
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
// below are derived from. A failure of the dependency (here a 503 without
// Retry-After) makes it down until its next success: meanwhile every retry
// waits in line instead of being sent. A probe goes once the dependency has
// been silent for the probe's pace stretched by a jitter: the pace is
// 100 ms, doubling with each probe up to 5 s (a success resets it), and
// the stretch a draw in [1, 2) from the Transport's random source (drawn
// when the line forms, at each probe and at each success), so that the
// silence lies in [pace, 2*pace), and clients whose lines formed together
// do not probe together. The dependency's first success lets the line go
// as a ramp: rounds of 100 ms, 2 retries in the first, then twice the
// retries that succeeded in the round before, or half of them if an
// attempt failed; and each success lets one more go while the credit pays
// for it (10 retries held, 0.55 earned per success). The wait in line
// counts toward a retry's backoff: let go, it waits only what is left of
// it. A request without a deadline waits in line until 10 s after its
// first wait (or its backoff schedule, if longer), and then gives up.
const (
	probeAfter    = 100 * time.Millisecond // the pace of a line's first probe
	maxProbeAfter = 5 * time.Second        // the pace at most
	lineWait      = 10 * time.Second       // how long a request without a deadline waits in line, from its first wait
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

// retryhttp's budget serves every client, at about two attempts each. The
// first failure makes the dependency down: every client's retry waits in
// line instead of being sent. While the dependency is down the line lets
// only probes through: one after at least 100 ms of silence, the next at
// least 200 ms after that one's failure, a third at least 400 ms after
// that: past the 500 ms outage (the jitter only stretches these). So while
// it is down the dependency sees the first attempts and at most 2 probes,
// less than the first attempts and the credit, which is what failing fast
// (failing each retry the credit cannot pay for) would cost it.
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
		assert.GreaterOrEqual(t, b.WhileDown(sc.Outage), sc.Clients, "%s: while down, the first attempts", name)
		assert.LessOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+probes, "%s: while down, the line lets through 2 probes at most", name)
		assert.LessOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+retryhttp.DefaultBudgetCredit,
			"%s: while down, the line costs the dependency no more than failing fast", name)
		assert.GreaterOrEqual(t, b.BudgetWaits, sc.Clients, "%s: every client's first retry waited", name)
	}
}

// The line is let go as fast as the dependency answers, not as a herd.
// While the dependency is down only probes go, the k-th after a silence in
// [pace(k), 2*pace(k)) from the last news: the previous probe's failure,
// or for the first the last first attempt's failure (just before 10 ms).
// The first probe sent once the outage is over is the dependency's first
// answer, at T: the second probe, if the draws put it at 500 ms or later
// (it goes between 300 and 610 ms), else the third (between 700 and
// 1410 ms); with this seed, the third, at 1.08 s.
// The first retry of the three backoffs but decorrelated is no longer than
// the first probe's silence, so a probe is sent as soon as it is let go;
// decorrelated's (up to 300 ms) may hold it back, which delays the next
// probes' silences too, so for it the silences are only bounded below.
//
// T starts a recovery: the ramp lets a retry go at T and one at T+50 ms,
// and each success pays one more while the credit lasts. Each retry let go
// has waited in line longer than its backoff, so it goes at once, and its
// success pays the next at the same instant: at T the probe, the retry it
// paid and the ramp's succeed, and their successors, until the dependency
// has served its 5 of the 10 ms; it fails the next attempt of each of the
// two chains, which ends them: 7 arrivals at T. At T+50 ms the ramp's
// second retry starts one chain: 5 served, 1 failed. The ramp is not
// jittered: this holds whatever the draws. The ramp's next rounds (half
// the retries that succeeded, since some attempts failed) start more
// chains, each ended by the dependency's capacity or by the credit running
// out: no 10 ms slot sees more than twice what the dependency serves
// (without a budget, up to 40 times), and 200 ms after the first answer
// most of the line still waits (a herd would let it all go at once).
func TestTheBudgetLetsTheLineGoAsARamp(t *testing.T) {
	sc := small()
	r := byName(sc)
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		var news time.Duration     // the last first attempt's failure
		var probes []time.Duration // the retries sent while the dependency is down, then T
		answer := time.Duration(-1)
		for _, c := range b.Clients {
			news = max(news, c.Arrivals[0])
			for _, at := range c.Arrivals[1:] {
				if at < sc.Outage {
					probes = append(probes, at)
				} else if answer < 0 || at < answer {
					answer = at
				}
			}
		}
		require.GreaterOrEqual(t, answer, sc.Outage, name)
		slices.Sort(probes)
		probes = append(probes, answer)
		assert.Contains(t, []int{2, 3}, len(probes), "%s: the first answer is the second or third probe", name)
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
			assert.Len(t, probes, 3, "%s: with this seed, the third probe answers", name)
			assert.Equal(t, 1080*time.Millisecond, answer.Truncate(slot), "%s: T", name)
		}

		first := int(answer / slot) // the first slot with an arrival once the dependency is back
		require.Less(t, first+int(200*time.Millisecond/slot), len(b.Served), name)
		half := int(50 * time.Millisecond / slot)
		assert.Equal(t, []int{sc.Capacity, 2}, []int{b.Served[first], b.Failed[first]}, "%s: at T", name)
		assert.Equal(t, []int{sc.Capacity, 1}, []int{b.Served[first+half], b.Failed[first+half]}, "%s: at T+50 ms", name)
		for i := first + 1; i < first+2*half; i++ {
			if i != first+half {
				assert.Zero(t, b.Served[i]+b.Failed[i], "%s: slot %d", name, i)
			}
		}
		assert.LessOrEqual(t, b.Peak(sc.Outage), 2*sc.Capacity, name)
		assert.Positive(t, b.InLine[first], "%s: retries still waited when the recovery began", name)
		assert.Greater(t, 2*b.InLine[first+int(200*time.Millisecond/slot)], b.InLine[first],
			"%s: 200 ms into the recovery, most of the line still waits", name)
	}
}

// A budget per client (each client its own Transport) denies no retry,
// and should cost its client nothing: at least as many clients served as
// without a budget, with no more attempts. It holds each retry of its
// client, after the client's every failure, until a probe: the k-th retry
// after a silence in [pace(k), 2*pace(k)) from the failure (100 ms, 200,
// 400 ms... up to 5 s, stretched by up to twice); the wait counts toward
// the retry's backoff. The backoffs without jitter, with full and with
// equal jitter never wait longer than the pace before the 7th retry
// (6.4 s against 5 s): the budget's probe, not the backoff, times each of
// these retries, and the stretch jitters it. So the clients, whose first
// attempts all fail within 10 ms, do not retry in lockstep, as they would
// if their silences were not jittered (each at 100, 300, 700 ms... after
// its first failure): the busiest 10 ms once the dependency is back sees
// about as many arrivals as with full jitter and no budget. The stretch
// spreads a client's k-th retry over a window as wide as full jitter's,
// [pace, 2*pace) against [0, pace), but later; over seeds 1 to 8 the peak
// was 1.2 to 1.9 times full jitter's, in this herd and in the program's
// (1000 clients, 1000 Transports): at most twice, where the herd without
// jitter peaks at 20 to 50 times full jitter's.
func TestABudgetPerClientAllowsEveryRetry(t *testing.T) {
	def := scenario{Clients: 1000, Spread: 10 * time.Millisecond, Outage: time.Second, Capacity: 20,
		MaxAttempts: 8, Seed: 1}
	for scName, sc := range map[string]scenario{"small": small(), "the program's": def} {
		sc.Transports = sc.Clients // each client its own Transport: its credit covers all its retries
		r := byName(sc)
		lockstep, full := r["no jitter"].Peak(sc.Outage), r["full jitter"].Peak(sc.Outage)
		for _, name := range backoffNames {
			none, own := r[name], r[name+" + "+inLine.String()]
			assert.Zero(t, own.BudgetDenied, "%s herd, %s: no retry denied", scName, name)
			assert.Positive(t, own.BudgetWaits, "%s herd, %s: retries waited while the dependency was down", scName, name)
			assert.GreaterOrEqual(t, own.Succeeded, none.Succeeded, "%s herd, %s: clients served", scName, name)
			assert.LessOrEqual(t, own.Attempts, none.Attempts, "%s herd, %s: attempts", scName, name)
			assert.LessOrEqual(t, own.Peak(sc.Outage), 2*full, "%s herd, %s: busiest 10 ms once up, against full jitter's", scName, name)
			assert.Less(t, 8*own.Peak(sc.Outage), lockstep, "%s herd, %s: busiest 10 ms once up, against the herd's", scName, name)

			// Each retry waits for its probe: after a silence of at least
			// the pace, and, for the backoffs never longer than the pace,
			// less than twice the pace.
			var firstRetries []time.Duration // each client's wait before its first retry
			for c, run := range own.Clients {
				for i := 1; i < len(run.Arrivals); i++ {
					k, gap := i, run.Arrivals[i]-run.Arrivals[i-1]
					assert.GreaterOrEqual(t, gap, pace(k), "%s herd, %s: client %d, retry %d", scName, name, c, k)
					if name != "decorrelated" && k < 7 {
						assert.Less(t, gap, 2*pace(k), "%s herd, %s: client %d, retry %d", scName, name, c, k)
					}
					if k == 1 {
						firstRetries = append(firstRetries, gap)
					}
				}
			}
			assert.Greater(t, slices.Max(firstRetries)-slices.Min(firstRetries), pace(1)/2,
				"%s herd, %s: the first retries spread over their window", scName, name)
		}
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
		assert.Equal(t, r.Exhausted+r.BudgetDenied, gaveUp, name)
		assert.Equal(t, sc.Clients, r.Succeeded+r.Exhausted+r.BudgetDenied, "%s: every client ends once", name)
		assert.Zero(t, r.InLine[len(r.InLine)-1], "%s: nobody waits at the end", name)
	}
}

func TestOneClientFollowsTheBackoffSchedule(t *testing.T) {
	sc := scenario{Clients: 1, Outage: time.Second, Capacity: 1, MaxAttempts: 8, Transports: 1, Seed: 1}
	r := simulate(sc, newStrategy("no jitter", retryhttp.Exponential{Base: 100 * time.Millisecond, Cap: 10 * time.Second}, noBudget))
	// Attempts at 0, 0.1, 0.3, 0.7 s fail; the one at 1.5 s is served.
	assert.Equal(t, 5, r.Attempts)
	assert.Equal(t, 1500*time.Millisecond, r.LastSuccess)
	for _, i := range []int{0, 10, 30, 70} {
		assert.Equal(t, 1, r.Failed[i], "slot %d", i)
	}
	assert.Equal(t, 1, r.Served[150])
}

// A retry to a dependency that is down waits in line. Once the dependency
// has been silent for the probe's pace stretched by a draw in [1, 2), the
// first retry in line goes as a probe, and then waits what is left of its
// backoff; each probe doubles the pace, up to 5 s. (A request's last
// attempt is kept for the dependency's return only when the request has a
// deadline; these have none.) A retry not let go gives up at its horizon:
// without a deadline, 10 s after its request's first wait in line, or when
// its backoff ends, if later.
func TestARetryWaitsInLineForAProbeOrUntilItsHorizon(t *testing.T) {
	// 11 clients at 0 against a dependency that never comes back, one
	// Transport, 3 attempts each, 1.5 s apart; each seed draws other
	// stretches.
	const backoff = 1500 * time.Millisecond
	sentAt := map[time.Duration]bool{} // when client 3 retried, over the seeds
	probed := map[int]int{}            // seeds, by the probes let go
	for seed := uint64(1); seed <= 20; seed++ {
		sc := scenario{Clients: 11, Outage: time.Hour, Capacity: 1, MaxAttempts: 3, Transports: 1, Seed: seed}
		r := simulate(sc, newStrategy("constant", retryhttp.Constant(backoff), inLine))

		// The first attempts fail at 0, and the first failure makes the
		// dependency down: every client waits in line from 0, in client
		// order, its horizon at 10 s. The first three probes go after
		// silences in [100, 200), [200, 400) and [400, 800) ms, by 1.4 s
		// (clients 0, 1 and 2), each then waiting the rest of its 1.5 s
		// backoff: all three are sent at 1.5 s, fail, and wait again,
		// behind clients 3 to 10.
		for c := range 3 {
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0, backoff}, End: budgetDenied}, r.Clients[c], "seed %d: client %d", seed, c)
		}
		// Their failures are news: the next probes (clients 3, 4, then 5,
		// each sent at once, its backoff past) go after silences in
		// [0.8, 1.6) s from 1.5 s, [1.6, 3.2) s and [3.2, 6.4) s from the
		// previous probe's failure: client 3 in [2.3, 3.1) s, client 4
		// in [3.9, 6.3) s, client 5 in [7.1, 12.7) s, if before 10 s. The
		// next needs at least 5 s, more than any retry is left to wait.
		news, probes := backoff, 3
		for c := 3; c < sc.Clients && len(r.Clients[c].Arrivals) > 1; c++ {
			at := r.Clients[c].Arrivals[1]
			probes++
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0, at}, End: budgetDenied}, r.Clients[c], "seed %d: client %d", seed, c)
			assert.GreaterOrEqual(t, at-news, pace(probes), "seed %d: client %d, probe %d", seed, c, probes)
			assert.Less(t, at-news, 2*pace(probes), "seed %d: client %d, probe %d", seed, c, probes)
			assert.Less(t, at, lineWait, "seed %d: client %d", seed, c)
			if c == 3 {
				sentAt[at] = true
			}
			news = at
		}
		require.Contains(t, []int{5, 6}, probes, "seed %d: the probes", seed)
		probed[probes]++
		assert.Greater(t, news+2*pace(probes+1), lineWait, "seed %d: the next probe could come after 10 s", seed)
		for c := probes; c < sc.Clients; c++ {
			assert.Equal(t, clientRun{Arrivals: []time.Duration{0}, End: budgetDenied}, r.Clients[c], "seed %d: client %d", seed, c)
		}

		// Every client gives up at 10 s, but the last probe's if its
		// backoff ends later: it waits for its backoff's end.
		lastEnd := max(lineWait, news+backoff)
		assert.Equal(t, lastEnd, r.LastEnd, "seed %d", seed)
		gaveUp := make([]int, len(r.GaveUp))
		gaveUp[int(lineWait/slot)] += sc.Clients - 1
		gaveUp[int(lastEnd/slot)]++
		assert.Equal(t, gaveUp, r.GaveUp, "seed %d: when the clients gave up", seed)
		assert.Equal(t, sc.Clients+probes, r.BudgetWaits, "seed %d: the probes waited twice, the others once", seed)
		assert.Equal(t, sc.Clients+probes, r.Attempts, "seed %d", seed)
	}
	// The jitter comes from the Transport's random source: other seeds,
	// other probes; and the seeds cover both endings.
	assert.Greater(t, len(sentAt), 10, "client 3's retry, over 20 seeds")
	assert.Positive(t, probed[5], "seeds whose sixth probe came too late")
	assert.Positive(t, probed[6], "seeds whose sixth probe came before 10 s")
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
