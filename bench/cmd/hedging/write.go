package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/bench"
)

// Targets the report checks.
const (
	targetP99   = 30 * time.Millisecond // retryhttp adaptive's p99 on the steady server
	targetExtra = 0.05                  // and its extra requests
	sameExtra   = 0.01                  // extra loads within this are "the same"
	followIn    = 3                     // seconds for the adaptive delay to follow a shift
	slowCut     = 0.8                   // a request over slowCut × Slow met a slow attempt and was not rescued

	hedgeFraction = 0.05 // retryhttp's Hedge.Fraction when it is zero
)

type writer struct{ strings.Builder }

func (w *writer) p(format string, args ...any) { fmt.Fprintf(w, format, args...) }

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// label names a configuration as the report shows it, with its delay.
func (s *study) label(r bench.HedgeResult) string {
	switch {
	case r.Delay > 0:
		return fmt.Sprintf("%s %s", r.Name, ms(r.Delay))
	case r.Name == nameAdaptive:
		return nameAdaptive + " (p95)"
	}
	return r.Name
}

// phases returns the run's two halves, in seconds: before and after the
// shift.
func (s *study) phases() (fast, slow [2]time.Duration) {
	return [2]time.Duration{0, s.Shift / 2}, [2]time.Duration{s.Shift / 2, s.Shift}
}

// follow reports how the adaptive delay of r followed the shift: its median
// over the last 3 s before it and over the last 3 s of the run, and the
// seconds after the shift from which every second's median stays within
// 25 % of the latter (-1 if it never does).
func (s *study) follow(r bench.HedgeResult) (before, after time.Duration, within int) {
	n := int(s.Shift / time.Second)
	half := n / 2
	median := func(from, to int) time.Duration {
		var ds []time.Duration
		for _, h := range r.Hedges {
			if h.At >= time.Duration(from)*time.Second && h.At < time.Duration(to)*time.Second {
				ds = append(ds, h.Delay)
			}
		}
		slices.Sort(ds)
		return bench.Quantile(ds, 0.5)
	}
	before, after = median(max(half-3, 0), half), median(max(n-3, half), n)
	secs := r.Seconds(n)
	within = -1
	for i := n - 1; i >= half; i-- {
		d := secs[i].Delay
		if d == 0 || float64(d) < 0.8*float64(after) || float64(d) > 1.25*float64(after) {
			break
		}
		within = i - half + 1
	}
	return before, after, within
}

// unrescued returns the share of r's requests in [from, to) that took over
// slowCut times the slow latency at the time: a slow attempt no hedge beat.
func unrescued(r bench.HedgeResult, from, to time.Duration, slow time.Duration) float64 {
	ls := r.Latencies(from, to)
	if len(ls) == 0 {
		return 0
	}
	cut := time.Duration(slowCut * float64(slow))
	i, _ := slices.BinarySearch(ls, cut)
	return float64(len(ls)-i) / float64(len(ls))
}

// extraIn returns r's attempts beyond one per request in [from, to), by the
// seconds it counted.
func extraIn(r bench.HedgeResult, from, to time.Duration) float64 {
	var req, att int
	for i, sec := range r.Seconds(int(to / time.Second)) {
		if time.Duration(i)*time.Second >= from {
			req += sec.Requests
			att += sec.Attempts
		}
	}
	if req == 0 {
		return 0
	}
	return float64(att)/float64(req) - 1
}

func (s *study) markdown() string {
	var w writer
	t := s.Tail
	w.p(`# Hedging: tail latency and extra load

<!-- Written by bench/cmd/hedging (bash bench/run.sh runs it); edit that, not this file. -->

A hedged request is sent again when its first attempt has not answered after a delay; the
first answer wins and the other attempt is canceled ("The Tail at Scale", Dean and Barroso).
This page measures retryhttp's hedging (`+"`Policy.Hedge`"+`) and the hedge policy of
[failsafe-go](https://github.com/failsafe-go/failsafe-go) (`+"`hedgepolicy`"+`, through its
failsafehttp RoundTripper) on the same load, in one run of the `+"`bench/`"+` module:

    cd bench && go run ./cmd/hedging

%s| | |
|---|---|
| date | %s |
| Go | %s |
| CPU | %s, %d cores |
| load average (1, 5, 15 min) | %s before the run, %s after it |
| modules | %s |

The machine was shared: every latency below carries the noise of other processes (a 5 ms
sleep answered in more than 5 ms), and the load average says how much.

`, h3Intro(s), s.Date, s.Go, s.CPU, s.Cores, s.LoadBefore, s.LoadAfter, s.Versions)

	w.p(`## The load

A Go test server on 127.0.0.1 answers each request it receives after %s, or after %s for
%s of them, drawn independently for each request (a hedge draws its own). %d callers each
send a GET, read its answer and send the next (a closed loop) for %s per configuration, in
%d rounds of one run of each configuration after the other, each run with a fresh server
and base transport (HTTP/1.1 over TCP: go-cleanhttp's pooled transport, keeping up to 64 idle connections). Extra requests are
the attempts a library sent beyond one per request, counted where they enter the base
transport (attempts ÷ requests − 1); the server received fewer, since a hedge canceled
before it was written never arrives.

- **%s**: retryhttp's default policy, `+"`&Transport{Base: base}`"+`.
- **%s**: `+"`Policy{Hedge: &Hedge{}}`"+`: a hedge after the p95 of the host's recent
  latencies (within [2 ms, 1 s]), at most %s of the host's requests, paid for by the
  default budget (%d retries of credit, %.2g earned per success).
- **%s %s**: `+"`Hedge{Delay: d}`"+`, the same with a fixed delay d = %s (below), still
  at most %s of the host's requests.
- **%s %s**: `+"`hedgepolicy.NewWithDelay(d)`"+`, one hedge, with no limit on how many
  requests are hedged.
- **%s**: `+"`hedgepolicy.NewWithDelayQuantile(%.2f, %d, %d)`"+`, failsafe-go's adaptive delay:
  the p95 of about the last %d executions, once %d were seen.

`, ms(t.Fast), ms(t.Slow), pct(t.SlowShare), s.Workers, secs(s.Steady), s.Rounds,
		nameNone, nameAdaptive, pct(hedgeFraction), retryhttp.DefaultBudgetCredit, retryhttp.DefaultBudgetRatio,
		nameFixed, ms(s.Delay), ms(s.Delay), pct(hedgeFraction),
		nameFailsafe, ms(s.Delay),
		nameFailsafeQ, failsafeQuantile, failsafeAge, failsafeThreshold, failsafeAge, failsafeThreshold)
	s.delayText(&w)

	s.targets(&w)
	s.steadyTable(&w)
	s.shiftSection(&w)
	if len(s.H3Runs) > 0 {
		s.h3Section(&w)
	}
	return w.String()
}

// delayText says how the fixed delay was chosen: by its pilot runs.
func (s *study) delayText(w *writer) {
	w.p(`The fixed delay d is chosen so that failsafe-go's fixed policy, which hedges every request
still unanswered after d, sends as many extra requests as the adaptive run did (%s in the
first round); retryhttp's fixed policy, with the same d, sends about as many, or fewer where
its Fraction or budget refuses a hedge.
`, pct(s.PilotTarget))
	if len(s.Pilots) > 0 {
		var ps []string
		for _, p := range s.Pilots {
			ps = append(ps, fmt.Sprintf("%s sent %s", ms(p.Delay), pct(p.Extra)))
		}
		w.p(`Short pilot runs of failsafe-go's fixed policy, %s each on the same load after the first
round's adaptive run, find d: the first at the median delay of the adaptive run's hedges,
then longer or shorter, bisecting, until one sends the target within %.0f point (at most %d
pilots, else the nearest is taken).
Here %s: %s.
`, secs(pilotRun), 100*pilotTol, maxPilots, plural(len(s.Pilots), "pilot"), strings.Join(ps, ", "))
	}
	w.p(`The unhedged run's latencies do not tell d: the hedges add load, which lengthens the
latencies they are drawn from, and near the bulk of the latencies a change of a tenth of a
millisecond changes the hedges sent manyfold.

`)
}

func h3Intro(s *study) string {
	if len(s.H3Runs) == 0 {
		return ""
	}
	return `The last section hedges over HTTP/3 (quic-go) too, where the attempt that loses costs a
stream reset rather than a connection.

`
}

func (s *study) targets(w *writer) {
	a, f, q, none := s.steady(nameAdaptive), s.steady(nameFailsafe), s.steady(nameFailsafeQ), s.steady(nameNone)
	p99 := func(r bench.HedgeResult) time.Duration { return bench.Quantile(r.Latencies(0, s.Steady), 0.99) }
	w.p("## Targets\n\n| target | figures | status |\n|---|---|---|\n")
	w.p("| retryhttp adaptive: p99 at most %s | p99 %s (without hedging %s) | %s |\n",
		ms(targetP99), ms(p99(a)), ms(p99(none)), verdict(p99(a) <= targetP99))
	w.p("| retryhttp adaptive: at most %s extra requests | %s (the server received %s) | %s |\n",
		pct(targetExtra), pct(a.Extra()), pct(a.ExtraReceived()), verdict(a.Extra() <= targetExtra))

	// Better: in all and in every round, for no more extra load (within
	// sameExtra).
	same := a.Extra() <= f.Extra()+sameExtra
	better := same && p99(a) < p99(f)
	var rounds []string
	for i, round := range s.RoundRuns {
		ra, rf := find(round, nameAdaptive), find(round, nameFailsafe)
		better = better && p99(ra) < p99(rf)
		rounds = append(rounds, fmt.Sprintf("round %d: %s against %s", i+1, ms(p99(ra)), ms(p99(rf))))
	}
	w.p("| retryhttp adaptive: a better p99 than failsafe-go's for the same extra load or less (within %s), in all and in each round | retryhttp adaptive %s at %s extra; %s %s at %s (%s); %s %s at %s | %s |\n",
		pct(sameExtra), ms(p99(a)), pct(a.Extra()), s.label(f), ms(p99(f)), pct(f.Extra()), strings.Join(rounds, ", "),
		s.label(q), ms(p99(q)), pct(q.Extra()), verdict(better))

	before, after, within := s.follow(s.shifted(nameAdaptive))
	fig := fmt.Sprintf("from %s before the shift to %s after it; ", ms(before), ms(after))
	if within < 0 {
		fig += "not settled by the end of the run"
	} else {
		fig += fmt.Sprintf("within 25 %% of the latter from second %d after the shift on", within)
	}
	w.p("| retryhttp adaptive: the hedge delay follows a shift within %d s | %s | %s |\n\n",
		followIn, fig, verdict(within >= 0 && within <= followIn))
	w.p(`On a steady server, a fixed delay chosen as here, to send as many hedges as the adaptive one,
hedges the same requests at about the same moment, so the two p99s differ by about the noise
between runs (compare the rounds). What the adaptive delay adds is that nobody has to choose
it, and that it follows the server when its latency changes (below).

`)
}

func (s *study) steadyTable(w *writer) {
	w.p(`## The steady tail

Each configuration for %s on the server above, its rounds together. Over %s counts the
requests that met a slow attempt and were not rescued by a hedge (without hedging, about %s
of them; with one hedge, a request whose hedge is slow too is not rescued either).

| configuration | requests | p50 | p99 | p99.9 | max | over %s | extra requests | received by the server | failed |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
`, secs(s.Steady), ms(time.Duration(slowCut*float64(s.Tail.Slow))), pct(s.Tail.SlowShare), ms(time.Duration(slowCut*float64(s.Tail.Slow))))
	for _, r := range s.SteadyRuns {
		ls := r.Latencies(0, s.Steady)
		w.p("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d |\n", s.label(r), len(ls),
			ms(bench.Quantile(ls, 0.5)), ms(bench.Quantile(ls, 0.99)), ms(bench.Quantile(ls, 0.999)), ms(bench.Quantile(ls, 1)),
			pct(unrescued(r, 0, s.Steady, s.Tail.Slow)), pct(r.Extra()), pct(r.ExtraReceived()), r.Errors)
	}
	w.p(`
The chart shows each configuration's latencies as the share of requests slower than each
latency (log scales: the p99 is where a line crosses 1 %%, the p99.9 where it crosses
0.1 %%), then the shift below, second by second.

![Hedging: latency distributions, and the shift second by second](%s)

`, s.SVG)
}

func (s *study) shiftSection(w *writer) {
	fast, slow := s.phases()
	st := s.Tail.Scaled(s.ShiftBy)
	w.p(`## When the latency shifts

The same load for %s per configuration, but half way through every latency becomes %.0f
times longer: %s, or %s for %s of the requests. A fixed delay fits one phase only. %s (the
steady run's) is passed by every request of the slow phase: failsafe-go hedges them all,
retryhttp at most its Fraction of them, spent on whichever requests pass the delay first,
slow or not. %s, tuned for the slow phase, hedges the fast phase's slow requests later than
needed. retryhttp's Fraction counts over the last 10 s: when the request rate falls after
the shift, the hedges of one second may exceed 5 %% of its requests while those of the
10 s stay within it. In the second of the shift every request passes the old delay at
once, and the Fraction gives its hedges to the first of them; a request refused a hedge
looks again one delay later, so a slow one among them is hedged as soon as the allowance
has grown, rather than held for its whole slow attempt.

| configuration | fast: extra requests | fast: p99 | fast: over %s | slow: extra requests | slow: p99 | slow: over %s |
|---|---:|---:|---:|---:|---:|---:|
`, secs(s.Shift), s.ShiftBy, ms(st.Fast), ms(st.Slow), pct(st.SlowShare), ms(s.Delay), ms(time.Duration(float64(s.Delay)*s.ShiftBy)),
		ms(time.Duration(slowCut*float64(s.Tail.Slow))), ms(time.Duration(slowCut*float64(st.Slow))))
	for _, r := range s.ShiftRuns {
		w.p("| %s | %s | %s | %s | %s | %s | %s |\n", s.label(r),
			pct(extraIn(r, fast[0], fast[1])), ms(bench.Quantile(r.Latencies(fast[0], fast[1]), 0.99)), pct(unrescued(r, fast[0], fast[1], s.Tail.Slow)),
			pct(extraIn(r, slow[0], slow[1])), ms(bench.Quantile(r.Latencies(slow[0], slow[1]), 0.99)), pct(unrescued(r, slow[0], slow[1], st.Slow)))
	}

	n := int(s.Shift / time.Second)
	a, q := s.shifted(nameAdaptive), s.shifted(nameFailsafeQ)
	as, qs := a.Seconds(n), q.Seconds(n)
	w.p(`
Second by second: the hedge delay of the adaptive policies (the median of the hedges sent in
that second: retryhttp's `+"`RetryEvent.Delay`"+`; for failsafe-go, which reports no delay, the
time from the request's start to its hedge), with the hedges sent; the shift is at the start
of second %d.

| second | %s: delay | hedges | %s: delay | hedges |
|---:|---:|---:|---:|---:|
`, n/2, s.label(a), s.label(q))
	for i := range n {
		w.p("| %d | %s | %d | %s | %d |\n", i, msOrDash(as[i].Delay), as[i].Hedges, msOrDash(qs[i].Delay), qs[i].Hedges)
	}

	w.p("\nExtra requests, second by second:\n\n")
	s.perSecond(w, func(sec bench.Second) string { return pct(sec.Extra()) })
	w.p("\np99 of the requests that began in each second:\n\n")
	s.perSecond(w, func(sec bench.Second) string { return ms(sec.P99) })
	w.p("\n")
}

// perSecond writes a table of one figure per configuration and second of
// the shift.
func (s *study) perSecond(w *writer, cell func(bench.Second) string) {
	n := int(s.Shift / time.Second)
	w.p("| second |")
	for _, r := range s.ShiftRuns {
		w.p(" %s |", s.label(r))
	}
	w.p("\n|---:|%s\n", strings.Repeat("---:|", len(s.ShiftRuns)))
	secs := make([][]bench.Second, len(s.ShiftRuns))
	for i, r := range s.ShiftRuns {
		secs[i] = r.Seconds(n)
	}
	for i := range n {
		w.p("| %d |", i)
		for j := range s.ShiftRuns {
			w.p(" %s |", cell(secs[j][i]))
		}
		w.p("\n")
	}
}

func msOrDash(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	return ms(d)
}

// secs formats a duration in seconds.
func secs(d time.Duration) string { return fmt.Sprintf("%g s", d.Seconds()) }

// h3Section writes the section on hedging over HTTP/3: its runs, and the
// same configurations' steady runs over HTTP/1.1, with the connections the
// server accepted and the losers it saw canceled.
func (s *study) h3Section(w *writer) {
	h1n, h1a := s.steady(nameNone), s.steady(nameAdaptive)
	h3n, h3a := find(s.H3Runs, nameNone), find(s.H3Runs, nameAdaptive)
	w.p(`## Over HTTP/3: a loser costs a stream reset, not a connection

HTTP/1.1 cannot cancel a request in flight but by closing its connection: when a hedged
request is answered, the attempt that lost (the hedge, or the first attempt it beat) takes its
connection with it, and the pool dials another for a later request. HTTP/3 sends each request
on a stream of a QUIC connection that many requests share: quic-go's `+"`http3.Transport`"+`
cancels the loser by resetting its stream with H3_REQUEST_CANCELLED, and the connection goes
on. Here the load of the steady runs (%d callers, the same server latencies, %s per
configuration in %s, each round's HTTP/3 runs after its HTTP/1.1 ones, on the same
draws) is served by quic-go's `+"`http3.Server`"+` on a loopback UDP port (TLS 1.3 with a self-signed
certificate, as QUIC requires), and sent by retryhttp over
`+"`h3retry.NewBase(&http3.Transport{...})`"+`, which keeps one connection per host: **no hedging**
and **%s** (`+"`Policy{Hedge: &Hedge{}}`"+`) as above. The HTTP/1.1 rows are those
configurations' steady runs above (plain TCP, go-cleanhttp's pool). This section's runs alone,
printing it:

    cd bench && go run ./cmd/hedging -h3only

The server counts the connections it accepted (TCP ones, or QUIC ones through
`+"`http3.Server.ConnContext`"+`) and the requests it received whose context ended before their
answer; over HTTP/3 it then writes the answer's header to each of those, and counts those the
write finds reset by the client with H3_REQUEST_CANCELLED. Losers at the server are the
requests it received beyond those answered (a hedge canceled before it was sent never arrives;
a loser that answered before its rival's answer was read is not canceled).

| protocol | configuration | requests | p50 | p99 | p99.9 | extra requests | hedges | losers at the server | canceled on the server | streams reset (H3_REQUEST_CANCELLED) | connections per run |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
`, s.Workers, secs(s.Steady), plural(s.Rounds, "round"), nameAdaptive)
	row := func(proto bench.Proto, r bench.HedgeResult) {
		ls := r.Latencies(0, s.Steady)
		resets := "–"
		if proto == bench.HTTP3 {
			resets = fmt.Sprint(r.Resets)
		}
		w.p("| %s | %s | %d | %s | %s | %s | %s | %d | %d | %d | %s | %s |\n", proto, s.label(r), len(ls),
			ms(bench.Quantile(ls, 0.5)), ms(bench.Quantile(ls, 0.99)), ms(bench.Quantile(ls, 0.999)),
			pct(r.Extra()), len(r.Hedges), losers(r), r.Canceled, resets, s.perRun(r.Conns))
	}
	row(bench.HTTP1, h1n)
	row(bench.HTTP1, h1a)
	row(bench.HTTP3, h3n)
	row(bench.HTTP3, h3a)

	noun := "connections"
	if s.perRun(h3a.Conns) == "1" {
		noun = "connection"
	}
	same := "as many as without hedging"
	if h3a.Conns != h3n.Conns {
		same = "against " + s.perRun(h3n.Conns) + " without hedging"
	}
	w.p(`
Over HTTP/3, %s's %d hedges left %d losers at the server, %d of them canceled
there, %d by a stream reset with H3_REQUEST_CANCELLED; the server accepted %s QUIC %s
per run, %s. Over HTTP/1.1, the same policy's %d hedges left %d losers at the
server, %d of them canceled there by their connection's closing, and the server accepted %s
connections per run, against %s without hedging, for %d callers: a loser's connection is
closed, and a hedge canceled before it was sent may have dialed one that the pool keeps.
QUIC runs in user space, over UDP, and encrypts, where the HTTP/1.1 server here is plain TCP:
compare the p50s, not only the tails.

`, nameAdaptive, len(h3a.Hedges), losers(h3a), h3a.Canceled, h3a.Resets, s.perRun(h3a.Conns),
		noun, same,
		len(h1a.Hedges), losers(h1a), h1a.Canceled, s.perRun(h1a.Conns), s.perRun(h1n.Conns), s.Workers)
}

// plural returns n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// losers returns the requests the server received in r beyond those
// answered.
func losers(r bench.HedgeResult) int {
	n := -len(r.Calls)
	for _, a := range r.Arrivals {
		n += a
	}
	return n
}

// perRun formats n, counted over the study's rounds, per run.
func (s *study) perRun(n int) string {
	if n%s.Rounds == 0 {
		return fmt.Sprint(n / s.Rounds)
	}
	return fmt.Sprintf("%.1f", float64(n)/float64(s.Rounds))
}
