package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/hostgate"
	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/replay"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// A request's life, from its admission to its end: call.run reads it in
// order. The decisions it acts on are in decide.go, one attempt's sending
// in attempt.go, and hedging in hedging.go.

// call is one logical request on its way through the attempt loop.
type call struct {
	t            *Transport
	p            *policy
	req          *http.Request // the caller's, never modified
	parent       context.Context
	host         *host       // what the Transport knows of the request's host
	markedBefore bool        // the context holds the mark of a finished attempt
	budget       budgetState // the request's part in its host's budget
	ended        bool        // the host and the budget were told that the request ended

	// What admission settled.
	key      keying               // its idempotency key, and the attempts a layer above made
	idem     bool                 // idempotent: by its method, or declared (see declaredIdempotent)
	max      int                  // attempts this request may make: MaxAttempts, less a layer above's
	body     replay.Body          // how the request's body is sent again
	trace    bool                 // attempts are watched for whether anything was sent
	readBody bool                 // each attempt's response body is read (BufferResponse)
	gates    hostgate.Request     // the policy's gates, bound to the host
	hedge    *hostgate.HedgeState // the host's hedging state, if the request is hedged

	// Progress.
	sent    int   // attempts sent, hedges included
	retries int   // retries sent (a Backoff's n)
	sentAt  int64 // when the last attempt was sent, on the Transport's monotonic scale

	held held // what is open, should the call not return
}

// held is what a call holds open: release closes it should the call not
// return, a hook (Retryable, a Backoff, OnRetry, OnGiveUp, PrepareRetry, a
// key generator, the Logger) having panicked. Each field is cleared as
// what it holds changes hands; a call that returns holds nothing.
type held struct {
	callerBody io.ReadCloser  // the caller's body, until the replay (call.body) takes it
	replay     bool           // call.body, until finished
	resp       *http.Response // the last attempt's response, until drained or returned
	next       io.ReadCloser  // the body made for the next attempt, until sent
}

// do runs the call, and releases what it holds should a hook panic. (A
// function of one return, so that its defer costs next to nothing.)
func (c *call) do() (*http.Response, error) {
	defer c.closeHeld()
	return c.run()
}

// run takes the request through its attempts, in the order a request
// lives: admit it, send, judge the outcome, decide whether and when to
// retry, wait (for the budget, then the delay), and send again.
func (c *call) run() (*http.Response, error) {
	if resp, err, ok := c.admit(); !ok {
		return resp, err
	}
	a := attempt{n: 1}
	c.sendFirst(&a)
	var prev time.Duration // the wait before a
	for {
		c.held.resp, c.held.next = a.resp, nil
		if a.err != nil && c.parent.Err() != nil {
			// The caller's cancellation or deadline ended the attempt:
			// its error is the caller's doing, not the host's.
			return c.giveUp(&a, c.stop(time.Time{}, 0), nil, a.err)
		}
		v := c.judge(&a)
		c.recordOutcome(&a, v)
		if !v.retry {
			return c.answer(&a, v)
		}
		now := c.t.clock.Now() // the failure's: the wait counts from it, its drain included
		pl := c.decide(&a, v, prev, now)
		if pl.reason != 0 {
			return c.stopRetrying(&a, &pl, now)
		}
		made, resp, err, ok := c.wait(&a, &pl, now)
		if !ok {
			return resp, err
		}
		prev = made
		if resp, err, ok := c.sendRetry(&a, &pl); !ok {
			return resp, err
		}
	}
}

// admit settles what the request is (keyed, a retry from a layer above,
// how its body is sent again) and whether its gates let it go. It returns
// false when the request ends there, with what it returns.
func (c *call) admit() (*http.Response, error, bool) {
	req, p := c.req, c.p
	c.held.callerBody = req.Body
	declared := p.idempotent || declaredIdempotent(req.Header)
	c.idem = declared || idempotent(req.Method)
	n, err := c.key.admit(req, p, declared, &c.t.recent, c.t.clock)
	if err != nil {
		c.closeHeld()
		resp, err := c.giveUp(&attempt{}, c.reported(ReasonNotTransient), nil, err) // never sent, yet reported
		return resp, err, false
	}
	c.max = n
	if c.key.above > 0 {
		c.host.count(nRetriesFromAbove)
	}
	if p.gates.Len() > 0 && req.URL != nil {
		kinds := hostgate.KindFirst
		if c.max > 1 {
			kinds |= hostgate.KindRetry
		}
		c.gates.Use(&p.gates)
		c.gates.MayMake(kinds, &c.host.gate)
		if c.gates.Asks(hostgate.KindFirst) && !c.gates.Admit(hostgate.KindFirst, c.t.mono(), c.t.rand) {
			c.closeHeld()
			resp, err := c.giveUp(&attempt{}, ReasonThrottled, nil, ErrThrottled)
			return resp, err, false
		}
	}
	body, err := replay.Prepare(req, p.maxBuffered)
	c.held.callerBody = nil // replay.Prepare's now: closed on error
	if err != nil {
		err = bodyLengthError(err)
		resp, err := c.giveUp(&attempt{}, c.reported(ReasonNotTransient), nil, err) // never sent, yet reported
		return resp, err, false
	}
	c.body = body
	c.held.replay = true
	hedgeable := c.max > 1 && (c.idem || c.key.keyed) && body.Kind != replay.Stream
	// Only a retry needs to know whether an attempt reached a connection,
	// and only where the base's answer cannot tell it: a stream body's
	// attempt (was none of it read?), and a timeout of the Transport's
	// ending a request that is not safe to repeat (did it end the wait for
	// a connection?). Elsewhere net/http tells it at no cost: a request it
	// did not write on a reused connection it sends again by itself (one
	// without a body, or whose body GetBody re-creates, as the Transport's
	// copies have it), and a failure to connect is a dial error.
	c.trace = c.max > 1 && (body.Kind == replay.Stream || (!c.idem && !c.key.keyed && p.attemptTimeout > 0))
	if hedgeable && c.gates.Used() {
		c.gates.MayMake(hostgate.KindHedge, &c.host.gate)
		if p.hedge != nil {
			c.hedge = hostgate.HedgeOf(c.gates.Host())
		}
	}
	c.readBody = p.bufferResponse > 0 && hedgeable
	return nil, nil, true
}

// sendFirst sends the first attempt: in a group with its hedges, if the
// request is hedged and a hedge could go before its deadline.
func (c *call) sendFirst(a *attempt) {
	body, getBody, _ := c.body.Next(c.req, 1)
	if c.gates.Hears(hostgate.RequestStarts) {
		c.gates.Record(hostgate.RequestStarts, c.t.mono())
	}
	if c.hedge != nil {
		if delay := c.hedge.Delay(c.p.hedge); c.stop(c.t.clock.Now(), delay) == 0 {
			c.sendHedged(a, body, getBody, delay)
			return
		}
	}
	s, _ := c.prepare(nil, a, body, getBody) // no PrepareRetry for a first attempt: no error
	c.send(a, &s)
	c.sent = 1
	if c.hedge != nil {
		// Hedged, but too close to its deadline for a hedge: its latency
		// is the host's to learn from all the same.
		a.v, a.judged = c.judge(a), true
		if !a.v.retry && a.resp != nil {
			c.hedge.Observe(time.Duration(c.t.mono() - c.sentAt))
		}
	}
}

// recordOutcome tells the gates that hear of it whether the host accepted
// attempt a, judged v: anything but a transient failure.
func (c *call) recordOutcome(a *attempt, v verdict) {
	if !c.gates.Hears(hostgate.Accepted | hostgate.Refused) {
		return
	}
	e := hostgate.Refused
	if a.err == nil && !v.serverNo && !v.status {
		e = hostgate.Accepted
	}
	c.gates.Record(e, c.t.mono())
}

// wait carries out plan pl for the retry after attempt a, which failed at
// now: the budget's line if the budget said to wait, and then the wait
// pl.delay. It returns the wait made, from a's
// failure to the next attempt's start; false when the call ended
// meanwhile, with what it returns.
func (c *call) wait(a *attempt, pl *plan, now time.Time) (time.Duration, *http.Response, error, bool) {
	var waited time.Duration // in the budget's line
	if pl.budget == budget.Wait {
		var resp *http.Response
		var err error
		var ok bool
		if waited, resp, err, ok = c.awaitBudget(a, pl, now); !ok {
			return 0, resp, err, false
		}
		now = now.Add(waited)
	}
	made := waited + pl.delay
	c.retryHooks(a, made, pl.source, waited)
	if c.held.resp != nil { // (not if the budget wait lost its body, closed)
		// The drain counts toward the wait: the next attempt starts at
		// now+delay, or when a drain longer than the delay ends.
		respbody.Drain(c.parent, c.held.resp, c.drainTime(now, pl.delay), c.t.clock)
		c.held.resp = nil
	}
	c.budget.unused = min(max(c.budget.unused+pl.maxWait-made, -scheduleBeyond), scheduleBeyond)
	c.budget.maxWait = pl.maxWait
	if pl.delay <= 0 && c.parent.Err() == nil {
		return made, nil, nil, true // no wait
	}
	if c.t.clock.Sleep(c.parent, now.Add(pl.delay), nil) == clock.WokeTime {
		return made, nil, nil, true
	}
	if pl.paid {
		c.budget.account.Refund() // paid for, but never sent
	}
	resp, err := c.giveUp(a, c.stop(time.Time{}, 0), nil, a.endError(nil))
	return 0, resp, err, false
}

// stopRetrying ends the call whose plan pl after attempt a, which failed at
// now, is to retry no more: the caller gets a's response, or its error
// (joined with pl's, the next body's). A retry refused for the budget is
// counted, and logged at most once per warnEvery where the budget itself
// refused it.
func (c *call) stopRetrying(a *attempt, pl *plan, now time.Time) (*http.Response, error) {
	if pl.reason == ReasonBudget {
		c.host.count(nBudgetRefusals)
		if c.t.Logger != nil && pl.budget == budget.Refuse {
			c.t.warnBudget(c.req, now, warnRefused)
		}
	}
	err := a.err
	if pl.err != nil {
		err = errors.Join(a.err, pl.err)
	}
	return c.giveUp(a, pl.reason, a.resp, err)
}

// drainTime returns how long the body of a failed attempt may take to
// drain (or to be read into memory) from now, its retry due delay later:
// respbody.Time(delay), but no longer than the delay where that would
// reach the caller's deadline, so that the retry still goes before it.
func (c *call) drainTime(now time.Time, delay time.Duration) time.Duration {
	d := respbody.Time(delay)
	if dl, ok := c.parent.Deadline(); ok && !now.Add(d).Before(dl) {
		d = max(min(d, delay), 0)
	}
	return d
}

// sendRetry sends the retry after attempt a, with its body, and leaves its
// outcome in a; it returns false, with what the call returns, when
// PrepareRetry failed.
func (c *call) sendRetry(a *attempt, pl *plan) (*http.Response, error, bool) {
	next := attempt{n: c.sent + 1, paid: pl.paid}
	s, err := c.prepare(nil, &next, pl.body, pl.getBody)
	c.held.next = nil // sent, or closed by prepare
	if err != nil {
		if pl.paid {
			c.budget.account.Refund() // paid for, but never sent
		}
		resp, err := c.giveUp(a, ReasonNotTransient, nil, err)
		return resp, err, false
	}
	c.host.count(nRetries)
	*a = next
	c.sentAt = c.t.mono()
	c.send(a, &s)
	c.sent = a.n
	c.retries++
	return nil, nil, true
}

// answer ends the call with attempt a's outcome, judged v, which is not to
// be retried: a success, or a failure given up on.
func (c *call) answer(a *attempt, v verdict) (*http.Response, error) {
	switch {
	case a.err != nil:
		return c.giveUp(a, c.reported(ReasonNotTransient), nil, a.err)
	case v.serverNo:
		c.budget.account.Failure(c.t.clock.Now(), &c.budget.id) // the server's word: it is overloaded
		return c.giveUp(a, c.reported(ReasonServer), a.resp, nil)
	case v.status:
		return c.giveUp(a, c.reported(ReasonNotTransient), a.resp, nil)
	}
	c.budget.account.Success(c.t.clock, a.paid)
	return c.finish(a.resp, nil)
}

// giveUp ends the call with a failure: the response when there is one,
// else an *Error. The body made for a next attempt, if any, is closed.
func (c *call) giveUp(a *attempt, reason Reason, resp *http.Response, err error) (*http.Response, error) {
	if c.held.next != nil {
		c.held.next.Close() // a stream body counts this as the unused attempt's close
		c.held.next = nil
	}
	c.host.countGiveUp(reason)
	if reason == ReasonThrottled {
		c.host.count(nThrottled)
		if c.t.Logger != nil {
			c.t.warnThrottle(c.req, c.t.clock.Now())
		}
	}
	n := c.sent
	noteGiveUp(c.parent, reason, c.key.above+n)
	var out error
	if resp == nil {
		e := &Error{Attempts: n, Reason: reason, Err: err}
		if n > 0 {
			e.Key = c.key.sent()
		}
		if reason == ReasonDeadline || reason == ReasonCanceled {
			e.ctxErr = c.parent.Err()
			if e.ctxErr == nil {
				e.ctxErr = context.DeadlineExceeded
			}
		}
		out = e
	}
	if resp != nil {
		c.markStop(a, resp, reason)
	}
	if c.t.OnGiveUp != nil {
		c.t.OnGiveUp(&GiveUpEvent{Request: c.req, Attempts: n, Reason: reason, Response: resp,
			Err: out, BudgetWait: c.budget.waited})
	}
	if c.t.Logger != nil {
		c.t.logGiveUp(c.req, n, reason, resp, out)
	}
	return c.finish(resp, out)
}

// markStop records on resp, the failure attempt a ended the request with,
// why the request stopped (StopReason), on the mark resp.Request carries:
// a's, or that of a retrying Transport beneath, whose reason, said first,
// stays; where it carries none, on a mark made for it.
func (c *call) markStop(a *attempt, resp *http.Response, reason Reason) {
	switch m := mark.OfRequest(resp.Request); {
	case m == nil:
		n := 1
		if a.mark != nil {
			n = a.mark.N
		}
		resp.Request = c.answeredRequest(mark.Ended(c.parent, n, uint8(reason)))
	case m.Stop == 0:
		m.Stop = uint8(reason)
	}
}

// answeredRequest returns the request a response carries, with ctx: the
// caller's, with the idempotency key the Transport added, if any (a copy:
// the caller's request is never modified).
func (c *call) answeredRequest(ctx context.Context) *http.Request {
	r := c.req.WithContext(ctx)
	if c.key.added != "" {
		r.Header = c.key.header.Clone()
	}
	return r
}

// finish ends the call: the response and bodies are the caller's or
// released, and the memory of recent keys learns the attempts of the key.
func (c *call) finish(resp *http.Response, err error) (*http.Response, error) {
	c.leave()
	c.body.Finish()
	c.held = held{}
	if c.key.callers != "" && c.sent > 0 {
		c.t.recent.Add(c.key.callers, c.key.prior, c.sent, c.t.clock.Now())
	}
	return resp, err
}

// closeHeld closes what the call holds, and ends it for the budget: the end
// of a call that did not return (a hook panicked) or that ended before
// it held anything of its own.
func (c *call) closeHeld() {
	if c.ended {
		return // finished: it holds nothing
	}
	c.leave()
	h := &c.held
	if h.resp != nil {
		h.resp.Body.Close()
	}
	if h.next != nil {
		h.next.Close()
	}
	if h.callerBody != nil {
		h.callerBody.Close()
	}
	if h.replay {
		c.body.Finish()
	}
	*h = held{}
}

// leave tells the host and the budget that the request has ended, once.
func (c *call) leave() {
	if !c.ended {
		c.host.leave()
		c.budget.account.End()
		c.ended = true
	}
}

// retryHooks tells OnRetry and the Logger of the retry after attempt a,
// which goes delay after a failed, waited of it spent in the budget's line.
func (c *call) retryHooks(a *attempt, delay time.Duration, source delaySource, waited time.Duration) {
	if c.t.OnRetry != nil {
		c.t.OnRetry(&RetryEvent{Request: c.req, Attempt: a.n, Response: a.resp, Err: a.err,
			Delay: delay, Source: source.String(), BudgetWait: waited})
	}
	if c.t.Logger != nil {
		c.t.logRetry(c.req, a, delay, source, waited)
	}
}
