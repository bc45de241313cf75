package bench

import (
	"fmt"
	"sync"
	"time"
)

// A Blip describes a crowd of callers of one RoundTripper that all start
// at once while the dependency is down for a moment; it then serves a
// fixed capacity and fails the attempts beyond it. Run it inside a
// testing/synctest bubble.
type Blip struct {
	Callers  int           // calls started at once, through one RoundTripper
	Down     time.Duration // the dependency answers 503 to every attempt until then
	Capacity int           // then it serves this many attempts per Slot (503 beyond)
	Latency  time.Duration // how long the dependency takes to answer an attempt
}

// A BlipResult is what one library did for the callers and to the
// dependency. Every call is followed to its end.
type BlipResult struct {
	Callers, Served int
	Attempts        int           // attempts the dependency received
	MostAttempts    int           // the most attempts one call made
	Peak            Peak          // the busiest Slot-long window once up; At is since it came up
	LastServed      time.Duration // when the last call that succeeded ended, since the start
	LastEnded       time.Duration // when the last call ended, since the start
}

// AttemptsPerCaller is the attempts the dependency received per caller.
func (r *BlipResult) AttemptsPerCaller() float64 {
	return float64(r.Attempts) / float64(r.Callers)
}

// Success is the share of the callers served.
func (r *BlipResult) Success() float64 {
	return float64(r.Served) / float64(r.Callers)
}

// Run starts the blip's callers through lib and returns once every call has
// ended. It must run inside a synctest bubble.
func (b *Blip) Run(lib Lib) BlipResult {
	dep := newDependency(b.Latency, func(at time.Duration) bool { return at < b.Down }, b.Capacity)
	rt := lib.Wrap(dep)
	var (
		mu  sync.Mutex
		res = BlipResult{Callers: b.Callers}
		wg  sync.WaitGroup
	)
	for i := range b.Callers {
		wg.Go(func() {
			ok := call(rt, fmt.Sprintf("/%d", i))
			took := time.Since(dep.start)
			mu.Lock()
			defer mu.Unlock()
			res.LastEnded = max(res.LastEnded, took)
			if ok {
				res.Served++
				res.LastServed = max(res.LastServed, took)
			}
		})
	}
	wg.Wait()
	res.Attempts = dep.count(0, forever)
	res.MostAttempts = dep.most()
	p := dep.peak(b.Down, forever, Slot)
	if p.n > 0 {
		res.Peak = Peak{Attempts: p.n, Retries: p.retries, At: p.at - b.Down}
	}
	return res
}
