package bench

import (
	"net/http"
	"sync"
	"time"
)

// A Storm describes a fleet of clients sending a steady stream of GETs to a
// dependency that goes down and comes back. Each client is one RoundTripper
// of the library under test (so one budget, where the library has one).
// Run it inside a testing/synctest bubble: time is fake, so a run of
// minutes of virtual time takes seconds and no timer jitter is involved.
type Storm struct {
	Clients int           // RoundTrippers in the fleet
	Rate    int           // logical requests per second per client
	Healthy time.Duration // load before the outage
	Outage  time.Duration // the dependency answers 503 to every attempt
	After   time.Duration // load after the dependency recovered
	Steady  time.Duration // the end of the outage counted as its steady state
	Latency time.Duration // how long the dependency takes to answer an attempt
}

// Bucket is the width of the time slices attempts are counted in.
const Bucket = 100 * time.Millisecond

// A StormResult is what one library did to the dependency.
type StormResult struct {
	// Calls started in each phase, and those of them that succeeded.
	HealthyCalls, OutageCalls, AfterCalls       int
	HealthyOK, OutageOK, AfterOK                int
	OutageAttempts, SteadyAttempts, SteadyCalls int
	// Attempts received per Bucket, from the start of the load.
	Buckets []int
}

// AttemptsPerCall is the attempts the dependency received during the
// outage per logical request started during it.
func (r *StormResult) AttemptsPerCall() float64 {
	return float64(r.OutageAttempts) / float64(r.OutageCalls)
}

// SteadyAttemptsPerCall is AttemptsPerCall over the last Steady of the
// outage only, once the retries of calls made before the outage are over.
func (r *StormResult) SteadyAttemptsPerCall() float64 {
	return float64(r.SteadyAttempts) / float64(r.SteadyCalls)
}

// Peak returns the most attempts received in one Bucket.
func (r *StormResult) Peak() int {
	peak := 0
	for _, n := range r.Buckets {
		peak = max(peak, n)
	}
	return peak
}

// OutageSuccess is the share of the calls started during the outage that
// succeeded: retries that reached the dependency after it recovered.
func (r *StormResult) OutageSuccess() float64 {
	return float64(r.OutageOK) / float64(r.OutageCalls)
}

// AfterSuccess is the share of the calls started after recovery that
// succeeded.
func (r *StormResult) AfterSuccess() float64 {
	return float64(r.AfterOK) / float64(r.AfterCalls)
}

// OfferedPerBucket is the logical requests the fleet starts per Bucket.
func (s *Storm) OfferedPerBucket() float64 {
	return float64(s.Clients*s.Rate) * Bucket.Seconds()
}

// Run sends the storm's load through lib and returns once every call has
// ended. It must run inside a synctest bubble.
func (s *Storm) Run(lib Lib) StormResult {
	start := time.Now()
	down := start.Add(s.Healthy)
	up := down.Add(s.Outage)
	end := up.Add(s.After)
	dep := &dependency{start: start, down: down, up: up, steadyFrom: up.Add(-s.Steady), latency: s.Latency}

	var (
		mu  sync.Mutex
		res StormResult
		wg  sync.WaitGroup
	)
	record := func(at time.Time, ok bool) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case at.Before(down):
			res.HealthyCalls++
			res.HealthyOK += b2i(ok)
		case at.Before(up):
			res.OutageCalls++
			res.OutageOK += b2i(ok)
			if !at.Before(dep.steadyFrom) {
				res.SteadyCalls++
			}
		default:
			res.AfterCalls++
			res.AfterOK += b2i(ok)
		}
	}
	interval := time.Second / time.Duration(s.Rate)
	for c := range s.Clients {
		rt := lib.Wrap(dep)
		first := start.Add(interval * time.Duration(c) / time.Duration(s.Clients))
		wg.Go(func() {
			for at := first; at.Before(end); at = at.Add(interval) {
				time.Sleep(time.Until(at))
				wg.Go(func() { record(at, call(rt)) })
			}
		})
	}
	wg.Wait()
	dep.mu.Lock()
	defer dep.mu.Unlock()
	res.OutageAttempts, res.SteadyAttempts, res.Buckets = dep.outage, dep.steady, dep.buckets
	return res
}

// call makes one logical GET and reports whether it succeeded.
func call(rt http.RoundTripper) bool {
	req, err := http.NewRequest(http.MethodGet, "http://dependency.test/", nil)
	if err != nil {
		panic(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dependency answers 503 to the attempts that arrive in [down, up) and 200
// to the others, after its latency, and counts the attempts.
type dependency struct {
	start, down, up, steadyFrom time.Time
	latency                     time.Duration

	mu             sync.Mutex
	buckets        []int
	outage, steady int
}

func (d *dependency) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	outage := !now.Before(d.down) && now.Before(d.up)
	d.mu.Lock()
	i := int(now.Sub(d.start) / Bucket)
	for len(d.buckets) <= i {
		d.buckets = append(d.buckets, 0)
	}
	d.buckets[i]++
	if outage {
		d.outage++
		if !now.Before(d.steadyFrom) {
			d.steady++
		}
	}
	d.mu.Unlock()
	if req.Body != nil {
		req.Body.Close()
	}
	time.Sleep(d.latency)
	status := http.StatusOK
	if outage {
		status = http.StatusServiceUnavailable
	}
	return &http.Response{
		Status:     http.StatusText(status),
		StatusCode: status,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{},
		Body:       http.NoBody,
		Request:    req,
	}, nil
}
