package bench

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// A Storm describes clients sending a steady stream of GETs to a dependency
// that goes down and comes back. Each client is one RoundTripper of the
// library under test (so one budget, where the library has one). Both the
// storm (one busy client) and the fleet (many quiet ones) are Storms.
//
// Run it inside a testing/synctest bubble: time is fake, so a minute of
// traffic takes a fraction of a second and no timer is ever late.
type Storm struct {
	Clients int           // RoundTrippers, each with its own share of the load
	Rate    int           // calls per second per client
	Healthy time.Duration // load before the outage
	Outage  time.Duration // the dependency answers 503 to every attempt
	After   time.Duration // load after the dependency recovered
	Latency time.Duration // how long the dependency takes to answer an attempt
}

// Window is the width of the windows a Storm's peak is counted in.
const Window = 100 * time.Millisecond

// A StormResult is what one library did to the dependency and for its
// callers. Every call is followed to its end, past the end of the load.
type StormResult struct {
	// Calls started in each phase, and those of them that succeeded.
	HealthyCalls, OutageCalls, AfterCalls int
	HealthyOK, OutageOK, AfterOK          int

	OutageAttempts int           // attempts that arrived during the outage
	MostAttempts   int           // the most attempts one call made
	Longest        time.Duration // the longest call, from its start to its end

	// The busiest Window of the whole run; of the outage's first second
	// (its start), of the rest of it, and of the first second after it
	// (the recovery). Each phase's peak counts its own arrivals only.
	// Times are since the outage began.
	Peak, StartPeak, RestPeak, RecoveryPeak Peak
}

// A Peak is the busiest window of arrivals at the dependency.
type Peak struct {
	Attempts int           // arrivals in the window
	Retries  int           // of them, attempts after their call's first
	At       time.Duration // when the window starts
}

func (p Peak) String() string {
	return fmt.Sprintf("%d (%d retries) at %.2f s", p.Attempts, p.Retries, p.At.Seconds())
}

// onset is how long the start of the outage, and the recovery after it,
// last as phases of a StormResult.
const onset = time.Second

// AttemptsPerCall is the attempts the dependency received during the
// outage per call started during it: 1 without retries.
func (r *StormResult) AttemptsPerCall() float64 {
	return float64(r.OutageAttempts) / float64(r.OutageCalls)
}

// OutageSuccess is the share of the calls started during the outage that
// succeeded: their retries reached the dependency after it recovered.
func (r *StormResult) OutageSuccess() float64 {
	return float64(r.OutageOK) / float64(r.OutageCalls)
}

// AfterSuccess is the share of the calls started after the recovery that
// succeeded.
func (r *StormResult) AfterSuccess() float64 {
	return float64(r.AfterOK) / float64(r.AfterCalls)
}

// Offered is the calls the clients start per Window.
func (s *Storm) Offered() float64 {
	return float64(s.Clients*s.Rate) * Window.Seconds()
}

// Run sends the storm's load through lib and returns once every call has
// ended. It must run inside a synctest bubble.
func (s *Storm) Run(lib Lib) StormResult {
	down, up := s.Healthy, s.Healthy+s.Outage
	end := up + s.After
	dep := newDependency(s.Latency, func(at time.Duration) bool { return at >= down && at < up }, 0)
	start := dep.start

	var (
		mu  sync.Mutex
		res StormResult
		wg  sync.WaitGroup
	)
	record := func(at, took time.Duration, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		res.Longest = max(res.Longest, took)
		switch {
		case at < down:
			res.HealthyCalls++
			res.HealthyOK += b2i(ok)
		case at < up:
			res.OutageCalls++
			res.OutageOK += b2i(ok)
		default:
			res.AfterCalls++
			res.AfterOK += b2i(ok)
		}
	}
	for c := range s.Clients {
		rt := lib.Wrap(dep)
		wg.Go(func() {
			// Call n starts at (n + c/Clients) / Rate seconds: the
			// clients' phases are spread evenly over one interval.
			for n := 0; ; n++ {
				at := time.Duration((int64(n)*int64(s.Clients) + int64(c)) * int64(time.Second) / int64(s.Rate*s.Clients))
				if at >= end {
					return
				}
				time.Sleep(time.Until(start.Add(at)))
				path := fmt.Sprintf("/%d/%d", c, n)
				wg.Go(func() {
					ok := call(rt, path)
					record(at, time.Since(start)-at, ok)
				})
			}
		})
	}
	wg.Wait()

	res.OutageAttempts = dep.count(down, up)
	res.MostAttempts = dep.most()
	rel := func(p peak) Peak {
		if p.n == 0 {
			return Peak{}
		}
		return Peak{Attempts: p.n, Retries: p.retries, At: p.at - down}
	}
	res.Peak = rel(dep.peak(0, forever, Window))
	res.StartPeak = rel(dep.peak(down, down+onset, Window))
	res.RestPeak = rel(dep.peak(down+onset, up, Window))
	res.RecoveryPeak = rel(dep.peak(up, up+onset, Window))
	return res
}

// call makes one logical GET of path, reads the answer's body to its end
// and closes it, and reports whether it succeeded.
func call(rt http.RoundTripper, path string) bool {
	req, err := http.NewRequest(http.MethodGet, "http://dependency.test"+path, nil)
	if err != nil {
		panic(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return false
	}
	var buf [512]byte
	_, err = drainBody(resp.Body, buf[:])
	return err == nil && resp.StatusCode == http.StatusOK
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
