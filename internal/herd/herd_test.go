package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
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

// The rules of retryhttp's default Budget that the tests below check. The
// clients of one Transport share its budget, and the dependency is one
// host: one credit, one line. The credit holds 10 retries and starts full;
// each retry it pays for spends one, a paid retry that succeeds gives it
// back, any other success earns 0.55, and it refills by itself in 10 s (a
// tenth of it a second). A client's request is in flight from its first
// attempt until it ends, its waits included. When an attempt fails (here a
// 503 without Retry-After: the server does not time the retry), its retry
// goes at its backoff, paid by the credit, unless another request is in
// flight and another client failed since the dependency's last success (in
// the last 10 s): then it waits in the line, as it does when the credit
// cannot pay for it and another request is in flight (alone, it would be
// refused). The line lets its retries go oldest first:
//   - at a success of the dependency, as many as the credit then pays for
//     (the success's own retry given back, or its ratio earned), each
//     spending a retry of it. A retry let go waits what is left of its
//     backoff, counted from its failure (a first retry has waited longer,
//     and is sent at once); if it succeeds, it gives its retry back, which
//     lets the next go: a burst at one instant, whose retries let go and
//     not yet answered are never more than the credit paid for, and which
//     the dependency ends by failing the attempts over its capacity;
//   - as a probe, once the dependency has given no news (no attempt failed
//     or succeeded, no retry was let go, since the line formed) for the
//     pace of the retry at the head of the line, the longest wait its own
//     backoff could draw: exactly then, with no jitter. A probe spends a
//     retry of credit if there is one;
//   - at the end of its time in line, its request's schedule (from its
//     failure, the longest wait its backoff can draw and the longest each
//     retry after it could take, less what earlier waits in line took past
//     their own longest), if the dependency's last outcome was a success.
//     Otherwise the line refuses it, and its request gives up.
const probeAfter = 100 * time.Millisecond // the pace of a probe for a first retry (the backoffs' base)

// retryhttp's budget serves every client, at under two and a half
// attempts each. Only the client whose first attempt fails first retries
// at its backoff, paid by the credit: no other client had failed yet.
// Every other client's retry, and that client's next, waits in line: every
// client waits once at least. Each client's schedule (8 attempts: 12.7 s of
// the longest waits) outlasts the 500 ms outage. While the dependency is
// down the line lets only probes through, each after a silence of its pace
// (100 ms for a first retry, more for a later one) since the last news,
// the first since the line formed: the k-th comes k paces after the first
// failures at the earliest, so at most 4 come in the outage (a fifth would
// find it over). So while it is down the dependency sees the first
// attempts, the paid retry and the probes, less than the first attempts
// and the credit, which is what failing fast (failing each retry the
// credit cannot pay for) would cost it.
//
// Once it is back, the line sends it bursts, not a herd. A success (the
// first, a probe's) lets go at once the oldest retries the credit pays for,
// its 10 at most; each the dependency serves gives its retry back, which
// lets the next go at that instant, and each it fails keeps it. So the
// retries let go and not yet answered never outnumber the credit's 10 (but
// for what it refills, a tenth of it a second, while one let go before its
// backoff ran out waits out the rest), and a burst is what the dependency
// serves, then a failure for each of those at most. The 10 ms full, nothing
// else in it is served, so nothing else lets a retry go: the burst's
// arrivals are news, which puts the next probe 100 ms off, and a retry
// whose time in line ends after the burst's first failure is refused. Nor
// does a retry go paid at its backoff (here none does once the dependency
// is back): a burst leaves the credit under a retry, its failures are
// evidence until the next success, and what that success gives back or
// earns goes to the line. So no 10 ms once it is back sees more than the
// dependency's capacity and the credit: 15 (10 to 13 here; without a budget
// or jitter, 40 times the capacity).
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
		assert.LessOrEqual(t, b.Peak(sc.Outage), sc.Capacity+defaultCredit,
			"%s: not a herd: a burst of the line, what the dependency serves and what the credit paid for", name)
	}
}

// largestSample is the largest uniform sample below 1, from which a
// Backoff draws its longest wait: the pace of a retry in line, as the
// Transport sizes it, and each wait of its request's schedule.
const largestSample = 0x1p0 - 0x1p-53

// A release is a retry the line let go: when, whose, by which rule, and
// whether its release spent a retry of credit.
type release struct {
	At     time.Duration
	Client int
	By     releaseRule
	Paid   bool
}

// A releaseRule is the rule of the line that let a retry go.
type releaseRule uint8

const (
	bySuccess  releaseRule = iota // a success of the dependency, the credit paying
	byProbe                       // the pace of the head of the line, in silence
	byTimesEnd                    // the end of its time in line, the dependency having answered last
)

// The credit of a budget of the default size, as the replay keeps it: in
// billionths of a retry, as the budget counts it, so that it is exact: a
// success earns 550,000,000 of them, and the credit, 10 retries, refills
// in 10 s: one a nanosecond.
const (
	creditUnit   = 1_000_000_000
	creditFull   = defaultCredit * creditUnit
	creditRatio  = int64(defaultRatio * creditUnit)
	creditRefill = 10 * time.Second
)

// credit is a budget's credit as the replay keeps it.
type credit struct {
	held     int64         // in creditUnits
	refilled time.Duration // when it was last refilled
}

// refill refills c at at for the time since it last did: the whole credit
// in creditRefill, and never past full. (Refilled at each change, or at
// the last change before it, the credit holds the same: every change but
// a spend adds to it.)
func (c *credit) refill(at time.Duration) {
	if el := at - c.refilled; el >= creditRefill {
		c.held = creditFull
	} else if el > 0 {
		hi, lo := bits.Mul64(creditFull, uint64(el))
		give, _ := bits.Div64(hi, lo, uint64(creditRefill))
		c.held = min(c.held+int64(give), creditFull)
	}
	c.refilled = at
}

// spend spends a retry of credit at at, if there is that much, and reports
// whether it did.
func (c *credit) spend(at time.Duration) bool {
	c.refill(at)
	if c.held < creditUnit {
		return false
	}
	c.held -= creditUnit
	return true
}

// earn adds units of credit at at, up to full.
func (c *credit) earn(at time.Duration, units int64) {
	c.refill(at)
	c.held = min(c.held+units, creditFull)
}

// A replay is what replaying a run against the rules of the line found:
// the retries let go, by rule; the retries refused; the successes that
// found retries in line and let none go (the credit could not pay), and
// those that let several go at once; and each rule broken.
type replay struct {
	Releases []release
	Refused  int
	Unpaid   int
	Several  int
	Broken   []string
}

// replayLines replays the events of run r of scenario sc, whose clients
// are dealt over sc.Transports (client i on the budget of Transport
// i%Transports, one line and one credit each) and wait the backoff b,
// against the rules of the line and of the credit above, knowing no more
// than they say. The virtual clock runs one thing at a time, so the events
// come in the order they happened, but for one case: a retry that another
// client's success lets go reports its release when it runs, after
// whatever else was due at that instant (the retries one success lets go
// run in the order it let them go). A retry joins its line as it fails
// (its wait starts at that failure), and nothing else happens between the
// two; an attempt's outcome is reported to its budget, and spends, earns
// and lets go, as it arrives, before anything else.
//
// Each credit keeps every change: full at the start; a retry that goes at
// its backoff (its failure's next event is its next attempt: the budget
// said Go) spends one as it fails; a release spends one if there is one
// (paid), and the release a success makes always does; a success gives
// back the one its attempt spent, or earns the ratio if that spent none
// (a first attempt, or a release the credit could not pay); it refills
// continuously. So the replay knows, at each success, how many retries
// the credit pays for, and which: the oldest, as many as there are in line
// and the credit holds whole retries after the success earned. A retry's
// time in line ends when its request's schedule does: its failure, plus
// the longest wait of its retry and of each retry it has left (its backoff
// for the largest sample, each chained from the one before), plus its
// slack: what its earlier retries' longest waits left unused, less what
// their waits, in line included, took past them.
func replayLines(r *result, sc scenario, b retryhttp.Backoff) replay {
	var out replay
	broke := func(e event, format string, args ...any) {
		out.Broken = append(out.Broken, fmt.Sprintf("client %d at %v: ", e.Client, e.At)+fmt.Sprintf(format, args...))
	}
	next := make([]int, len(r.Events)) // the index of the client's next event, or -1
	last := make([]int, len(r.Clients))
	for i := range last {
		last[i] = -1
	}
	for i := len(r.Events) - 1; i >= 0; i-- {
		c := r.Events[i].Client
		next[i], last[c] = last[c], i
	}
	isLine := func(k eventKind) bool { return k == evReleased || k == evRefused }
	type ticket struct {
		client int
		pace   time.Duration // the silence after which it probes, at the head
		until  time.Duration // when its time in line ends
		leaves int           // the index of the end of its wait
	}
	type line struct {
		tickets    []ticket
		headSince  time.Duration // when the head of the line became it
		news       time.Duration // the last news of the dependency
		failedLast bool          // its last outcome was a failure
		credit     credit
		late       int // the leave index of the head said not to have probed, +1
	}
	lines := make([]line, max(sc.Transports, 1))
	for k := range lines {
		lines[k].credit.held = creditFull
	}
	type client struct {
		attempts int
		longest  time.Duration // the longest wait of its last retry
		slack    time.Duration // of its schedule's waits so far, what they left unused
		failed   time.Duration // when its last attempt failed
		paid     bool          // its attempt under way spent a retry of credit
	}
	clients := make([]client, len(r.Clients))
	bySucc := map[int]bool{} // the ends of waits that a success let go
	for i, e := range r.Events {
		l := &lines[e.Client%len(lines)]
		c := &clients[e.Client]
		if len(l.tickets) > 0 && l.late != l.tickets[0].leaves+1 {
			if due := max(l.news+l.tickets[0].pace, l.headSince); due < e.At {
				broke(e, "the head of the line, client %d, did not probe at %v", l.tickets[0].client, due)
				l.late = l.tickets[0].leaves + 1 // (said once)
			}
		}
		leave := func(j int) {
			l.tickets = slices.Delete(l.tickets, j, j+1)
			if j == 0 {
				l.headSince = e.At
			}
		}
		switch e.Kind {
		case evFailed, evServed:
			if c.attempts > 0 {
				// The wait before this attempt, from the last one's
				// failure, is made.
				c.slack += c.longest - (e.At - c.failed)
			}
			c.attempts++
			c.longest = max(b.Delay(c.attempts-1, c.longest, largestSample), 0)
			paid := c.paid
			c.paid = false
			if e.Kind == evFailed {
				c.failed = e.At
				l.news, l.failedLast = e.At, true
				j := next[i]
				switch {
				case j < 0: // its request ends: out of attempts, or refused at once
				case isLine(r.Events[j].Kind) && r.Events[j].Since == e.At:
					if len(l.tickets) == 0 {
						l.headSince = e.At
					}
					until := e.At + c.longest + c.slack
					for k, d := c.attempts+1, c.longest; k < sc.MaxAttempts; k++ {
						d = max(b.Delay(k-1, d, largestSample), 0)
						until += d
					}
					// A pace of at least a millisecond, as the line keeps.
					l.tickets = append(l.tickets, ticket{e.Client, max(c.longest, time.Millisecond), until, j})
				case isLine(r.Events[j].Kind):
					broke(r.Events[j], "waited in line from %v, not from its failure", r.Events[j].Since)
				default: // it goes at its backoff, paid
					if !l.credit.spend(e.At) {
						broke(e, "retried at its backoff, paid, with %.9f retries of credit", float64(l.credit.held)/creditUnit)
					}
					c.paid = true
				}
				break
			}
			if paid {
				l.credit.earn(e.At, creditUnit)
			} else {
				l.credit.earn(e.At, creditRatio)
			}
			if len(l.tickets) > 0 || l.failedLast {
				l.news = e.At
			}
			l.failedLast = false
			// It lets go the oldest retries in line that the credit pays
			// for: each reports so at this instant, later.
			inLine, n := len(l.tickets), 0
			for len(l.tickets) > 0 && l.credit.spend(e.At) {
				t := l.tickets[0]
				if end := r.Events[t.leaves]; end.Kind != evReleased || end.At != e.At {
					broke(e, "a success, with credit for client %d (%d let go before it), did not let it go", t.client, n)
				}
				bySucc[t.leaves] = true
				clients[t.client].paid = true
				out.Releases = append(out.Releases, release{e.At, t.client, bySuccess, true})
				leave(0)
				n++
			}
			switch {
			case inLine > 0 && n == 0:
				out.Unpaid++
			case n > 1:
				out.Several++
			}
		case evReleased:
			if bySucc[i] {
				break
			}
			j := slices.IndexFunc(l.tickets, func(t ticket) bool { return t.client == e.Client })
			if j < 0 {
				broke(e, "let go, not in line")
				break
			}
			t := l.tickets[j]
			by := byTimesEnd
			switch due := max(l.news+t.pace, l.headSince); {
			case e.At == t.until:
				if l.failedLast {
					broke(e, "let go at the end of its time in line, though the dependency failed last")
				}
			case j == 0 && e.At >= due:
				by = byProbe
			default:
				broke(e, "let go by no rule: no success had credit for it, its time in line ends at %v, and it probes (at the head) at %v", t.until, due)
			}
			paid := l.credit.spend(e.At)
			c.paid = paid
			l.news = e.At // a release is news
			out.Releases = append(out.Releases, release{e.At, e.Client, by, paid})
			leave(j)
		case evRefused:
			j := slices.IndexFunc(l.tickets, func(t ticket) bool { return t.client == e.Client })
			if j < 0 {
				broke(e, "refused, not in line")
				break
			}
			if t := l.tickets[j]; e.At != t.until {
				broke(e, "refused, though its time in line ends at %v", t.until)
			}
			if !l.failedLast {
				broke(e, "refused, though the dependency answered last")
			}
			out.Refused++
			leave(j)
		}
	}
	for k, l := range lines {
		for _, t := range l.tickets {
			out.Broken = append(out.Broken, fmt.Sprintf("budget %d: client %d still in line at the end", k, t.client))
		}
	}
	return out
}

// Each retry the line lets go follows a success of the dependency, a probe
// or the end of its time in line, as the rules above say, and each it
// refuses meets the end of its time with the dependency failing. The test
// replays every budgeted run of the small herd and of the herds run on both
// clocks (transport_test.go: several lines, long outages, first requests
// at one instant), arrival by arrival and wait by wait, against a model of
// each line and its credit (see replayLines) that knows no more than the
// rules and each retry's backoff (its pace, and its request's schedule):
// the retries in line, oldest first; when the head became it; the last
// news; whether the dependency failed last; the credit, to the billionth
// of a retry. So a success that lets go fewer retries than the credit
// pays for, or more, or others than the oldest; a retry paid at its
// backoff that the credit could not pay for; a retry let go twice, or
// without a cause; a probe early, late or stretched; a head that never
// probes (a lost wake-up); a time in line that ends early or late; a retry
// refused while the dependency answered, or let go at its time's end while
// it failed; a retry left in line; a credit that spends, earns or refills
// otherwise than the rules say (some later success lets go a number the
// model does not expect): each breaks a rule here. The releases it counts
// are those the Transports count (BudgetWaits), and the runs use every
// rule: successes that let several go at once, and successes that find
// retries in line and let none go, the credit short; probes that the
// credit paid for, and probes it could not.
//
// While the dependency is down, only probes leave the line. Without
// jitter the small herd's every retry reaches the dependency a whole
// number of 100 ms after the first failure: the backoff's waits are
// multiples of 100 ms, and so are the probes' paces, counted from news on
// that grid (the paid retry at 100 ms, probes at 200, 300 and 400 ms while
// it is down, and the one at 500 ms, just after it, that finds it back).
func TestEachRetryTheLineLetsGoFollowsASuccessAProbeOrItsTimesEnd(t *testing.T) {
	type run struct {
		sc       scenario
		base, cp time.Duration
	}
	runs := map[string]run{"small": {small(), 100 * time.Millisecond, 10 * time.Second}}
	for name, sc := range transportScenarios() {
		runs[name] = run{sc, 100 * time.Millisecond, 2 * time.Second}
	}
	used := map[releaseRule]int{}
	paidProbes := map[bool]int{}
	refused, unpaid, several := 0, 0, 0
	for name, rn := range runs {
		for _, s := range strategies(rn.base, rn.cp) {
			if s.Budget != inLine {
				continue
			}
			r := simulate(rn.sc, s)
			got := replayLines(r, rn.sc, s.Backoff)
			assert.Empty(t, got.Broken, "%s/%s: the rules of the line", name, s.Name)
			assert.Len(t, got.Releases, r.BudgetWaits, "%s/%s: the retries let go, as the Transports count them", name, s.Name)
			up := time.Duration(math.MaxInt64) // the dependency's first success
			for _, e := range r.Events {
				if e.Kind == evServed {
					up = min(up, e.At)
				}
			}
			for _, rel := range got.Releases {
				used[rel.By]++
				if rel.By == byProbe {
					paidProbes[rel.Paid]++
				}
				if rel.At < up {
					assert.Equal(t, byProbe, rel.By, "%s/%s: client %d let go at %v, while the dependency was down", name, s.Name, rel.Client, rel.At)
				}
			}
			refused += got.Refused
			unpaid += got.Unpaid
			several += got.Several

			if name == "small" && s.BackoffName == "no jitter" {
				first := time.Duration(math.MaxInt64)
				for _, c := range r.Clients {
					first = min(first, c.Arrivals[0])
				}
				var down []time.Duration // the retries that reached the dependency while it was down, and the next
				for _, c := range r.Clients {
					for _, at := range c.Arrivals[1:] {
						assert.Zero(t, (at-first)%probeAfter, "%s: a retry at %v, off the 100 ms grid", s.Name, at)
						if at < rn.sc.Outage+probeAfter {
							down = append(down, at-first)
						}
					}
				}
				slices.Sort(down)
				assert.Equal(t, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond,
					400 * time.Millisecond, 500 * time.Millisecond}, slices.Compact(down), "%s: the paid retry, and the probes", s.Name)
				assert.Equal(t, first+500*time.Millisecond, up, "%s: the probe at 500 ms finds the dependency back", s.Name)
			}
		}
	}
	assert.Positive(t, used[bySuccess], "retries let go by a success")
	assert.Positive(t, used[byProbe], "retries let go as probes")
	assert.Positive(t, used[byTimesEnd], "retries let go at the end of their time in line")
	assert.Positive(t, refused, "retries refused at the end of their time in line")
	assert.Positive(t, unpaid, "successes that let no retry go, the credit short")
	assert.Positive(t, several, "successes that let several retries go at once")
	assert.Positive(t, paidProbes[true], "probes the credit paid for")
	assert.Positive(t, paidProbes[false], "probes the credit could not pay for")
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
		for _, e := range r.Events {
			if e.Kind == evRefused {
				assert.Equal(t, budgetDenied, r.Clients[e.Client].End, "%s: client %d, refused by the line, gives up", name, e.Client)
			}
		}
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
// while its request's schedule lasts. 11 clients whose first attempts are
// spread over 100 ms, against a dependency that never comes back, one
// Transport, 4 attempts each, 1.5 s apart: a schedule of 4.5 s from each
// request's start. The client whose first attempt fails first, a, has no
// evidence (no other client has failed): the credit pays for its retry,
// sent 1.5 s later. Every other client's fails after it, with a's request
// in flight: on that evidence its retry waits in line, in the order they
// failed, and so does a's next, from its retry's failure. A probe goes
// after a silence of the head's pace, its 1.5 s backoff, exactly: a's
// retry's failure is the last news, so the oldest, b, probes 3 s after a's
// first failure, and is sent at once (its backoff has passed). Its failure
// is news too: the next oldest, c, probes 1.5 s later, 4.5 s after a's
// first failure, within its own schedule (it started after a). Its
// failure leaves it less than a 1.5 s wait of its schedule, and it gives
// up. (At that instant a's time in line ends too, and a is refused,
// whichever of the two goes first.) Every other retry in line, b's second
// included, is refused when its request's schedule ends, 4.5 s after its
// start, since the dependency failed last: no client ends past its
// schedule. The line draws nothing from the random source: the seeds move
// the first attempts, and the probes keep their pace.
func TestARetryWaitsInLineForAProbeOrUntilItsScheduleEnds(t *testing.T) {
	const backoff = 1500 * time.Millisecond
	const schedule = 3 * backoff
	for seed := uint64(1); seed <= 20; seed++ {
		sc := scenario{Clients: 11, Spread: 100 * time.Millisecond, Outage: time.Hour, Capacity: 1, MaxAttempts: 4, Transports: 1, Seed: seed}
		r := simulate(sc, newStrategy("constant", retryhttp.Constant(backoff), inLine))

		byStart := make([]int, sc.Clients) // the clients, first attempt first
		for c := range byStart {
			byStart[c] = c
		}
		start := func(c int) time.Duration { return r.Clients[c].Arrivals[0] }
		slices.SortFunc(byStart, func(x, y int) int { return int(start(x) - start(y)) })
		a, b, c := byStart[0], byStart[1], byStart[2]
		failed := start(a)
		lastStart := start(byStart[len(byStart)-1])
		require.Less(t, lastStart-failed, backoff, "seed %d: a's retry comes after every first attempt", seed)

		assert.Equal(t, clientRun{Arrivals: []time.Duration{failed, failed + backoff}, End: budgetDenied}, r.Clients[a], "seed %d: a", seed)
		assert.Equal(t, clientRun{Arrivals: []time.Duration{start(b), failed + 2*backoff}, End: budgetDenied}, r.Clients[b], "seed %d: b, the first probe", seed)
		assert.Equal(t, clientRun{Arrivals: []time.Duration{start(c), failed + 3*backoff}, End: budgetDenied}, r.Clients[c], "seed %d: c, the second probe", seed)
		for _, o := range byStart[3:] {
			assert.Equal(t, clientRun{Arrivals: []time.Duration{start(o)}, End: budgetDenied}, r.Clients[o], "seed %d: client %d", seed, o)
		}

		// Each wait in line: the two probes, and the rest refused at their
		// schedule's end. (a's refusal and c's probe come at one instant.)
		want := []event{
			{At: failed + 2*backoff, Client: b, Kind: evReleased, Since: start(b)},
			{At: failed + 3*backoff, Client: c, Kind: evReleased, Since: start(c)},
			{At: failed + schedule, Client: a, Kind: evRefused, Since: failed + backoff},
			{At: start(b) + schedule, Client: b, Kind: evRefused, Since: failed + 2*backoff},
		}
		for _, o := range byStart[3:] {
			want = append(want, event{At: start(o) + schedule, Client: o, Kind: evRefused, Since: start(o)})
		}
		var got []event
		for _, e := range r.Events {
			if e.Kind == evReleased || e.Kind == evRefused {
				got = append(got, e)
			}
		}
		assert.ElementsMatch(t, want, got, "seed %d: the waits in line", seed)
		assert.Equal(t, lastStart+schedule, r.LastEnd, "seed %d: no client past its schedule", seed)
		assert.Equal(t, 2, r.BudgetWaits, "seed %d: the line let the two probes go, and refused the others", seed)
		assert.Equal(t, sc.Clients+3, r.Attempts, "seed %d: the first attempts, a's paid retry, the probes", seed)
	}
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
