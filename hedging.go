package retryhttp

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/hostgate"
	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// A hedging is a request's first attempt and its hedges, sent together.
// The first attempt runs on the request's goroutine; each hedge on the
// goroutine of the timer that started it, which also sets the timer of
// the next. The first answer
// that is not a retryable failure wins and cancels the others; an attempt
// that ends after hedging is over drains and closes its own answer.
type hedging struct {
	c    call // a copy of the request's call, for the hedges' goroutines
	p    *hostgate.Hedge
	host *hostgate.HedgeState

	mu         sync.Mutex
	attempts   []*hedgedAttempt // every attempt sent, the first's first
	winner     *attempt         // a hedge that won
	primaryWon bool             // the first attempt won
	over       bool             // the request's goroutine has taken the result
	stop       bool             // no more hedges: an answer asked for a wait
	launched   int              // hedges let go: being made, or sent
	preparing  sync.WaitGroup   // hedges being made: they read the caller's request
	next       int              // the next hedge's attempt number
	timer      clock.Timer      // calls hedge
	armed      time.Duration    // the sum of the delays the timer was set to
	results    chan *attempt    // each hedge's, once
}

// hedgedAttempt is what an attempt of hedging is sent with, in one
// allocation: its context (made from the caller's, to be canceled alone, with the
// attempt's mark), its request, and the body that ends that context with
// the response's.
type hedgedAttempt struct {
	ctx    mark.Context
	cancel context.CancelFunc
	body   respbody.Release
	req    http.Request // the attempt's request (see call.prepare)
}

func newHedgedAttempt(parent context.Context, n int) *hedgedAttempt {
	ctx, cancel := context.WithCancel(parent)
	ra := &hedgedAttempt{cancel: cancel}
	ra.ctx.Context = ctx
	ra.ctx.Mark.N = n
	return ra
}

// sendHedged sends attempt a, the first, and hedges it: see Hedge. It
// leaves in a the winner, or the last failure when every attempt failed, with a.n the
// number of attempts sent when they all failed (a retry is numbered after
// them all). Each outcome in a is judged (a.judged).
func (c *call) sendHedged(a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error)) {
	p := c.p.hedge
	start := c.t.mono()
	c.gates.Record(hostgate.RequestStarts, start)
	delay := c.hedge.Delay(p)
	if c.stop(c.t.clock.Now(), delay) != 0 {
		// No hedge could go before the deadline: the attempt goes alone,
		// at no cost of hedging, its latency still observed.
		s, _ := c.prepare(nil, a, body, getBody) // a first attempt: no error
		c.send(a, &s)
		c.sent = a.n
		c.settle(a, nil, time.Duration(c.t.mono()-start))
		return
	}
	first := newHedgedAttempt(c.parent, a.n)
	// Hedging, which its timer holds, gets a copy of the call, so that the
	// call itself, on the stack of every request, does not escape.
	r := &hedging{c: *c, p: p, host: c.hedge, next: a.n + 1, armed: delay}
	r.mu.Lock()
	r.attempts = append(r.attempts, first)
	r.timer = c.t.clock.AfterFunc(r.armed, r.hedge)
	r.mu.Unlock()
	s, _ := c.prepare(first, a, body, getBody) // a first attempt: no error
	c.send(a, &s)
	elapsed := time.Duration(c.t.mono() - start)

	r.mu.Lock()
	r.timer.Stop()
	if !c.wins(a) && askedWait(a, c.t.clock.Now()) > 0 {
		r.stop = true // the server asked for a wait: no more copies
	}
	if r.launched == 0 {
		// No hedge went: the first attempt is the answer, as without
		// hedging. Its context ends with its body.
		r.over = true
		r.mu.Unlock()
		c.sent = a.n
		c.settle(a, first, elapsed)
		return
	}
	won := r.winner
	if won == nil && c.wins(a) {
		won = a
		r.primaryWon = true // (not a itself: it lives on the request's stack)
		r.cancelOthers(0)
	}
	r.mu.Unlock()
	won, last := r.collect(a, first, won)
	c.sent = r.end(won)
	c.takeResult(r, a, first, won, last, elapsed)
}

// collect waits for the hedges' outcomes until one wins or all are back
// (hedges may still start meanwhile, if the first attempt a failed), unless
// won, the winner so far, is a. It returns the winner (nil when every
// attempt failed) and, when none won, the last failure; it closes the
// hedges' other failures.
func (r *hedging) collect(a *attempt, first *hedgedAttempt, won *attempt) (winner, last *attempt) {
	last = a
	if won == a {
		return won, last
	}
	first.cancel()
	for received := 0; ; received++ {
		r.mu.Lock()
		pending := r.launched - received
		r.mu.Unlock()
		if pending == 0 {
			return won, last
		}
		h := <-r.results
		if h == nil {
			continue // a hedge let go but not sent
		}
		r.mu.Lock()
		w := r.winner
		r.mu.Unlock()
		if h == w {
			if last != a {
				r.c.closeAttempt(last) // a failure that lost too
			}
			return h, a
		}
		keep, drop := r.c.decisive(last, h)
		if drop != a { // (a, on the request's stack, is closed by takeResult)
			r.c.closeAttempt(drop)
		}
		last = keep
	}
}

// decisive returns, of two failed attempts of hedging, the one the
// request acts on, and the other: the one whose answer asks for the
// longer wait (Retry-After, or RateLimit), else the later, b. A wait one
// answer asks for holds for the request: its retry waits for it, and a
// wait past MaxRetryAfter returns that answer at once.
func (c *call) decisive(a, b *attempt) (keep, drop *attempt) {
	now := c.t.clock.Now()
	if askedWait(a, now) > askedWait(b, now) {
		return a, b
	}
	return b, a
}

// askedWait returns the wait that attempt a's answer asks for at now, 0
// if none.
func askedWait(a *attempt, now time.Time) time.Duration {
	if a.answerHeader() == nil {
		return 0
	}
	d, _, ok := serverWait(a, now)
	if !ok {
		return 0
	}
	return max(d, 0)
}

// end ends hedging: no hedge goes any more (the timer a hedge set for the
// next is stopped), and the answers posted meanwhile, losers to won, are
// drained and closed. It returns the number of attempts sent.
func (r *hedging) end(won *attempt) (sent int) {
	r.mu.Lock()
	r.over = true
	r.timer.Stop()
	r.mu.Unlock()
	r.preparing.Wait() // a hedge being made reads the caller's request
	r.mu.Lock()
	sent = r.next - 1
	r.mu.Unlock()
	for {
		select {
		case h := <-r.results:
			if h != nil && h != won {
				r.c.closeAttempt(h)
			}
		default:
			return sent
		}
	}
}

// takeResult leaves in a, the first attempt, hedging's result: the
// winner, or else the last failure, numbered as the attempts sent, whose
// context ends with its body (the others' end now). elapsed is the first
// attempt's latency.
func (c *call) takeResult(r *hedging, a *attempt, first *hedgedAttempt, won, last *attempt, elapsed time.Duration) {
	switch {
	case won == a:
		c.settle(a, first, elapsed)
		return
	case won != nil:
		c.closeAttempt(a)
		c.count(nHedgeWins)
		*a = *won
		c.settle(a, r.attemptOf(won), 0) // its latency is observed already
		return
	}
	if last != a {
		c.closeAttempt(a)
	}
	ra := r.attemptOf(last)
	r.mu.Lock()
	r.cancelOthers(last.n - 1)
	r.mu.Unlock()
	*a = *last
	a.n = c.sent
	c.hedgedRequest(a)
	ra.endWith(a)
	c.held.resp = a.resp // the call's, should Retryable panic
	a.v, a.judged = c.judge(a), true
}

// settle ties the end of ra's context, if a was sent with ra, to the body
// of the winning attempt a, judges a, and records its latency when it
// succeeded (elapsed, if known). a's response is the call's from then on,
// should Retryable panic.
func (c *call) settle(a *attempt, ra *hedgedAttempt, elapsed time.Duration) {
	if ra != nil {
		c.hedgedRequest(a)
		ra.endWith(a)
	}
	c.held.resp = a.resp
	a.v, a.judged = c.judge(a), true
	if a.resp != nil && !a.v.retry && elapsed > 0 {
		c.hedge.Observe(elapsed)
	}
}

// hedgedRequest gives the response of attempt a of hedging, if any, the
// request it is to carry (see responseRequest), on the request's goroutine:
// an attempt that answers after hedging is over reads nothing of the
// caller's. The first attempt's is the caller's request, whose Attempts is
// 1, as the mark's (not hedging's own context, which ends with the body;
// a context holding an earlier request's mark gets this one's).
func (c *call) hedgedRequest(a *attempt) {
	switch {
	case a.resp == nil:
	case a.n == 1 && !c.markedBefore && c.added == "":
		a.resp.Request = c.req
	default:
		a.resp.Request = c.answeredRequest(mark.With(c.parent, a.mark))
	}
}

// endWith ends ra's context with attempt a's response body, or now if a
// has no response.
func (ra *hedgedAttempt) endWith(a *attempt) {
	if a.resp == nil {
		ra.cancel()
		return
	}
	ra.body.Body, ra.body.Fn = a.resp.Body, ra.cancel
	respbody.Wrap(a.resp, &ra.body)
}

// attemptOf returns what attempt w was sent with (attempt n's is
// attempts[n-1]: hedging starts with attempt 1).
func (r *hedging) attemptOf(w *attempt) *hedgedAttempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.attempts[w.n-1]
}

// cancelOthers cancels every attempt but the i-th. Requires r.mu held.
func (r *hedging) cancelOthers(i int) {
	for j, ra := range r.attempts {
		if j != i {
			ra.cancel()
		}
	}
}

// hedge, the timer's function, sends a hedge if one may go, and sets the
// timer for the next.
func (r *hedging) hedge() {
	c := &r.c
	n, since, now, ok := r.mayHedge()
	if !ok {
		return
	}
	a := &attempt{n: n, paid: true} // mayHedge spent a retry of credit for it
	s, ra, ok := r.launch(a)
	if !ok {
		return
	}
	c.count(nHedges)
	c.hedgeHooks(n, since)
	r.preparing.Done() // made: from here on it reads nothing of the caller's
	start := c.t.mono()
	c.send(a, &s)
	elapsed := time.Duration(c.t.mono() - start)

	r.mu.Lock()
	wins := c.wins(a)
	if r.over {
		r.mu.Unlock()
		ra.cancel()
		r.c.closeAttempt(a)
		return
	}
	if a.answerHeader() != nil && !wins {
		if _, _, ok := serverWait(a, now); ok {
			r.stop = true // the server asked for a wait: no more copies
		}
	}
	if r.winner == nil && !r.primaryWon && wins {
		r.winner = a
		r.host.Observe(elapsed)
		r.cancelOthers(n - 1)
	}
	r.results <- a // buffered for every hedge: never blocks
	r.mu.Unlock()
}

// mayHedge reports whether a hedge may go now, paid for by the budget and
// within the host's hedge allowance, and if so returns its attempt number
// and the timers' delays since the first attempt started. Refused for now,
// it looks again a delay later: the allowance may grow while the request
// is still unanswered.
func (r *hedging) mayHedge() (n int, since time.Duration, now time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, p := &r.c, r.p
	now = c.t.clock.Now()
	if r.done() || r.stop || r.launched >= p.MaxHedges || r.next > c.max {
		return 0, 0, now, false
	}
	if c.stop(now, 0) != 0 {
		return 0, 0, now, false
	}
	allowed := c.account.Spend(now)
	if allowed && !c.gates.Admit(hostgate.KindHedge, c.t.monoAt(now), c.t.rand) {
		c.account.Refund()
		allowed = false
	}
	if !allowed {
		d := r.host.Delay(p)
		r.armed += d
		r.timer = c.t.clock.AfterFunc(d, r.hedge)
		return 0, 0, now, false
	}
	// Let go from now on: hedging waits for its outcome (an attempt, or
	// nil if it is not sent), and RoundTrip for it to be made.
	r.launched++
	r.preparing.Add(1)
	if r.results == nil {
		// Room for every hedge that can be let go: mayHedge stops at
		// p.MaxHedges, or at c.max attempts.
		r.results = make(chan *attempt, min(r.p.MaxHedges, c.max-1))
	}
	return r.next, r.armed, now, true
}

// launch makes hedge a's request (its body, PrepareRetry) and enters it in
// hedging, setting the timer for the next hedge. It reports false, and
// gives the budget its retry back, when the hedge is not sent: the body
// could not be made or PrepareRetry failed (no timer is set, as the next
// hedge would fail alike), or hedging ended meanwhile; hedging is then told
// (a nil outcome), and the hedge is made.
func (r *hedging) launch(a *attempt) (sending, *hedgedAttempt, bool) {
	c := &r.c
	body, getBody, err := c.body.Next(c.req, a.n) // (the replay serves one goroutine at a time: the timer's)
	var s sending
	var ra *hedgedAttempt
	if err == nil {
		ra = newHedgedAttempt(c.parent, a.n)
		s, err = c.prepare(ra, a, body, getBody)
	}
	r.mu.Lock()
	if err != nil || r.done() {
		c.account.Refund()
		r.results <- nil // buffered for every hedge: never blocks
		r.mu.Unlock()
		if err == nil {
			s.abandon(a)
		}
		if ra != nil {
			ra.cancel()
		}
		r.preparing.Done()
		return sending{}, nil, false
	}
	r.attempts = append(r.attempts, ra)
	r.next++
	if r.launched < r.p.MaxHedges {
		d := r.host.Delay(r.p)
		r.armed += d
		r.timer = c.t.clock.AfterFunc(d, r.hedge)
	}
	r.mu.Unlock()
	return s, ra, true
}

// done reports whether hedging is over or won: no hedge is to go.
// Requires r.mu held.
func (r *hedging) done() bool { return r.over || r.winner != nil || r.primaryWon }

// closeAttempt drains and closes an attempt's response, if any: for
// respbody.MinTime at most, and not past the caller's deadline.
func (c *call) closeAttempt(a *attempt) {
	if a.resp == nil {
		return
	}
	limit := respbody.MinTime
	if dl, ok := c.parent.Deadline(); ok {
		limit = max(min(limit, dl.Sub(c.t.clock.Now())), 0)
	}
	respbody.Drain(c.parent, a.resp, limit, c.t.clock)
}

// hedgeHooks tells OnRetry of hedge n about to be sent, delay after the
// first attempt.
func (c *call) hedgeHooks(n int, delay time.Duration) {
	if c.t.OnRetry != nil {
		c.t.OnRetry(&RetryEvent{Request: c.req, Attempt: n - 1, Delay: delay, Source: "hedge", Hedge: true})
	}
}
