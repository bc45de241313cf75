package retryhttp

import (
	"context"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of a Hedge.
const (
	DefaultHedgeQuantile = 0.95
	DefaultHedgeMin      = 2 * time.Millisecond
	DefaultHedgeMax      = time.Second
	DefaultHedgeFraction = 0.05
)

// Hedge configures hedged requests ("The Tail at Scale", Dean and Barroso):
// when a request's first attempt has not answered after a delay, a copy of
// it is sent too, and the first answer that is not a retryable failure
// wins; the other attempts are canceled, and their bodies drained and
// closed.
//
// Only requests that may be sent twice are hedged: idempotent ones, or
// those carrying an idempotency key (the same on every copy), whose body can
// be sent again without a copy (GetBody, a buffered body, or none). Hedges
// count as attempts (MaxAttempts), never start past the deadline, stop once
// an attempt's answer asks for a wait (Retry-After), are paid for by the
// retry budget (a dependency in trouble gets no extra load from hedging),
// and are at most Fraction of a host's requests, so that a shift in latency
// cannot double the load.
//
// By default the delay adapts: it is the Quantile of the latency of the
// host's recent successful attempts (to their response headers), within
// [Min, Max], estimated in a fixed-size histogram that forgets the past as
// it fills. Until a host has 20 such attempts, Max is the delay.
type Hedge struct {
	// Delay, if positive, is a fixed delay, used instead of the adaptive
	// one.
	Delay time.Duration

	// Quantile of the recent latencies the adaptive delay follows. Zero
	// means DefaultHedgeQuantile.
	Quantile float64

	// Min and Max bound the adaptive delay. Zero means DefaultHedgeMin and
	// DefaultHedgeMax.
	Min, Max time.Duration

	// MaxHedges is how many copies one request may get. Zero means 1.
	MaxHedges int

	// Fraction bounds the hedges of a host to this share of its requests,
	// over the last 10 s. Zero means DefaultHedgeFraction.
	Fraction float64
}

// hedgePolicy is a Hedge converted for use.
type hedgePolicy struct {
	fixed     time.Duration
	quantile  float64
	min, max  time.Duration
	maxHedges int
	fraction  float64
}

func (h *Hedge) compile() *hedgePolicy {
	if h == nil || h.MaxHedges < 0 {
		return nil
	}
	c := &hedgePolicy{fixed: h.Delay, quantile: h.Quantile, min: h.Min, max: h.Max,
		maxHedges: h.MaxHedges, fraction: h.Fraction}
	if !(c.quantile > 0 && c.quantile < 1) {
		c.quantile = DefaultHedgeQuantile
	}
	if c.min <= 0 {
		c.min = DefaultHedgeMin
	}
	if c.max <= 0 {
		c.max = DefaultHedgeMax
	}
	c.max = max(c.max, c.min)
	if c.maxHedges == 0 {
		c.maxHedges = 1
	}
	if !(c.fraction > 0) {
		c.fraction = DefaultHedgeFraction
	}
	c.fraction = min(c.fraction, 1)
	return c
}

// Latency histogram: buckets whose bounds grow by 2^(1/4) (19 % apart)
// from 100 µs, up to about 100 s.
const (
	latencyBuckets = 80
	latencyFloor   = 100 * time.Microsecond
	latencyMinimum = 20   // observations before the quantile is trusted
	latencyHalve   = 2000 // observations after which every count is halved
)

// hostHedge is what a Transport knows of one host for hedging: its recent
// latencies and how many of its requests were hedged. Lock-free.
type hostHedge struct {
	buckets [latencyBuckets]atomic.Uint32
	seen    atomic.Uint32 // observations since the last halving
	total   atomic.Int64  // observations in the histogram, about

	requests, hedges [throttleSlices]atomic.Uint64 // over the last 10 s, as hostThrottle counts
}

func latencyBucket(d time.Duration) int {
	if d <= latencyFloor {
		return 0
	}
	b := int(4 * math.Log2(float64(d)/float64(latencyFloor)))
	return min(b, latencyBuckets-1)
}

// bucketTop returns the upper bound of bucket b.
func bucketTop(b int) time.Duration {
	return time.Duration(float64(latencyFloor) * math.Exp2(float64(b+1)/4))
}

// observe records the latency of a successful attempt.
func (h *hostHedge) observe(d time.Duration) {
	h.buckets[latencyBucket(d)].Add(1)
	h.total.Add(1)
	if h.seen.Add(1) == latencyHalve {
		// Forget the past by half: old latencies weigh less and less.
		h.seen.Store(0)
		var total int64
		for i := range h.buckets {
			for {
				v := h.buckets[i].Load()
				if h.buckets[i].CompareAndSwap(v, v/2) {
					total += int64(v / 2)
					break
				}
			}
		}
		h.total.Store(total)
	}
}

// delay returns the hedge delay for the host under p.
func (h *hostHedge) delay(p *hedgePolicy) time.Duration {
	if p.fixed > 0 {
		return p.fixed
	}
	total := h.total.Load()
	if total < latencyMinimum {
		return p.max
	}
	want := int64(math.Ceil(p.quantile * float64(total)))
	var sum int64
	for i := range h.buckets {
		sum += int64(h.buckets[i].Load())
		if sum >= want {
			return min(max(bucketTop(i), p.min), p.max)
		}
	}
	return p.max
}

// request counts a hedge-eligible request at now.
func (h *hostHedge) request(p *hedgePolicy, now time.Time) {
	e := sliceOf(now, int64(DefaultThrottleWindow)/throttleSlices)
	bump(&h.requests[e%throttleSlices], e)
}

// mayHedge reports whether one more hedge keeps the host's hedges within
// p.fraction of its requests, and counts it if so.
func (h *hostHedge) mayHedge(p *hedgePolicy, now time.Time) bool {
	e := sliceOf(now, int64(DefaultThrottleWindow)/throttleSlices)
	var requests, hedges int64
	for i := range h.requests {
		requests += countIn(h.requests[i].Load(), e)
		hedges += countIn(h.hedges[i].Load(), e)
	}
	if float64(hedges+1) > p.fraction*float64(requests)+1 {
		return false
	}
	bump(&h.hedges[e%throttleSlices], e)
	return true
}

// hostHedges holds the hedging state of up to throttleHosts hosts.
type hostHedges struct {
	hosts sync.Map // host -> *hostHedge
	mu    sync.Mutex
	order []string
}

func (t *hostHedges) get(host string) *hostHedge {
	if h, ok := t.hosts.Load(host); ok {
		return h.(*hostHedge)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if h, ok := t.hosts.Load(host); ok {
		return h.(*hostHedge)
	}
	h := new(hostHedge)
	t.hosts.Store(host, h)
	t.order = append(t.order, host)
	if len(t.order) > throttleHosts {
		t.hosts.Delete(t.order[0])
		t.order[0] = ""
		t.order = t.order[1:]
	}
	return h
}

// raced is one attempt of a race, with what it needs to be stopped.
type raced struct {
	a      *attempt
	cancel context.CancelFunc
	start  time.Time
}

// race sends attempt a and, while no attempt has answered, a hedge after
// each hedge delay, up to MaxHedges and the attempts left. The first answer
// that is not a retryable failure wins and is left in a; so is the last
// failure when every attempt failed. The losers are canceled, and their
// answers drained and closed by a goroutine that ends when the last of
// them is back. Each attempt's outcome is judged here (a.judged).
func (c *call) race(a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error)) {
	p := c.p.hedge
	host := c.hedge
	results := make(chan *raced, p.maxHedges+1)
	var running []*raced
	// The attempts' goroutines get a copy of the call, so that the call
	// itself, on the stack of every request, does not escape to the heap.
	sender := new(call)
	*sender = *c
	launch := func(n int, body io.ReadCloser, getBody func() (io.ReadCloser, error)) {
		ctx, cancel := context.WithCancel(c.parent)
		r := &raced{a: &attempt{n: n}, cancel: cancel, start: time.Now()}
		running = append(running, r)
		c.count(nAttempts)
		if n > 1 {
			c.count(nRetries)
		}
		go func() {
			sender.sendWith(ctx, r.a, body, getBody)
			results <- r
		}()
	}
	launch(a.n, body, getBody)
	next := a.n + 1 // the next hedge's attempt number
	hedges, stop := 0, false
	timer := time.NewTimer(host.delay(p))
	defer timer.Stop()
	done := c.parent.Done()
	var last *raced // the last failure
	for len(running) > 0 {
		select {
		case r := <-results:
			running = remove(running, r)
			r.a.retry, r.a.f = c.verdict(r.a)
			r.a.judged = true
			if !r.a.retry && r.a.err == nil {
				host.observe(time.Since(r.start))
				if r.a.n > 1 {
					c.count(nHedgeWins)
				}
				// The winner's context ends with its body.
				if body := r.a.resp.Body; body != nil {
					r.a.resp.Body = &releaseBody{rc: body, release: r.cancel}
				}
				*a = *r.a
				c.abandonRace(r, running, results)
				return
			}
			r.cancel()
			if r.a.retry && r.a.resp != nil {
				if _, _, ok := serverWait(r.a.resp.Header, time.Now()); ok {
					stop = true // the server asked for a wait: no more copies
				}
			}
			if last != nil {
				closeAttempt(last.a)
			}
			last = r
			if !r.a.retry {
				// Not worth another attempt: the race is over.
				*a = *r.a
				c.abandonRace(nil, running, results)
				return
			}
		case <-timer.C:
			now := time.Now()
			if stop || hedges >= p.maxHedges || next > c.max || !c.t.budget.Retry(now) {
				continue
			}
			if dl, ok := c.parent.Deadline(); ok && !now.Before(dl) {
				continue
			}
			if !host.mayHedge(p, now) {
				c.t.budget.refund()
				continue
			}
			hb, hg, err := c.body.next(c.req, next)
			if err != nil {
				c.t.budget.refund()
				stop = true
				continue
			}
			c.count(nHedges)
			c.hedgeHooks(next, host.delay(p))
			launch(next, hb, hg)
			next++
			hedges++
			timer.Reset(host.delay(p))
		case <-done:
			// The caller is gone: every attempt ends with its context.
			done = nil
			for _, r := range running {
				r.cancel()
			}
		}
	}
	*a = *last.a
	a.n = next - 1 // attempts sent: a retry is numbered after them all
	c.sent = a.n
}

// abandonRace cancels the attempts still running, and drains and closes
// their answers as they come back, in a goroutine that ends with the last.
func (c *call) abandonRace(winner *raced, running []*raced, results chan *raced) {
	if winner != nil {
		// The winner's context lives on with its body.
		c.sent = winner.a.n
	}
	for _, r := range running {
		r.cancel()
	}
	if len(running) == 0 {
		return
	}
	go func(n int) {
		for range n {
			r := <-results
			closeAttempt(r.a)
		}
	}(len(running))
}

// closeAttempt drains and closes an attempt's response, if any.
func closeAttempt(a *attempt) {
	if a.resp != nil {
		drainClose(a.resp, drainMinTime)
	}
}

func remove(rs []*raced, r *raced) []*raced {
	for i, x := range rs {
		if x == r {
			return append(rs[:i], rs[i+1:]...)
		}
	}
	return rs
}

// hedgeHooks tells OnRetry and the Logger of a hedge about to be sent.
func (c *call) hedgeHooks(n int, delay time.Duration) {
	if c.t.OnRetry != nil {
		c.t.OnRetry(&RetryEvent{Request: c.req, Attempt: n - 1, Delay: delay, Source: DelayHedge, Hedge: true})
	}
}
