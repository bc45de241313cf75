package bench

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var (
	scenariosOut  = flag.String("scenarios.out", "", "append the scenarios' figures to this file, in the benchmark format benchstat reads")
	scenariosFull = flag.Bool("scenarios.full", false, "run the scenarios at the size BENCHMARKS.md reports, not their quick variants")
)

// The scenarios BENCHMARKS.md reports. Every dependency takes 10 ms to
// answer an attempt.
var (
	// storm: one client sending 200 calls a second; the dependency is
	// healthy for 10 s, down for 60 s, then healthy again for 5 s.
	storm = Storm{Clients: 1, Rate: 200, Healthy: 10 * time.Second, Outage: time.Minute, After: 5 * time.Second, Latency: 10 * time.Millisecond}
	// fleet: 100 clients of 12 calls a second each (1,200 a second in
	// all) into a dependency down from the start for 30 s, then healthy
	// for 5 s.
	fleet = Storm{Clients: 100, Rate: 12, Outage: 30 * time.Second, After: 5 * time.Second, Latency: 10 * time.Millisecond}
	// blip: 1,000 callers at once, at most 8 attempts each; the dependency
	// is down for 1 s, then serves 20 attempts per 10 ms.
	blip         = Blip{Callers: 1000, Down: time.Second, Capacity: 20, Latency: 10 * time.Millisecond}
	blipAttempts = 8
)

// The quick variants go test runs: the same rates, shorter phases.
var (
	quickStorm = Storm{Clients: 1, Rate: 200, Healthy: 2 * time.Second, Outage: 15 * time.Second, After: 2 * time.Second, Latency: 10 * time.Millisecond}
	quickFleet = Storm{Clients: 100, Rate: 12, Outage: 10 * time.Second, After: 2 * time.Second, Latency: 10 * time.Millisecond}
)

// figures opens the file the scenarios' figures go to, or returns
// io.Discard.
func figures(t *testing.T) io.Writer {
	if *scenariosOut == "" {
		return io.Discard
	}
	f, err := os.OpenFile(*scenariosOut, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// sized returns the scenario full with -scenarios.full, else quick.
func sized[S any](quick, full S) S {
	if *scenariosFull {
		return full
	}
	return quick
}

// TestStorm runs the storm through each library as a user gets it, in fake
// time. For every library, calls made while the dependency is healthy all
// succeed, and so do calls made after it recovered; no call makes more
// attempts than the library's limit, and a library without a budget
// reaches it; without retries the dependency sees one attempt per call and
// no outage call succeeds.
//
// retryhttp with its default budget makes at most 1.30 attempts per call
// over the outage, puts at most twice the offered load (40 attempts) in
// any 100 ms while the dependency is down, and holds no call longer than
// 15 s. The budget promises that: the outage's first failure makes the
// host down, and its retries then wait in line for news of it instead of
// going. The client's own first attempts, failing every 5 ms, are that
// news, so no probe goes either (it measures 1 attempt per call), and each
// retry leaves the line when its schedule ends (0.7 s). After the recovery
// the retries still in line go as the host answers them: one for each
// success, paid by the credit, which a retry that succeeds gives back. This
// dependency answers at once, so they all go in its first instant back
// (the recovery's peak, reported, not bounded: each was held inside its
// schedule, and the host answers every one).
func TestStorm(t *testing.T) {
	s := sized(quickStorm, storm)
	runStorm(t, "Storm", s, func(t *testing.T, r StormResult) {
		if r.AttemptsPerCall() > 1.30 {
			t.Errorf("%.4f attempts per call in the outage, want at most 1.30", r.AttemptsPerCall())
		}
		if peak := 2 * s.Offered(); float64(max(r.StartPeak.Attempts, r.RestPeak.Attempts)) > peak {
			t.Errorf("peak %v, then %v per 100 ms while down, want at most %.0f (twice the offered load)",
				r.StartPeak, r.RestPeak, peak)
		}
		if r.Longest > 15*time.Second {
			t.Errorf("a call was held %v, want at most 15 s", r.Longest)
		}
	})
}

// TestFleet runs the fleet through each library as a user gets it: each
// client is a RoundTripper of its own. The checks of TestStorm for every
// library hold.
//
// retryhttp's fleet makes at most 1.35 attempts per call over the outage,
// and at most twice the 120 offered (240 attempts) reach the dependency in
// any 100 ms of the outage's first second. Each client's first request to
// fail is alone (nothing else in flight: its requests are 83 ms apart and
// answered at once) and gets its policy: its first retry within 100 ms of
// its failure (full jitter). A hundred clients failing together put those
// hundred first retries in about one 100 ms window, beside the 120 first
// attempts. Every later request of a client waits in line, on the evidence
// of the first's failures, so the retries stop there. (BENCHMARKS.md's
// target of 1.5 times is one that a budget that lets a lone request have
// its policy cannot hold at this onset.)
func TestFleet(t *testing.T) {
	s := sized(quickFleet, fleet)
	runStorm(t, "Fleet", s, func(t *testing.T, r StormResult) {
		if r.AttemptsPerCall() > 1.35 {
			t.Errorf("%.4f attempts per call in the outage, want at most 1.35", r.AttemptsPerCall())
		}
		if peak := 2 * s.Offered(); float64(r.StartPeak.Attempts) > peak {
			t.Errorf("peak %v per 100 ms in the outage's first second, want at most %.0f (twice the offered load)",
				r.StartPeak, peak)
		}
	})
}

// runStorm runs s through every library, checks what holds for all of them
// and, with check, retryhttp's figures; it writes the figures named name.
func runStorm(t *testing.T, name string, s Storm, check func(*testing.T, StormResult)) {
	out := figures(t)
	for _, lib := range Defaults(0) {
		t.Run(lib.Name, func(t *testing.T) {
			skipUnderRace(t, lib)
			var r StormResult
			synctest.Test(t, func(t *testing.T) { r = s.Run(lib) })
			t.Logf("%.4f attempts per call in the outage, %.1f %% of its calls served (%.1f %% after it); "+
				"peak %v (offered %.0f): at its start %v, later %v, after it %v; longest call %v",
				r.AttemptsPerCall(), 100*r.OutageSuccess(), 100*r.AfterSuccess(), r.Peak, s.Offered(),
				r.StartPeak, r.RestPeak, r.RecoveryPeak, r.Longest)

			if r.HealthyOK != r.HealthyCalls || r.AfterOK != r.AfterCalls {
				t.Errorf("healthy calls %d/%d succeeded, calls after recovery %d/%d; want all",
					r.HealthyOK, r.HealthyCalls, r.AfterOK, r.AfterCalls)
			}
			if want := s.Rate * s.Clients * int(s.Outage/time.Second); r.OutageCalls != want {
				t.Errorf("%d calls during the outage, want %d", r.OutageCalls, want)
			}
			checkAttempts(t, lib, r.MostAttempts)
			switch lib.Name {
			case "bare":
				if r.OutageAttempts != r.OutageCalls || r.OutageOK != 0 {
					t.Errorf("%d attempts and %d successes for %d outage calls, want one attempt each and none",
						r.OutageAttempts, r.OutageOK, r.OutageCalls)
				}
			case "retryhttp":
				check(t, r)
			}
			fmt.Fprintf(out, "Benchmark%s/lib=%s 1 %d max-attempts %.4f attempts/call %.2f outage-success-%% %.2f after-success-%% "+
				"%d peak/100ms %d down-peak/100ms %d start-peak/100ms %d recovery-peak/100ms %.3f longest-call-sec\n",
				name, lib.Name, lib.Attempts, r.AttemptsPerCall(), 100*r.OutageSuccess(), 100*r.AfterSuccess(),
				r.Peak.Attempts, max(r.StartPeak.Attempts, r.RestPeak.Attempts), r.StartPeak.Attempts,
				r.RecoveryPeak.Attempts, r.Longest.Seconds())
		})
	}
}

// TestBlip runs the blip through each library set to at most 8 attempts.
// No call makes more attempts than that, and a library without a budget
// reaches it; without retries no caller is served.
//
// retryhttp with its default budget serves at least 99 % of the callers
// with at most 3 attempts each on average, and the dependency, once up,
// never gets more than 80 attempts in 10 ms (four times what it serves).
// The budget promises that: the crowd's first failure holds every retry in
// line; probes, a silence of their backoff apart (100 ms for a first
// retry), fail until the dependency is back, and the first that succeeds
// lets go the retries the credit pays for; each that succeeds gives its
// retry back and lets the next go, and each that fails keeps it spent, so
// at most the credit's worth are unanswered at once. Every caller waits in
// line only while its schedule lasts (8 attempts: 12.7 s of waits), which
// outlasts the outage: it measures every caller served, with about 2.0
// attempts each, the last at about 4.2 s, and 5 attempts in the busiest
// 10 ms.
func TestBlip(t *testing.T) {
	b := blip
	out := figures(t)
	for _, lib := range Defaults(blipAttempts) {
		t.Run(lib.Name, func(t *testing.T) {
			skipUnderRace(t, lib)
			var r BlipResult
			synctest.Test(t, func(t *testing.T) { r = b.Run(lib) })
			t.Logf("%d/%d callers served, %.2f attempts per caller, peak %v per 10 ms once up, "+
				"last caller served at %v, last call ended at %v",
				r.Served, r.Callers, r.AttemptsPerCaller(), r.Peak, r.LastServed, r.LastEnded)

			checkAttempts(t, lib, r.MostAttempts)
			switch lib.Name {
			case "bare":
				if r.Attempts != r.Callers || r.Served != 0 {
					t.Errorf("%d attempts and %d served for %d callers, want one attempt each and none", r.Attempts, r.Served, r.Callers)
				}
			case "retryhttp":
				if r.Success() < 0.99 {
					t.Errorf("%.1f %% of the callers served, want at least 99 %%", 100*r.Success())
				}
				if r.AttemptsPerCaller() > 3 {
					t.Errorf("%.2f attempts per caller, want at most 3", r.AttemptsPerCaller())
				}
				if r.Peak.Attempts > 80 {
					t.Errorf("peak %v per 10 ms once up, want at most 80", r.Peak)
				}
			}
			served := "" // no time when no caller was served
			if r.Served > 0 {
				served = fmt.Sprintf(" %.3f last-served-sec", r.LastServed.Seconds())
			}
			fmt.Fprintf(out, "BenchmarkBlip/lib=%s 1 %d max-attempts %.2f success-%% %.4f attempts/caller %d peak/10ms%s %.3f last-ended-sec\n",
				lib.Name, lib.Attempts, 100*r.Success(), r.AttemptsPerCaller(), r.Peak.Attempts, served, r.LastEnded.Seconds())
		})
	}
}

// checkAttempts checks that no call made more attempts than lib's limit,
// and that a library without a budget reached it: the limit reported is
// the one in force.
func checkAttempts(t *testing.T, lib Lib, most int) {
	t.Helper()
	budgeted := lib.Name == "retryhttp" || lib.Name == "failsafe-go-budget"
	if most > lib.Attempts || (!budgeted && most != lib.Attempts) {
		t.Errorf("a call made %d attempts, the limit is %d", most, lib.Attempts)
	}
}

// The overload scenario BENCHMARKS.md reports: a dependency serving 100
// attempts a second (10 per 100 ms) is offered 300 calls a second for 60 s
// by one client, then 80 a second for 20 s. go test runs a quick variant:
// 20 s of overload, then 15 s within capacity.
var (
	overload      = Overload{Capacity: 100, HotRate: 300, Hot: time.Minute, CoolRate: 80, Cool: 20 * time.Second, Settle: 10 * time.Second, Latency: 10 * time.Millisecond}
	quickOverload = Overload{Capacity: 100, HotRate: 300, Hot: 20 * time.Second, CoolRate: 80, Cool: 15 * time.Second, Settle: 10 * time.Second, Latency: 10 * time.Millisecond}
)

// TestOverload runs the overload through each library of OverloadLibs. For
// every library no call makes more attempts than its limit; without
// retries the dependency receives the offered load, 3 attempts per one it
// accepts, and serves at its capacity. retryhttp with adaptive throttling
// sends the dependency at most 2.2 attempts per one it accepts while
// keeping its goodput at 95 % of its capacity or more, and, 10 s after the
// load fell within capacity, serves at least 99 % of the calls.
func TestOverload(t *testing.T) {
	o := sized(quickOverload, overload)
	out := figures(t)
	for _, lib := range OverloadLibs() {
		t.Run(lib.Name, func(t *testing.T) {
			skipUnderRace(t, lib)
			var r OverloadResult
			synctest.Test(t, func(t *testing.T) { r = o.Run(lib) })
			t.Logf("%.2f received per accepted, goodput %.1f %% of capacity, %.1f %% of the overload's calls served "+
				"(%.1f %% never sent); at %d/s %.1f %% served in the first %v, %.1f %% after",
				r.PerAccepted(), 100*o.Goodput(&r), 100*r.HotSuccess(), 100*r.UnsentShare(),
				o.CoolRate, 100*r.EarlySuccess(), o.Settle, 100*r.LateSuccess())

			if want := o.HotRate * int(o.Hot/time.Second); r.HotCalls != want {
				t.Errorf("%d calls in the overload, want %d", r.HotCalls, want)
			}
			if r.MostAttempts > lib.Attempts {
				t.Errorf("a call made %d attempts, the limit is %d", r.MostAttempts, lib.Attempts)
			}
			switch lib.Name {
			case "bare":
				want := float64(o.HotRate) / float64(o.Capacity)
				if math.Abs(r.PerAccepted()-want) > 0.01 || o.Goodput(&r) < 0.999 || r.Unsent != 0 {
					t.Errorf("%.3f received per accepted, goodput %.3f, %d unsent; want %.2f, 1 and none",
						r.PerAccepted(), o.Goodput(&r), r.Unsent, want)
				}
			case "retryhttp-throttle":
				if r.PerAccepted() > 2.2 {
					t.Errorf("%.3f received per accepted, want at most 2.2", r.PerAccepted())
				}
				if o.Goodput(&r) < 0.95 {
					t.Errorf("goodput %.1f %% of capacity, want at least 95 %%", 100*o.Goodput(&r))
				}
				if r.LateSuccess() < 0.99 {
					t.Errorf("%.1f %% of the calls at %d/s after %v served, want at least 99 %%", 100*r.LateSuccess(), o.CoolRate, o.Settle)
				}
			}
			fmt.Fprintf(out, "BenchmarkOverload/lib=%s 1 %d max-attempts %.4f received/accepted %.2f goodput-%% "+
				"%.2f hot-success-%% %.2f unsent-%% %.2f early-success-%% %.2f late-success-%%\n",
				lib.Name, lib.Attempts, r.PerAccepted(), 100*o.Goodput(&r),
				100*r.HotSuccess(), 100*r.UnsentShare(), 100*r.EarlySuccess(), 100*r.LateSuccess())
		})
	}
}

// skipUnderRace skips the scenario of a failsafe-go library when the race
// detector runs: with it, the Go runtime of this module's go directive
// (1.26) crashes now and then (a SIGSEGV in the runtime's timer code, or a
// ThreadSanitizer CHECK failure) while failsafe-go's retry executor
// selects on a timer in a synctest bubble, before any data race is
// reported. The scenarios run failsafe-go without the race detector.
func skipUnderRace(t *testing.T, lib Lib) {
	if raceEnabled && strings.HasPrefix(lib.Name, "failsafe-go") {
		t.Skip("failsafe-go's timers in a synctest bubble crash the race-enabled runtime")
	}
}
