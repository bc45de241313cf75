package bench

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

var stormOut = flag.String("storm.out", "", "append the storm's figures to this file, in the benchmark format benchstat reads")

// fleet is the storm BENCHMARKS.md reports: 4 clients of 300 requests per
// second each (1200/s in all), 3 s healthy, a 20 s outage, 5 s after it.
var fleet = Storm{
	Clients: 4,
	Rate:    300,
	Healthy: 3 * time.Second,
	Outage:  20 * time.Second,
	After:   5 * time.Second,
	Steady:  10 * time.Second,
	Latency: 10 * time.Millisecond,
}

// TestStorm runs the fleet through each library as a user gets it, in fake
// time, and checks what holds for every library whatever its strategy:
// calls made while the dependency is healthy all succeed, and so do calls
// made after it recovered; without retries the dependency sees exactly one
// attempt per call and no outage call succeeds.
func TestStorm(t *testing.T) {
	s := fleet
	if testing.Short() {
		s.Clients, s.Rate, s.Outage, s.Steady = 2, 50, 5*time.Second, 2*time.Second
	}
	var out *os.File
	if *stormOut != "" {
		f, err := os.OpenFile(*stormOut, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out = f
	}
	for _, lib := range Defaults() {
		t.Run(lib.Name, func(t *testing.T) {
			var r StormResult
			synctest.Test(t, func(t *testing.T) { r = s.Run(lib) })

			if r.HealthyOK != r.HealthyCalls || r.AfterOK != r.AfterCalls {
				t.Errorf("healthy calls %d/%d succeeded, calls after recovery %d/%d; want all",
					r.HealthyOK, r.HealthyCalls, r.AfterOK, r.AfterCalls)
			}
			if want := s.Rate * s.Clients * int(s.Outage/time.Second); r.OutageCalls != want {
				t.Errorf("%d calls during the outage, want %d", r.OutageCalls, want)
			}
			if lib.Name == "bare" && (r.OutageAttempts != r.OutageCalls || r.OutageOK != 0) {
				t.Errorf("bare: %d attempts and %d successes for %d outage calls, want one attempt each and none",
					r.OutageAttempts, r.OutageOK, r.OutageCalls)
			}
			t.Logf("attempts/call in the outage %.3f (steady state %.3f), peak %d per 100 ms (offered %.0f), "+
				"outage calls succeeded %.1f %%, calls after recovery succeeded %.1f %%",
				r.AttemptsPerCall(), r.SteadyAttemptsPerCall(), r.Peak(), s.OfferedPerBucket(),
				100*r.OutageSuccess(), 100*r.AfterSuccess())
			if out != nil {
				fmt.Fprintf(out, "BenchmarkStorm/lib=%s 1 %.4f attempts/call %.4f steady-attempts/call %d peak-attempts/100ms %.2f outage-success-%% %.2f after-success-%%\n",
					lib.Name, r.AttemptsPerCall(), r.SteadyAttemptsPerCall(), r.Peak(),
					100*r.OutageSuccess(), 100*r.AfterSuccess())
			}
		})
	}
}
