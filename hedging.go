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

// A race is a hedged request's first attempt and the hedges sent after it,
// in flight together. Each is sent on a goroutine of its own and hands its
// outcome back; the request's goroutine waits for the outcomes, judges each
// once as it comes back, as it judges any attempt (call.judge), and sends
// the next hedge when its time comes. The first outcome not to be retried
// wins, and the other attempts are canceled. When every attempt sent has
// failed, the loop acts on the failure whose answer asks for the longest
// wait, as on any failure.
type race struct {
	c    call          // a copy of the call for the attempts' goroutines: the call itself stays on the stack
	back chan struct{} // the clock's signal: an outcome came back

	mu       sync.Mutex
	returned []*racer // outcomes back, not yet taken by the request's goroutine
	over     bool     // the request has its result: an outcome back later drops itself
	spare    []*racer // the slice returned had before take: returned's next

	// The request's goroutine's.
	sent   []*racer // every attempt made, the first's first
	out    int      // attempts sent whose outcomes are not taken yet
	won    *racer   // the winner
	failed []*racer // the failures back, kept until the race ends (see end)
	more   bool     // more hedges may go
	done   bool     // the race ended without a hook's panic

	bufs [3][3]*racer // sent's, returned's and spare's first room: a first attempt and a hedge need no more
}

// A racer is an attempt of a race and what it is sent with, in one
// allocation: its context (the caller's, with the attempt's mark, to be
// canceled alone), its request, and the body that ends that context with
// the response's.
type racer struct {
	a      attempt
	s      sending
	start  time.Time // when it was sent
	inBase bool      // sent, and its outcome not taken: its goroutine's
	ctx    mark.Context
	cancel context.CancelFunc
	body   respbody.Release
	req    http.Request
}

// race sends attempt a, the first, and its hedges, the first delay after
// it: see Hedge. It leaves in a the winner, judged, or else the failure to
// act on, judged (see end).
func (c *call) race(a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error), delay time.Duration) {
	r := &race{c: *c, back: c.t.clock.Signal()}
	r.sent, r.returned, r.spare = r.bufs[0][:0], r.bufs[1][:0], r.bufs[2][:0]
	defer r.end(c, a)                        // also should a hook panic
	h, _ := r.prepare(c, a.n, body, getBody) // a first attempt: no PrepareRetry, no error
	r.start(c, h)
	most := min(c.p.hedge.MaxHedges+1, c.max)
	next := h.start.Add(delay) // when the next hedge may go
	r.more = true
	for r.won == nil && r.out > 0 {
		ctx, due := c.parent, next
		if !r.more {
			// The attempts end with the caller's context: only their
			// outcomes are waited for.
			ctx, due = context.Background(), time.Time{}
		}
		woke := c.t.clock.Sleep(ctx, due, r.back)
		r.judgeBack(c)
		switch {
		case r.won != nil || !r.more:
		case woke == clock.WokeContext:
			r.more = false
		case !c.t.clock.Now().Before(next):
			r.more = r.hedge(c, next) && r.more
			next = c.t.clock.Now().Add(c.hedge.Delay(c.p.hedge))
		}
		r.more = r.more && len(r.sent) < most
	}
	r.done = true
}

// judgeBack judges the outcomes back, in the order they came: the first
// not to be retried wins, and those back with it lose; a failure whose
// answer asks for a wait stops the copies.
func (r *race) judgeBack(c *call) {
	for _, h := range r.take() {
		switch now := c.t.clock.Now(); {
		case r.won != nil:
			r.drop(c, h)
		case r.judge(c, h, now):
			r.won = h
		default:
			if askedWait(&h.a, now) > 0 {
				r.more = false // the server asked for a wait: no more copies
			}
			r.failed = append(r.failed, h)
		}
	}
}

// judge judges attempt h, back at now, and reports whether it wins: its
// outcome is not to be retried. A winner's latency is the host's to learn
// from.
func (r *race) judge(c *call, h *racer, now time.Time) bool {
	c.hedgedRequest(&h.a)
	h.a.v, h.a.judged = c.judge(&h.a), true
	if h.a.v.retry {
		return false
	}
	if h.a.resp != nil {
		c.hedge.Observe(now.Sub(h.start))
	}
	return true
}

// drop ends attempt h, once it is back or was never sent: its outcome
// drained and closed (or, never sent, its request's body closed), and its
// context ended. One still in the base is canceled, and drops its own
// outcome when it comes back.
func (r *race) drop(c *call, h *racer) {
	h.cancel()
	switch {
	case h.inBase:
	case h.start.IsZero():
		h.s.abandon(&h.a)
	default:
		h.a.drain(c.parent, c.t.clock)
		h.a.resp = nil
	}
}

// prepare makes attempt n's request, with body, under a context of its own
// (see call.prepare), and enters it in the race, not sent yet. On error,
// PrepareRetry's, it is not entered, and nothing of it is left.
func (r *race) prepare(c *call, n int, body io.ReadCloser, getBody func() (io.ReadCloser, error)) (*racer, error) {
	h := &racer{a: attempt{n: n}}
	ctx, cancel := context.WithCancel(c.parent)
	h.ctx.Context, h.ctx.Mark.N, h.cancel = ctx, n, cancel
	defer func() {
		if h.cancel == nil { // prepare failed, or PrepareRetry panicked
			cancel()
		}
	}()
	h.cancel = nil
	s, err := c.prepare(h, &h.a, body, getBody)
	if err != nil {
		return nil, err
	}
	h.s, h.cancel = s, cancel
	r.sent = append(r.sent, h)
	return h, nil
}

// start sends h on a goroutine the clock starts (so that a simulation's
// clock knows of it), which hands the outcome back to the race, or drops
// it if the race is over.
func (r *race) start(c *call, h *racer) {
	h.start = c.t.clock.Now()
	h.inBase = true
	r.out++
	c.sent = h.a.n
	c.t.clock.AfterFunc(0, func() {
		r.c.send(&h.a, &h.s)
		r.mu.Lock()
		if r.over {
			r.mu.Unlock()
			h.a.drain(r.c.parent, r.c.t.clock)
			h.cancel()
			return
		}
		r.returned = append(r.returned, h)
		r.mu.Unlock()
		r.c.t.clock.Fire(r.back)
	})
}

// hedge sends a hedge, due at due, if one may go now: before the deadline, paid for by
// the budget and within the host's hedge allowance. It reports whether
// hedges may still go: false once the deadline has come, or when a hedge
// could not be made (its body, or PrepareRetry, failed: the next would fail
// alike). A hedge refused for now may go later.
func (r *race) hedge(c *call, due time.Time) bool {
	now := c.t.clock.Now()
	if c.stop(now, 0) != 0 {
		return false
	}
	if !c.budget.account.Spend(now) {
		return true
	}
	if !c.gates.Admit(hostgate.KindHedge, c.t.monoAt(now), c.t.rand) {
		c.budget.account.Refund()
		return true
	}
	n := c.sent + 1
	var h *racer
	body, getBody, err := c.body.Next(c.req, n)
	if err == nil {
		h, err = r.prepare(c, n, body, getBody)
	}
	if err != nil {
		c.budget.account.Refund()
		return false
	}
	if r.judgeBack(c); r.won != nil {
		// An outcome came back while the hedge was made (PrepareRetry
		// takes time), and won: the hedge is not needed.
		r.drop(c, h)
		r.sent = r.sent[:len(r.sent)-1]
		c.budget.account.Refund()
		return false
	}
	h.a.paid = true // given back if it wins
	c.host.count(nHedges)
	if c.t.OnRetry != nil {
		c.t.OnRetry(&RetryEvent{Request: c.req, Attempt: n - 1, Delay: due.Sub(r.sent[0].start), Source: "hedge", Hedge: true})
	}
	r.start(c, h)
	return true
}

// take returns the outcomes back since it was last called, until it is
// called again.
func (r *race) take() []*racer {
	r.mu.Lock()
	back := r.returned
	r.returned, r.spare = r.spare[:0], back
	r.mu.Unlock()
	for _, h := range back {
		h.inBase = false
	}
	r.out -= len(back)
	return back
}

// end ends the race, leaving its result in a: the winner; else, of the
// failures, the one whose answer asks, now, for the longest wait (the last
// back of those that ask as long), so that a wait any answer asked for
// holds for the retry. Every other attempt is dropped, or drops its own
// outcome when it comes back; the result's context ends with its body.
// Should a hook have panicked, there is no result: every attempt is
// dropped.
func (r *race) end(c *call, a *attempt) {
	r.mu.Lock()
	r.over = true
	r.mu.Unlock()
	r.take()
	res := r.won
	if res == nil && r.done {
		now, longest := c.t.clock.Now(), time.Duration(-1)
		for _, h := range r.failed {
			if d := askedWait(&h.a, now); d >= longest {
				res, longest = h, d
			}
		}
	}
	if !r.done {
		res = nil
	} else if res == r.won && res != r.sent[0] {
		c.host.count(nHedgeWins)
	}
	for _, h := range r.sent {
		if h != res {
			r.drop(c, h)
		}
	}
	if res != nil {
		*a = res.a
		res.endWith(a)
		c.held.resp = a.resp // the call's, should a hook panic
	}
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

// hedgedRequest gives the response of attempt a of a race, if any, the
// request it is to carry (see responseRequest), on the request's goroutine:
// an attempt that answers after the race is over reads nothing of the
// caller's. The first attempt's is the caller's request, whose Attempts is
// 1, as the mark's (not the attempt's own context, which ends with the
// body; a context holding an earlier request's mark gets this one's).
func (c *call) hedgedRequest(a *attempt) {
	switch {
	case a.resp == nil:
	case a.n == 1 && !c.markedBefore && c.key.added == "":
		a.resp.Request = c.req
	default:
		a.resp.Request = c.answeredRequest(mark.With(c.parent, a.mark))
	}
}

// endWith ends h's context with attempt a's response body (a is h's
// outcome, moved), or now if a has no response.
func (h *racer) endWith(a *attempt) {
	if a.resp == nil {
		h.cancel()
		return
	}
	h.body.Body, h.body.Fn = a.resp.Body, h.cancel
	respbody.Wrap(a.resp, &h.body)
}

