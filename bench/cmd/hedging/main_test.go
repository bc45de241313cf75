package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

func msec(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// run makes a result of n calls spread over dur: call i takes lat(i); a
// hedge goes with every call for which hedged(i) holds, with the delay
// delay(at).
func run(name string, fixed time.Duration, n int, dur time.Duration, lat func(int) time.Duration,
	hedged func(int) bool, delay func(at time.Duration) time.Duration) bench.HedgeResult {
	r := bench.HedgeResult{Name: name, Delay: fixed}
	secs := int((dur + time.Second - 1) / time.Second)
	r.Attempts = make([]int, secs)
	for i := range n {
		at := time.Duration(i) * dur / time.Duration(n)
		r.Calls = append(r.Calls, bench.Call{Start: at, Latency: lat(i)})
		r.Attempts[at/time.Second]++
		if hedged(i) {
			r.Attempts[at/time.Second]++
			r.Hedges = append(r.Hedges, bench.HedgeMark{At: at + delay(at), Delay: delay(at)})
		}
	}
	r.Arrivals = r.Attempts
	return r
}

// every returns a predicate true for one call in k.
func every(k int) func(int) bool { return func(i int) bool { return i%k == k-1 } }

// tail returns latencies of fast, but slow for one call in k.
func tail(fast, slow time.Duration, k int) func(int) time.Duration {
	return func(i int) time.Duration {
		if i%k == k-1 {
			return slow
		}
		return fast
	}
}

// synthetic returns a study of made-up runs: retryhttp adaptive has a p99
// of 12 ms at 4 % extra requests, failsafe-go fixed 14 ms at 4 %; the
// adaptive delay is 6 ms before the shift, 12 ms in the second after it,
// then 18 ms. Over HTTP/1.1, each of its 40 hedges a round costs a
// connection (8 without hedging); over HTTP/3, 11 ms at 4 %, each hedge a
// stream reset, and 1 connection a round.
func synthetic() *study {
	s := &study{
		Tail: bench.Tail{Fast: msec(5), Slow: msec(500), SlowShare: 0.02}, Workers: 8, Steady: 2 * time.Second, Rounds: 2,
		Shift: 6 * time.Second, ShiftBy: 3, Seed: 1, Delay: msec(6), SVG: "hedging.svg",
		PilotTarget: 0.04, Pilots: []pilot{{msec(5.5), 0.2}, {msec(8.25), 0.01}, {msec(6), 0.045}},
		Date: "today", Go: "go", CPU: "cpu", Cores: 2, LoadBefore: "0", LoadAfter: "0", Versions: "v",
	}
	per := s.Steady / time.Duration(s.Rounds)
	fixed := func(time.Duration) time.Duration { return s.Delay }
	adaptive := func(at time.Duration) time.Duration {
		switch {
		case at < 3*time.Second:
			return msec(6)
		case at < 4*time.Second:
			return msec(12)
		}
		return msec(18)
	}
	never := func(int) bool { return false }
	with := func(r bench.HedgeResult, conns, canceled, resets int) bench.HedgeResult {
		r.Conns, r.Canceled, r.Resets = conns, canceled, resets
		return r
	}
	for range s.Rounds {
		s.RoundRuns = append(s.RoundRuns, []bench.HedgeResult{
			with(run(nameNone, 0, 1000, per, tail(msec(5), msec(500), 50), never, nil), 8, 0, 0),
			with(run(nameAdaptive, 0, 1000, per, tail(msec(5), msec(12), 50), every(25), adaptive), 48, 40, 0),
			run(nameFixed, s.Delay, 1000, per, tail(msec(5), msec(13), 50), every(25), fixed),
			run(nameFailsafe, s.Delay, 1000, per, tail(msec(5), msec(14), 50), every(25), fixed),
			run(nameFailsafeQ, 0, 1000, per, tail(msec(5), msec(15), 50), every(20), fixed),
		})
		s.H3RoundRuns = append(s.H3RoundRuns, []bench.HedgeResult{
			with(run(nameNone, 0, 1000, per, tail(msec(5), msec(500), 50), never, nil), 1, 0, 0),
			with(run(nameAdaptive, 0, 1000, per, tail(msec(5), msec(11), 50), every(25), adaptive), 1, 40, 40),
		})
	}
	s.SteadyRuns = mergeRounds(s.RoundRuns)
	s.H3Runs = mergeRounds(s.H3RoundRuns)
	for _, r := range s.SteadyRuns {
		lat := tail(msec(5), msec(500), 50)
		if r.Name != nameNone {
			lat = tail(msec(5), msec(20), 50)
		}
		s.ShiftRuns = append(s.ShiftRuns, run(r.Name, r.Delay, 3000, s.Shift, lat, every(25), adaptive))
		if r.Name == nameFixed {
			s.ShiftRuns = append(s.ShiftRuns, run(nameFixedSlow, 3*s.Delay, 3000, s.Shift, lat, every(40), fixed))
		}
	}
	return s
}

// The adaptive delay follows the shift from the second after it on: 6 ms
// before, 18 ms from second 4 (the shift is at second 3).
func TestFollow(t *testing.T) {
	s := synthetic()
	before, after, within := s.follow(s.shifted(nameAdaptive))
	if before != msec(6) || after != msec(18) || within != 2 {
		t.Errorf("follow: %v before, %v after, settled from second %d after the shift; want 6ms, 18ms, 2", before, after, within)
	}
	s.ShiftRuns[1].Hedges = s.ShiftRuns[1].Hedges[:len(s.ShiftRuns[1].Hedges)-40] // none in the last second
	if _, _, within := s.follow(s.shifted(nameAdaptive)); within != -1 {
		t.Errorf("with no hedge in the last second, settled from %d, want -1 (never)", within)
	}
}

// The calibration finds a delay whose pilot sends the target within the
// tolerance, bracketing it from the start and bisecting, in few pilots;
// where no delay does (a cliff), it stops when the bracket is one grain
// wide and takes the nearest pilot; and it runs no more pilots than
// allowed.
func TestCalibrate(t *testing.T) {
	// Extra requests falling steeply from 30 % at 6 ms to 2 % at 7 ms,
	// then slowly.
	steep := func(d time.Duration) float64 {
		x := float64(d) / 1e6
		switch {
		case x < 6:
			return 0.30
		case x < 7:
			return 0.30 - 0.28*(x-6)
		}
		return 0.02 / (x - 6)
	}
	for _, c := range []struct {
		name   string
		target float64
		start  time.Duration
		extra  func(time.Duration) float64
		most   int
		check  func(d time.Duration, e float64, n int) bool
		expect string
	}{
		{"from below", 0.034, msec(6.4), steep, 10,
			func(d time.Duration, e float64, n int) bool { return e >= 0.024 && e <= 0.044 && n <= 8 }, "within 1 point in at most 8 pilots"},
		{"from above", 0.10, msec(8), steep, 10,
			func(d time.Duration, e float64, n int) bool { return e >= 0.09 && e <= 0.11 && n <= 8 }, "within 1 point in at most 8 pilots"},
		{"a cliff", 0.10, msec(6.4), func(d time.Duration) float64 {
			if d < msec(6.5) {
				return 0.25
			}
			return 0.02
		}, 20, func(d time.Duration, e float64, n int) bool { return d == msec(6.5) && e == 0.02 }, "the nearest, 6.5 ms at 2 %"},
		{"at most", 0.034, msec(6.4), steep, 2,
			func(d time.Duration, e float64, n int) bool { return n == 2 }, "2 pilots"},
	} {
		var tried []time.Duration
		d, pilots := calibrate(c.target, 0.01, c.start, c.most, func(d time.Duration) float64 {
			tried = append(tried, d)
			return c.extra(d)
		})
		if len(pilots) != len(tried) || len(pilots) == 0 || pilots[0].Delay != c.start {
			t.Fatalf("%s: pilots %v, delays tried %v; want one pilot a delay, the first at %v", c.name, pilots, tried, c.start)
		}
		t.Logf("%s: %v after pilots %v", c.name, d, pilots)
		for _, d := range tried {
			if d%pilotGrain != 0 {
				t.Errorf("%s: tried %v, not a multiple of %v", c.name, d, pilotGrain)
			}
		}
		if !c.check(d, c.extra(d), len(pilots)) {
			t.Errorf("%s: %v (%.1f %% extra) after pilots %v; want %s", c.name, d, 100*c.extra(d), pilots, c.expect)
		}
	}
}

// The report states each target's figures and whether it is met, and has
// a row for each configuration and second.
func TestMarkdown(t *testing.T) {
	s := synthetic()
	md := s.markdown()
	for _, want := range []string{
		`| retryhttp adaptive: p99 at most 30.0 ms | p99 12.0 ms (without hedging 500 ms) | **met** |`,
		`| retryhttp adaptive: at most 5.0 % extra requests | 4.0 % (the server received 4.0 %) | **met** |`,
		`| retryhttp adaptive: a better p99 than failsafe-go's for the same extra load or less (within 1.0 %), in all and in each round | retryhttp adaptive 12.0 ms at 4.0 % extra; failsafe-go fixed 6.00 ms 14.0 ms at 4.0 % (round 1: 12.0 ms against 14.0 ms, round 2: 12.0 ms against 14.0 ms); failsafe-go p95 15.0 ms at 5.0 % | **met** |`,
		`| retryhttp adaptive: the hedge delay follows a shift within 3 s | from 6.00 ms before the shift to 18.0 ms after it; within 25 % of the latter from second 2 after the shift on | **met** |`,
		"    cd bench && go run ./cmd/hedging\n",
		"![Hedging: latency distributions, and the shift second by second](hedging.svg)",
		"| retryhttp fixed, slow-tuned 18.0 ms | 2.5 % |",
		"as many extra requests as the adaptive run did (4.0 % in the\nfirst round)",
		"Here 3 pilots: 5.50 ms sent 20 %, 8.25 ms sent 1.0 %, 6.00 ms sent 4.5 %.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	rows := func(header string) int {
		_, rest, ok := strings.Cut(md, header)
		if !ok {
			t.Fatalf("no table headed %q", header)
		}
		n := 0
		for _, l := range strings.Split(rest, "\n")[2:] {
			if !strings.HasPrefix(l, "|") {
				break
			}
			n++
		}
		return n
	}
	if n := rows("| configuration | requests | p50 |"); n != 5 {
		t.Errorf("steady table: %d rows, want 5", n)
	}
	if n := rows("| configuration | fast: extra requests |"); n != 6 {
		t.Errorf("shift table: %d rows, want 6", n)
	}
	if n := rows("| second | retryhttp adaptive (p95): delay |"); n != 6 {
		t.Errorf("delay table: %d rows, want 6", n)
	}
	if n := regexp.MustCompile(`(?m)^\| second \| no hedging \|`).FindAllStringIndex(md, -1); len(n) != 2 {
		t.Errorf("%d per-second tables of every configuration, want 2 (extra requests, p99)", len(n))
	}

	// A failsafe-go p99 lower in one round is enough for "not met".
	s.RoundRuns[1][3] = run(nameFailsafe, s.Delay, 1000, time.Second, tail(msec(5), msec(11), 50), every(25), func(time.Duration) time.Duration { return s.Delay })
	if md := s.markdown(); !regexp.MustCompile(`round 2: 12.0 ms against 11.0 ms.*\*\*not met\*\*`).MatchString(md) {
		t.Error("a round where failsafe-go's p99 is lower still reads as met")
	}
}

// The HTTP/3 section has a row for each protocol and configuration, with
// the connections per run, and says what the losers cost; without HTTP/3
// runs, the page has no such section.
func TestMarkdownHTTP3(t *testing.T) {
	s := synthetic()
	md := s.markdown()
	for _, want := range []string{
		"## Over HTTP/3: a loser costs a stream reset, not a connection",
		"    cd bench && go run ./cmd/hedging -h3only\n",
		"| HTTP/1.1 | no hedging | 2000 | 5.00 ms | 500 ms | 500 ms | 0.0 % | 0 | 0 | 0 | – | 8 |",
		"| HTTP/1.1 | retryhttp adaptive (p95) | 2000 | 5.00 ms | 12.0 ms | 12.0 ms | 4.0 % | 80 | 80 | 80 | – | 48 |",
		"| HTTP/3 | no hedging | 2000 | 5.00 ms | 500 ms | 500 ms | 0.0 % | 0 | 0 | 0 | 0 | 1 |",
		"| HTTP/3 | retryhttp adaptive (p95) | 2000 | 5.00 ms | 11.0 ms | 11.0 ms | 4.0 % | 80 | 80 | 80 | 80 | 1 |",
		"80 by a stream reset with H3_REQUEST_CANCELLED; the server accepted 1 QUIC connection\nper run, as many as without hedging.",
		"accepted 48\nconnections per run, against 8 without hedging, for 8 callers",
		"The last section hedges over HTTP/3 (quic-go) too, where the attempt that loses costs a\nstream reset rather than a connection.\n\n| | |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	s.H3Runs = nil
	if md := s.markdown(); strings.Contains(md, "HTTP/3") {
		t.Error("without HTTP/3 runs, the report still speaks of HTTP/3")
	}
}

// The HTTP/3 runs work, small: the adaptive policy hedges, each loser
// canceled on the server is a stream reset with H3_REQUEST_CANCELLED, and
// the server accepts one QUIC connection a run, hedging or not; over
// HTTP/1.1, every loser canceled costs a connection.
func TestMeasureHTTP3(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about 3 s")
	}
	s := &study{
		Tail:    bench.Tail{Fast: 2 * time.Millisecond, Slow: 100 * time.Millisecond, SlowShare: 0.03},
		Workers: 4, Steady: 600 * time.Millisecond, Rounds: 1, Seed: 1, H3: true, Only3: true,
	}
	s.measure(t.Logf)
	h1n, h1a := s.steady(nameNone), s.steady(nameAdaptive)
	h3n, h3a := find(s.H3Runs, nameNone), find(s.H3Runs, nameAdaptive)
	for _, r := range []bench.HedgeResult{h1n, h1a, h3n, h3a} {
		if r.Errors != 0 || len(r.Calls) < 20 {
			t.Fatalf("%s: %d requests answered, %d failed", r.Name, len(r.Calls), r.Errors)
		}
	}
	if len(h3a.Hedges) == 0 || h3a.Canceled == 0 {
		t.Fatalf("over HTTP/3, %d hedges and %d losers canceled on the server; want some", len(h3a.Hedges), h3a.Canceled)
	}
	if h3a.Resets != h3a.Canceled || h3a.Canceled > losers(h3a) || losers(h3a) > len(h3a.Hedges) {
		t.Errorf("over HTTP/3, %d hedges, %d losers at the server, %d canceled, %d by a stream reset; want hedges ≥ losers ≥ canceled = resets",
			len(h3a.Hedges), losers(h3a), h3a.Canceled, h3a.Resets)
	}
	if h3n.Conns != 1 || h3a.Conns != 1 || h3n.Canceled != 0 {
		t.Errorf("over HTTP/3, %d QUIC connections without hedging and %d with it, want 1 and 1; %d canceled without hedging",
			h3n.Conns, h3a.Conns, h3n.Canceled)
	}
	if h1a.Resets != 0 || h1a.Conns <= h1n.Conns || h1a.Conns < h1a.Canceled {
		t.Errorf("over HTTP/1.1, %d connections without hedging, %d with it for %d losers canceled (and %d resets); want more with, one at least per canceled loser",
			h1n.Conns, h1a.Conns, h1a.Canceled, h1a.Resets)
	}
	if !strings.Contains(s.markdown(), "| HTTP/3 | retryhttp adaptive (p95) |") {
		t.Error("the report has no HTTP/3 row of retryhttp adaptive")
	}
}

// The chart is well-formed SVG with a series of each configuration in
// each panel that shows it, and no point left undefined.
func TestSVG(t *testing.T) {
	s := synthetic()
	var b bytes.Buffer
	writeSVG(&b, s)
	out := b.String()
	d := xml.NewDecoder(strings.NewReader(out))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
	}
	count := func(name string) int { return strings.Count(out, `data-series="`+name+`"`) }
	// The latency distribution, the tails panel and the shift's p99; the
	// shift's delay and extra requests too, except without hedging.
	for name, want := range map[string]int{nameNone: 3, nameAdaptive: 5, nameFixed: 5, nameFailsafe: 5, nameFailsafeQ: 5, nameFixedSlow: 3} {
		if got := count(name); got != want {
			t.Errorf("%d series of %s, want %d", got, name, want)
		}
	}
	if strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
		t.Error("the chart has an undefined coordinate")
	}
}
