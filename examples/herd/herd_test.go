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
		require.NoError(t, run(&buf, sc, retryhttp.DefaultBase, retryhttp.DefaultCap, ""))
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

// retryhttp's budget serves every client, at about two attempts each: the
// retries its credit cannot pay for wait in line while the dependency is
// down, which costs the dependency no more than the first attempts and the
// credit, as failing those retries at once would.
func TestTheBudgetServesEveryClientWithFewAttempts(t *testing.T) {
	sc := small()
	r := byName(sc)
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		assert.Equal(t, sc.Clients, b.Succeeded, name)
		assert.LessOrEqual(t, b.PerClient(), 2.2, name)
		assert.Less(t, b.PerClient(), r[name].PerClient()/1.5, "%s: fewer attempts than without a budget", name)
		assert.Equal(t, sc.Clients+retryhttp.DefaultBudgetCredit, b.WhileDown(sc.Outage),
			"%s: while down, the line costs the dependency nothing more than failing fast", name)
		assert.Greater(t, b.BudgetWaits, sc.Clients-retryhttp.DefaultBudgetCredit-1, "%s: the retries the credit could not pay for waited", name)
	}
}

// The line is let go as a ramp, not as a herd: the recovery releases 2
// retries in its first 100 ms and then at most twice what succeeded, so
// the first 200 ms after the dependency's first answer see a handful of
// arrivals, and none of the next 10 ms slots sees more than twice the
// dependency's capacity.
func TestTheBudgetLetsTheLineGoAsARamp(t *testing.T) {
	sc := small()
	r := byName(sc)
	for _, name := range backoffNames {
		b := r[name+" + retryhttp budget"]
		first := -1 // the first slot with an arrival once the dependency is back
		for i := int(sc.Outage / slot); i < len(b.Served); i++ {
			if b.Served[i]+b.Failed[i] > 0 {
				first = i
				break
			}
		}
		require.GreaterOrEqual(t, first, 0, name)
		soon := 0
		for i := first; i < first+int(200*time.Millisecond/slot) && i < len(b.Served); i++ {
			soon += b.Served[i] + b.Failed[i]
		}
		assert.LessOrEqual(t, soon, 8, "%s: arrivals in the first 200 ms of the recovery", name)
		assert.LessOrEqual(t, b.Peak(sc.Outage), 2*sc.Capacity, name)
		assert.Positive(t, b.InLine[first], "%s: retries still waited when the recovery began", name)
	}
}

func TestABudgetPerClientAllowsEveryRetry(t *testing.T) {
	sc := small()
	sc.Transports = sc.Clients // each client its own Transport: its credit covers all its retries
	r := byName(sc)
	for _, name := range backoffNames {
		assert.Equal(t, r[name], asUnbudgeted(r[name+" + "+inLine.String()]), name)
	}
}

// asUnbudgeted returns r as if its strategy had no budget, for comparing
// everything else.
func asUnbudgeted(r *result) *result {
	c := *r
	c.Strategy = newStrategy(r.Strategy.BackoffName, r.Strategy.Backoff, noBudget)
	return &c
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

// A retry that finds the credit spent waits in line. Without news of the
// dependency for a second, the head of the line goes as a probe, and then
// waits its own backoff; a retry not let go gives up at its horizon: when
// the backoff schedule left at its first wait would have ended, or its own
// backoff, if later.
func TestARetryWaitsInLineForAProbeOrUntilItsHorizon(t *testing.T) {
	// 11 clients at 0 against a dependency that never comes back, one
	// Transport: the credit pays for 10 retries.
	sc := scenario{Clients: retryhttp.DefaultBudgetCredit + 1, Outage: time.Hour, Capacity: 1, MaxAttempts: 3, Transports: 1, Seed: 1}
	r := simulate(sc, newStrategy("constant", retryhttp.Constant(1500*time.Millisecond), inLine))
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }

	// Clients 0..9 retry at 1.5 s on credit; they fail, wait in line
	// (the line having formed then, the next probe is not due before
	// 3.5 s), and give up at their horizon, 1.5 s later.
	for i := range retryhttp.DefaultBudgetCredit {
		assert.Equal(t, clientRun{Arrivals: []time.Duration{0, ms(1500)}, End: budgetDenied}, r.Clients[i], "client %d", i)
	}
	// Client 10 waits in line from 0; a second without news lets it go as
	// a probe, which waits its backoff: it is sent at 2.5 s. It fails, and
	// waits in line again until its own backoff has passed (4 s), later
	// than its horizon (3 s), since the next probe needs 2 s of silence.
	assert.Equal(t, clientRun{Arrivals: []time.Duration{0, ms(2500)}, End: budgetDenied}, r.Clients[10])
	assert.Equal(t, ms(4000), r.LastEnd)
	assert.Equal(t, sc.Clients+1, r.BudgetWaits, "client 10 waited twice, the others once")
	assert.Equal(t, 2*sc.Clients, r.Attempts)
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
