package bench

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"

	"github.com/retryhttp/retryhttp"
)

// An Overload describes one client (one RoundTripper) offering a dependency
// more calls than it can serve, then fewer: HotRate calls a second for Hot,
// then CoolRate a second for Cool, evenly spaced. The dependency serves
// Capacity attempts a second, counted in slices of OverloadSlot (a tenth
// of Capacity in each), and answers 503 to the attempts beyond. Run it
// inside a testing/synctest bubble.
type Overload struct {
	Capacity          int // attempts served a second
	HotRate, CoolRate int // calls started a second
	Hot, Cool         time.Duration
	Latency           time.Duration // how long the dependency takes to answer an attempt

	// Settle is how long into the cool phase its calls are counted
	// apart (OverloadResult.Early): the time a client's memory of the
	// overload may take to fade.
	Settle time.Duration
}

// OverloadSlot is the width of the slices of time an Overload's dependency
// counts its capacity in.
const OverloadSlot = 100 * time.Millisecond

// An OverloadResult is what one library did to the overloaded dependency
// and for its callers. Every call is followed to its end.
type OverloadResult struct {
	HotCalls, HotOK int // calls started in the hot phase, and those that succeeded

	// Attempts of the hot phase's calls the dependency received, and
	// those it served.
	Received, Accepted int

	// Served is the attempts the dependency served while the hot phase
	// lasted, of any call.
	Served int

	// Unsent is the hot calls that never reached the dependency: the
	// library refused them in the client (throttled, or a circuit open).
	Unsent int

	// Calls of the cool phase started in its first Settle (early) and
	// after it (late), and those that succeeded.
	EarlyCalls, EarlyOK int
	LateCalls, LateOK   int

	MostAttempts int // the most attempts one call made
}

// PerAccepted is what the dependency received per attempt it accepted, of
// the hot phase's calls: the offered load over the capacity without
// retries, more with them, less when the client refuses calls itself.
func (r *OverloadResult) PerAccepted() float64 {
	return float64(r.Received) / float64(max(r.Accepted, 1))
}

// Goodput is the share of the dependency's capacity that it spent serving
// attempts while the hot phase lasted.
func (o *Overload) Goodput(r *OverloadResult) float64 {
	return float64(r.Served) / (float64(o.Capacity) * o.Hot.Seconds())
}

// HotSuccess is the share of the hot phase's calls that succeeded.
func (r *OverloadResult) HotSuccess() float64 { return ratio(r.HotOK, r.HotCalls) }

// EarlySuccess is the share of the cool phase's calls started in its first
// Settle that succeeded.
func (r *OverloadResult) EarlySuccess() float64 { return ratio(r.EarlyOK, r.EarlyCalls) }

// LateSuccess is the share of the cool phase's calls started after its
// first Settle that succeeded.
func (r *OverloadResult) LateSuccess() float64 { return ratio(r.LateOK, r.LateCalls) }

// UnsentShare is the share of the hot phase's calls that never reached the
// dependency.
func (r *OverloadResult) UnsentShare() float64 { return ratio(r.Unsent, r.HotCalls) }

func ratio(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// The URL paths of the calls of each phase: prefix, then the call's number.
const (
	hotPath  = "/hot/"
	coolPath = "/cool/"
)

// Run offers the load through lib and returns once every call has ended.
// It must run inside a synctest bubble.
func (o *Overload) Run(lib Lib) OverloadResult {
	dep := newDependency(o.Latency, func(time.Duration) bool { return false },
		int(int64(o.Capacity)*int64(OverloadSlot)/int64(time.Second)))
	dep.slot = OverloadSlot
	rt := lib.Wrap(dep)
	start := dep.start

	var (
		mu  sync.Mutex
		res OverloadResult
		wg  sync.WaitGroup
	)
	// offer starts rate calls a second for d from begin (since start).
	offer := func(prefix string, begin, d time.Duration, rate int, done func(at time.Duration, ok bool)) {
		n := int(d.Seconds() * float64(rate))
		for i := range n {
			at := begin + d*time.Duration(i)/time.Duration(n)
			time.Sleep(time.Until(start.Add(at)))
			wg.Go(func() {
				ok := call(rt, fmt.Sprintf("%s%d", prefix, i))
				mu.Lock()
				defer mu.Unlock()
				done(at-begin, ok)
			})
		}
	}
	offer(hotPath, 0, o.Hot, o.HotRate, func(_ time.Duration, ok bool) {
		res.HotCalls++
		res.HotOK += b2i(ok)
	})
	offer(coolPath, o.Hot, o.Cool, o.CoolRate, func(at time.Duration, ok bool) {
		if at < o.Settle {
			res.EarlyCalls++
			res.EarlyOK += b2i(ok)
		} else {
			res.LateCalls++
			res.LateOK += b2i(ok)
		}
	})
	wg.Wait()

	reached := map[string]bool{}
	for _, a := range dep.sorted() {
		if a.at < o.Hot && a.served {
			res.Served++
		}
		if strings.HasPrefix(a.call, hotPath) {
			reached[a.call] = true
			res.Received++
			res.Accepted += b2i(a.served)
		}
	}
	res.Unsent = res.HotCalls - len(reached)
	res.MostAttempts = dep.most()
	return res
}

// OverloadLibs returns the libraries of the overload scenario, each as a
// user gets it (see Defaults) and, besides, retryhttp with adaptive
// throttling and failsafe-go with its circuit breaker. The first entry is
// the bare base.
func OverloadLibs() []Lib {
	var libs []Lib
	for _, l := range Defaults(0) {
		switch l.Name {
		case "bare", "retryablehttp":
			libs = append(libs, l)
		case "retryhttp":
			libs = append(libs, l, Lib{Name: "retryhttp-throttle", Attempts: l.Attempts, Wrap: func(base http.RoundTripper) http.RoundTripper {
				// Adaptive throttling with its defaults (K 2, a window of
				// 10 s), and the default budget.
				return &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Throttle: &retryhttp.Throttle{}}}
			}})
		case "failsafe-go":
			libs = append(libs, l, Lib{Name: "failsafe-go-breaker", Attempts: l.Attempts, Wrap: func(base http.RoundTripper) http.RoundTripper {
				// The retry policy as in Defaults, around a circuit breaker
				// with its defaults (opens on one failure, stays open a
				// minute, closes on one success) that counts as failures
				// what the retry policy retries: any error, 429 and 5xx
				// but 501.
				breaker := circuitbreaker.NewBuilder[*http.Response]().HandleIf(func(resp *http.Response, err error) bool {
					return err != nil || resp.StatusCode == http.StatusTooManyRequests ||
						resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented
				}).Build()
				return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().Build(), breaker)
			}})
		}
	}
	return libs
}
