package retryhttp

import (
	"github.com/retryhttp/retryhttp/internal/clock"

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
func (h *hostHedge) request(p *hedgePolicy, clock int64) {
	e := sliceOf(clock, int64(DefaultThrottleWindow)/throttleSlices)
	bump(&h.requests[e%throttleSlices], e)
}

// mayHedge reports whether one more hedge keeps the host's hedges within
// p.fraction of its requests, and counts it if so.
func (h *hostHedge) mayHedge(p *hedgePolicy, clock int64) bool {
	e := sliceOf(clock, int64(DefaultThrottleWindow)/throttleSlices)
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

// A race is a request's first attempt and its hedges. The first attempt
// runs on the request's goroutine; each hedge on the goroutine of the timer
// that started it, which also sets the timer of the next. The first answer
// that is not a retryable failure wins and cancels the others; an attempt
// that ends after the race is over drains and closes its own answer.
//
// Races are reused: a race no hedge was sent in (most of them) is put back
// in racePool once its timer is stopped before firing, when nothing else
// can hold it. Its timer is not: a timer made in a testing/synctest bubble
// belongs to it, and one made outside runs on the real clock.
type race struct {
	c    call // a copy of the request's call, for the hedges' goroutines
	p    *hedgePolicy
	host *hostHedge

	mu         sync.Mutex
	attempts   []*raceAttempt // every attempt sent, the first's first
	winner     *attempt       // a hedge that won
	primaryWon bool           // the first attempt won
	over       bool           // the request's goroutine has taken the result
	stop       bool           // no more hedges: an answer asked for a wait
	launched   int            // hedges sent
	next       int            // the next hedge's attempt number
	fire       func()         // r.hedge as a func value, made once: the timer's function
	timer      *time.Timer    // calls fire
	armed      time.Duration  // the sum of the delays the timer was set to
	results    chan *attempt  // each hedge's, once
}

var racePool = sync.Pool{New: func() any {
	r := new(race)
	r.fire = r.hedge
	return r
}}

// recycle puts r, stopped and with no hedge sent, back in racePool.
func (r *race) recycle() {
	r.c = call{}
	r.p, r.host = nil, nil
	clear(r.attempts)
	r.attempts = r.attempts[:0]
	r.winner = nil
	r.primaryWon, r.over, r.stop = false, false, false
	r.launched, r.next, r.armed = 0, 0, 0
	r.timer = nil
	racePool.Put(r)
}

// raceAttempt is what an attempt of a race is sent with, in one allocation:
// its context (made from the caller's, to be canceled alone, with the
// attempt's mark) and the body that ends that context with the response's.
type raceAttempt struct {
	ctx    markedContext
	cancel context.CancelFunc
	body   releaseBody
}

func newRaceAttempt(parent context.Context, n int) *raceAttempt {
	ctx, cancel := context.WithCancel(parent)
	ra := &raceAttempt{cancel: cancel}
	ra.ctx.Context = ctx
	ra.ctx.mark.n.Store(int32(n))
	return ra
}

// race sends attempt a, the first, and hedges it: see Hedge. It leaves in
// a the winner, or the last failure when every attempt failed, with a.n the
// number of attempts sent when they all failed (a retry is numbered after
// them all). Each outcome in a is judged (a.judged).
func (c *call) race(a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error)) {
	p := c.p.hedge
	start := clock.MonoNow()
	c.hedge.request(p, start)
	delay := c.hedge.delay(p)
	if dl, ok := c.parent.Deadline(); ok && time.Until(dl) <= delay {
		// No hedge could go before the deadline: the attempt goes alone,
		// at no cost of a race, its latency still observed.
		c.send(a, body, getBody)
		c.settle(a, nil, time.Duration(clock.MonoNow()-start))
		return
	}
	first := newRaceAttempt(c.parent, a.n)
	// The race, which its timer holds, gets a copy of the call, so that the
	// call itself, on the stack of every request, does not escape.
	r := racePool.Get().(*race)
	r.mu.Lock()
	r.c = *c
	r.p, r.host, r.next = p, c.hedge, a.n+1
	r.attempts = append(r.attempts, first)
	r.armed = delay
	r.timer = time.AfterFunc(r.armed, r.fire)
	r.mu.Unlock()
	c.count(nAttempts)
	c.sendWith(first, a, body, getBody)
	elapsed := time.Duration(clock.MonoNow() - start)

	r.mu.Lock()
	idle := r.timer.Stop() // the timer's hedge is neither due nor running
	if r.launched == 0 {
		// No hedge went: the first attempt is the answer, as without
		// hedging. Its context ends with its body.
		r.over = true
		r.mu.Unlock()
		if idle {
			r.recycle()
		}
		c.sent = a.n
		c.settle(a, first, elapsed)
		return
	}
	won := r.winner
	if won == nil && c.good(a) {
		won = a
		r.primaryWon = true // (not a itself: it lives on the request's stack)
		r.cancelOthers(0)
	}
	r.mu.Unlock()

	// Collect the hedges' outcomes until one wins or all are back (hedges
	// may still start meanwhile, if the first attempt failed).
	last := a
	if won != a {
		first.cancel()
		for received := 0; ; received++ {
			r.mu.Lock()
			pending := r.launched - received
			r.mu.Unlock()
			if pending == 0 {
				break
			}
			h := <-r.results
			r.mu.Lock()
			w := r.winner
			r.mu.Unlock()
			if h == w {
				won = h
				break
			}
			if last != a {
				closeAttempt(last)
			}
			last = h
		}
	}
	r.mu.Lock()
	r.over = true
	sent := r.next - 1
	r.mu.Unlock()
	// Answers posted meanwhile are losers: drain and close them.
	for drained := false; !drained; {
		select {
		case h := <-r.results:
			if h != won {
				closeAttempt(h)
			}
		default:
			drained = true
		}
	}
	c.sent = sent
	if won != nil {
		if won != a {
			closeAttempt(a)
			c.count(nHedgeWins)
		}
		if won == a {
			c.settle(a, first, elapsed)
		} else {
			*a = *won
			c.settle(a, r.attemptOf(won), 0) // its latency is observed already
		}
		return
	}
	if last != a {
		closeAttempt(a)
	}
	// Every attempt failed: the last one's answer is the race's, and its
	// context ends with its body; the others' end now.
	ra := r.attemptOf(last)
	r.mu.Lock()
	r.cancelOthers(last.n - 1)
	r.mu.Unlock()
	*a = *last
	a.n = sent
	a.retry, a.f = c.verdict(a)
	a.judged = true
	ra.endWith(a)
}

// good reports whether an attempt's outcome wins a race: an answer that is
// not to be retried. (The policy's Retryable judges it again afterwards.)
func (c *call) good(a *attempt) bool {
	if a.err != nil {
		return false
	}
	retry, _ := c.p.responseVerdict(a.resp, c.isKeyed(a.resp.StatusCode))
	return !retry
}

// settle judges the winning attempt a, records its latency when it
// succeeded (elapsed, if known), and, if a was sent with ra, ties the end
// of ra's context to a's body.
func (c *call) settle(a *attempt, ra *raceAttempt, elapsed time.Duration) {
	a.retry, a.f = c.verdict(a)
	a.judged = true
	if a.resp != nil && !a.retry && elapsed > 0 {
		c.hedge.observe(elapsed)
	}
	if ra != nil {
		ra.endWith(a)
	}
}

// endWith ends ra's context with attempt a's response body, or now if a
// has no response.
func (ra *raceAttempt) endWith(a *attempt) {
	if a.resp == nil {
		ra.cancel()
		return
	}
	ra.body.rc, ra.body.release = a.resp.Body, ra.cancel
	a.resp.Body = &ra.body
}

// attemptOf returns what attempt w was sent with (attempt n's is
// attempts[n-1]: a race starts with attempt 1).
func (r *race) attemptOf(w *attempt) *raceAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts[w.n-1]
}

// cancelOthers cancels every attempt but the i-th. Requires r.mu held.
func (r *race) cancelOthers(i int) {
	for j, ra := range r.attempts {
		if j != i {
			ra.cancel()
		}
	}
}

// hedge, the timer's function, sends a hedge if one may go, and sets the
// timer for the next.
func (r *race) hedge() {
	now := time.Now()
	r.mu.Lock()
	c, p := &r.c, r.p
	since := r.armed // the timers' delays since the first attempt started
	if r.over || r.winner != nil || r.primaryWon || r.stop || r.launched >= p.maxHedges || r.next > c.max {
		r.mu.Unlock()
		return
	}
	if dl, ok := c.parent.Deadline(); ok && !now.Before(dl) {
		r.mu.Unlock()
		return
	}
	allowed := c.t.budget.retry(now)
	if allowed && !r.host.mayHedge(p, clock.Mono(now)) {
		c.t.budget.refund()
		allowed = false
	}
	if !allowed {
		// Refused for now: the allowance (budget, fraction) may grow while
		// this request is still unanswered; look again a delay later.
		d := r.host.delay(p)
		r.armed += d
		r.timer = time.AfterFunc(d, r.fire)
		r.mu.Unlock()
		return
	}
	n := r.next
	body, getBody, err := c.body.next(c.req, n)
	if err != nil {
		c.t.budget.refund()
		r.stop = true
		r.mu.Unlock()
		return
	}
	if r.results == nil {
		r.results = make(chan *attempt, p.maxHedges)
	}
	ra := newRaceAttempt(c.parent, n)
	r.attempts = append(r.attempts, ra)
	r.next++
	r.launched++
	delay := r.host.delay(p)
	if r.launched < p.maxHedges {
		r.armed += delay
		r.timer = time.AfterFunc(delay, r.fire)
	}
	r.mu.Unlock()

	c.count(nAttempts)
	c.count(nRetries)
	c.count(nHedges)
	c.hedgeHooks(n, since)
	a := &attempt{n: n}
	start := time.Now()
	c.sendWith(ra, a, body, getBody)
	elapsed := time.Since(start)

	r.mu.Lock()
	good := c.good(a) // under r.mu: it may set c.keyed, shared by the hedges
	if r.over {
		r.mu.Unlock()
		ra.cancel()
		closeAttempt(a)
		return
	}
	if a.resp != nil && !good {
		if _, _, ok := serverWait(a.resp.Header, now); ok {
			r.stop = true // the server asked for a wait: no more copies
		}
	}
	if r.winner == nil && !r.primaryWon && good {
		r.winner = a
		r.host.observe(elapsed)
		r.cancelOthers(n - 1)
	}
	r.results <- a // buffered for every hedge: never blocks
	r.mu.Unlock()
}

// closeAttempt drains and closes an attempt's response, if any.
func closeAttempt(a *attempt) {
	if a.resp != nil {
		drainClose(a.resp, drainMinTime)
	}
}

// hedgeHooks tells OnRetry of a hedge about to be sent.
func (c *call) hedgeHooks(n int, delay time.Duration) {
	if c.t.OnRetry != nil {
		c.t.OnRetry(&RetryEvent{Request: c.req, Attempt: n - 1, Delay: delay, Source: DelayHedge, Hedge: true})
	}
}
