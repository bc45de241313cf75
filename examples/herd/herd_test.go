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
// success lets two more go in the round besides; and each success lets one
// more go while the credit pays for it. Each release spends a retry of the
// credit if it has one. (After an outage of over 5 s the ramp is gentler;
// these outages are shorter.) A retry let go waits what is left of its
// backoff, counted from its failure.
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
// its pace (100 ms for a first retry, more for a later one): at most 5 in
// the outage. So while it is down the dependency sees the first attempts,
// the paid retry and the probes, less than the first attempts and the
// credit, which is what failing fast (failing each retry the credit cannot
// pay for) would cost it.
func TestTheBudgetServesEveryClientWithFewAttempts(t *testing.T) {
	sc := small()
	probes := int(sc.Outage / probeAfter)
	require.Equal(t, 5, probes)
	r := byName(sc)
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		assert.Equal(t, sc.Clients, b.Succeeded, name)
		assert.LessOrEqual(t, b.PerClient(), 2.5, name)
		assert.Less(t, b.PerClient(), r[name].PerClient()/1.5, "%s: fewer attempts than without a budget", name)
		assert.GreaterOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+1, "%s: while down, the first attempts and the paid retry", name)
		assert.LessOrEqual(t, b.WhileDown(sc.Outage), sc.Clients+1+probes, "%s: while down, the line lets through 5 probes at most", name)
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

// The line is let go as fast as the dependency answers, not as a herd.
//
// While the dependency is down, the line lets only probes through, each
// after a silence of its pace (the head's longest backoff: 100 ms for a
// first retry, 300 ms for decorrelated's) stretched by at most twice. The
// first probe sent once the outage is over is the dependency's first
// answer, at T: within two paces and a slot of the outage's end. T starts
// a recovery, in rounds of 100 ms from T: 2 retries in the first, and,
// while no attempt fails, two more for each retry that succeeds, so that
// the releases double with each round trip, until the dependency, at its
// 5 attempts a slot, fails the excess; then a round lets go twice the
// retries that succeeded in the round before if none failed, half of them
// if some did. So no 10 ms slot sees more than three times what the
// dependency serves (without a budget, up to 40 times; measured: 8 to 12),
// and 100 ms after the first answer nine in ten of the line still wait (a
// herd would let it all go at once).
func TestTheBudgetLetsTheLineGoAsARamp(t *testing.T) {
	sc := small()
	r := byName(sc)
	paces := map[string]time.Duration{"no jitter": probeAfter, "full jitter": probeAfter,
		"equal jitter": probeAfter, "decorrelated": 3 * probeAfter}
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		first := -1 // the slot of the first answer once the outage is over
		for i := int(sc.Outage / slot); i < len(b.Served); i++ {
			if b.Served[i] > 0 {
				first = i
				break
			}
		}
		require.GreaterOrEqual(t, first, 0, name)
		answer := time.Duration(first) * slot
		assert.Less(t, answer-sc.Outage, 2*paces[name]+slot, "%s: T, the first answer, within two paces", name)
		for i := int(sc.Outage / slot); i < len(b.Served); i++ {
			assert.LessOrEqual(t, b.Served[i]+b.Failed[i], 3*sc.Capacity, "%s: slot %d", name, i)
		}
		waiting := b.InLine[first]
		require.Greater(t, waiting, sc.Clients/2, "%s: the line at T", name)
		assert.GreaterOrEqual(t, 10*b.InLine[first+int(round/slot)], 9*waiting, "%s: 100 ms after T, still in line", name)
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
func TestARetryWaitsInLineForAProbeOrUntilItsHorizon(t *testing.T) {
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
		assert.Equal(t, sc.Clients, r.BudgetWaits, "seed %d: clients 1 to 10 waited once, and client 0's second retry", seed)
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
