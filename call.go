package retryhttp

import (
	"cmp"
	"context"
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

// A request's life, in the order call.run reads it. Its decisions are in
// decide.go, an attempt's sending in attempt.go, hedging in hedging.go.

// call is one request on its way through the Transport.
type call struct {
	t            *Transport
	p            *policy
	req          *http.Request // the caller's, never modified
	parent       context.Context
	host         *host
	markedBefore bool // the context carries the number of a finished attempt (as resp.Request's does)
	budget       budgetState
	key          keying               // the fields from here to hedge are set by admit
	idem         bool                 // idempotent: by its method, or declared (see declaredIdempotent)
	max          int                  // the attempts it may make: MaxAttempts, less a layer above's
	body         replay.Body          // sends the request's body again
	trace        bool                 // attempts are traced to learn whether anything was sent
	readBody     bool                 // each attempt's response body is read (BufferResponse)
	gates        hostgate.Request     // the policy's gates (throttling, hedging), bound to the host
	hedge        *hostgate.HedgeState // the host's, if the request is hedged
	sent         int                  // attempts sent, hedges included
	retries      int                  // retries sent (a Backoff's n)
	prev         time.Duration        // the wait before the last attempt (a Backoff's prev)
	sentAt       int64                // when the last attempt was sent, on the Transport's monotonic scale
	errs         []error              // every attempt's error, in the order they came back
	tl           *timeline            // the attempts, if the policy records them
	resume       *resumable           // the response body its attempts resume, once returned
	held         held
}

// held is what a call holds open, for closeHeld to close should a hook
// panic. Each field is cleared as what it holds changes hands.
type held struct {
	entered    bool           // the request counts in flight at its host and budget, until leave
	callerBody io.ReadCloser  // the caller's body, until call.body takes it
	resp       *http.Response // the last attempt's response, until drained or returned
	next       io.ReadCloser  // the body made for the next attempt, until sent
}

// do runs the call, and releases what it holds should a hook panic. (A
// function of one return, so that its defer costs next to nothing.)
func (c *call) do() (*http.Response, error) {
	defer c.closeHeld()
	return c.run()
}

// run takes the request through its attempts, in the order a request lives.
func (c *call) run() (*http.Response, error) {
	if reason, err := c.admit(); reason != 0 {
		return c.giveUp(&attempt{}, reason, nil, err) // never sent, yet reported
	}
	a := attempt{n: 1}
	c.sendFirst(&a)
	return c.loop(&a)
}

// loop acts on attempt a's outcome, and on each retry's, until one ends the
// call: a success, or a failure given up on.
func (c *call) loop(a *attempt) (*http.Response, error) {
	for {
		c.held.resp, c.held.next = a.resp, nil
		if a.err != nil && c.parent.Err() != nil {
			// The caller ended the attempt: its error is not the host's.
			return c.giveUp(a, c.stop(time.Time{}, 0), nil, a.err)
		}
		v := c.judge(a)
		if c.p.hostWait > 0 && a.resp != nil {
			c.host.hold.heard(a, v, c.t.clock.Now())
		}
		if c.gates.Hears(hostgate.Accepted | hostgate.Refused) {
			e := hostgate.Accepted // unless an error, or a status the policy retries
			if a.err != nil || v.serverNo || v.status {
				e = hostgate.Refused
			}
			c.gates.Record(e, c.t.mono())
		}
		if !v.retry {
			return c.conclude(a, v)
		}
		now := c.t.clock.Now() // the failure's: the wait counts from it, its drain included
		pl := c.decide(a, v, now)
		if pl.reason != 0 {
			return c.stopRetrying(a, &pl, now)
		}
		if resp, err, ok := c.wait(a, &pl, now); !ok {
			return resp, err
		}
		if resp, err, ok := c.sendRetry(a, &pl); !ok {
			return resp, err
		}
	}
}

// admit learns what the request is (keyed, a retry from above, its body) and
// whether its gates and its host's wait let it go; if not, why, and the error.
func (c *call) admit() (Reason, error) {
	req, p := c.req, c.p
	c.held.callerBody = req.Body
	if p.timeline {
		c.tl = new(timeline)
	}
	declared := p.idempotent || declaredIdempotent(req.Header)
	c.idem = declared || idempotent(req.Method)
	n, err := c.key.admit(req, p, declared, &c.t.recent, c.t.clock)
	if err != nil {
		c.closeHeld()
		return c.reported(ReasonNotTransient), err
	}
	c.max = n
	if c.key.above > 0 {
		c.host.count(nRetriesFromAbove)
	}
	if p.gates.Len() > 0 && req.URL != nil {
		c.gates.Use(&p.gates)
		c.gates.MayMake(hostgate.KindFirst|hostgate.KindRetry, &c.host.gate) // (no gate asks of retries alone)
		if c.gates.Asks(hostgate.KindFirst) && !c.gates.Admit(hostgate.KindFirst, c.t.mono(), c.t.rand) {
			c.closeHeld()
			return ReasonThrottled, nil // never sent: no attempt's error to give
		}
	}
	c.body, err = replay.Prepare(req, p.maxBuffered)
	c.held.callerBody = nil // replay.Prepare's now: closed on error
	if err != nil {
		return c.reported(ReasonNotTransient), bodyLengthError(err)
	}
	if reason, err := c.awaitHost(); reason != 0 {
		return reason, err // (the body, never sent, closed as the call finishes)
	}
	hedgeable := c.max > 1 && (c.idem || c.key.keyed) && c.body.Kind != replay.Stream
	// Only a retry needs to know whether an attempt reached a connection, and
	// only where the error cannot tell: a stream body's attempt, and an
	// attempt timeout ending a request not safe to repeat. (net/http resends
	// what it did not write on a reused connection, and fails a dial.)
	c.trace = c.max > 1 && (c.body.Kind == replay.Stream || (!c.idem && !c.key.keyed && p.attemptTimeout > 0))
	if hedgeable && c.gates.Used() {
		c.gates.MayMake(hostgate.KindHedge, &c.host.gate)
		if p.hedge != nil {
			c.hedge = hostgate.HedgeOf(c.gates.Host())
		}
	}
	c.readBody = p.bufferResponse > 0 && hedgeable
	return 0, nil
}

// sendFirst sends the first attempt: in a group with its hedges if the
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
	c.recordSend(a, time.Time{}, false)
	c.send(a, &s)
	c.sent = 1
	if c.hedge != nil {
		// Too close to its deadline for a hedge: the host learns its latency.
		c.held.resp = a.resp // the call's, should Retryable panic
		a.v, a.judged = c.judge(a), true
		if !a.v.retry && a.resp != nil {
			c.hedge.Observe(time.Duration(c.t.mono() - c.sentAt))
		}
	}
}

// wait carries out plan pl after attempt a failed at now: the budget's line,
// then the delay; false if the call ended meanwhile, with its result.
func (c *call) wait(a *attempt, pl *plan, now time.Time) (*http.Response, error, bool) {
	var waited time.Duration // in the budget's line
	if pl.budget == budget.Wait {
		w, resp, err, ok := c.awaitBudget(a, pl, now)
		if !ok {
			return resp, err, false
		}
		waited, now = w, now.Add(w)
	}
	made := waited + pl.delay // from a's failure
	c.recordWait(made, waited, pl.source.String())
	if c.t.OnRetry != nil {
		c.t.OnRetry(&RetryEvent{Request: c.req, Attempt: a.n, Response: a.resp, Err: a.err,
			Delay: made, Source: pl.source.String(), BudgetWait: waited})
	}
	if c.t.Logger != nil {
		c.t.logRetry(c.req, a, made, pl.source, waited)
	}
	if c.held.resp != nil { // (nil if the line lost its body)
		// The drain counts toward the delay (a longer one delays the retry).
		respbody.Drain(c.parent, c.held.resp, c.drainTime(now, pl.delay), c.t.clock)
		c.held.resp = nil
	}
	c.budget.unused = min(max(c.budget.unused+pl.maxWait-made, -scheduleBeyond), scheduleBeyond)
	c.budget.maxWait, c.prev = pl.maxWait, made
	if pl.delay <= 0 && c.parent.Err() == nil ||
		c.t.clock.Sleep(c.parent, now.Add(pl.delay), nil) == clock.WokeTime {
		return nil, nil, true
	}
	if pl.paid {
		c.budget.account.Refund() // paid for, but never sent
	}
	resp, err := c.giveUp(a, c.stop(time.Time{}, 0), nil, a.endError(nil))
	return resp, err, false
}

// stopRetrying ends the call as plan pl says, after attempt a failed at now:
// with a's response, or pl's error, or a's.
func (c *call) stopRetrying(a *attempt, pl *plan, now time.Time) (*http.Response, error) {
	if pl.reason == ReasonBudget {
		c.host.count(nBudgetRefusals)
		if c.t.Logger != nil && pl.budget == budget.Refuse {
			c.t.warnBudget(c.req, now, warnRefused)
		}
	}
	return c.giveUp(a, pl.reason, a.resp, cmp.Or(pl.err, a.err))
}

// drainTime returns how long a failed attempt's body may take to drain or be
// read, its retry due delay later: no longer than delay if near the deadline.
func (c *call) drainTime(now time.Time, delay time.Duration) time.Duration {
	d := respbody.Time(delay)
	if dl, ok := c.parent.Deadline(); ok && !now.Add(d).Before(dl) {
		d = max(min(d, delay), 0)
	}
	return d
}

// sendRetry sends the retry after attempt a and leaves its outcome in a;
// false if PrepareRetry failed, with the call's result.
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
	if c.resume != nil {
		c.host.count(nResumes)
	}
	*a = next
	c.sentAt = c.t.mono()
	c.recordSend(a, time.Time{}, false)
	c.send(a, &s)
	c.sent = a.n
	c.retries++
	return nil, nil, true
}

// conclude ends the call with attempt a's outcome, judged v, not to be
// retried: a success, or a failure given up on.
func (c *call) conclude(a *attempt, v verdict) (*http.Response, error) {
	switch {
	case a.err != nil:
		return c.giveUp(a, c.reported(ReasonNotTransient), nil, a.err)
	case v.serverNo:
		c.budget.account.Failure(c.t.clock.Now(), &c.budget.id) // the server said not to retry: it is overloaded
		return c.giveUp(a, c.reported(ReasonServer), a.resp, nil)
	case v.status:
		return c.giveUp(a, c.reported(ReasonNotTransient), a.resp, nil)
	}
	if err := c.resume.check(a.resp); err != nil { // (nil for a call that resumes no body)
		a.resp.Body.Close()
		c.held.resp = nil
		return c.giveUp(a, ReasonNotTransient, nil, err)
	}
	c.budget.account.Success(c.t.clock, a.paid)
	return c.resumeLater(a, a.resp)
}

// giveUp ends the call with a failure after attempt a: resp if not nil, else
// an *Error.
func (c *call) giveUp(a *attempt, reason Reason, resp *http.Response, err error) (*http.Response, error) {
	if c.held.next != nil {
		c.held.next.Close() // a stream body counts this as the unused attempt's close
		c.held.next = nil
	}
	if resp != nil && c.resume != nil {
		resp, err = nil, c.resume.refuse(resp) // not the rest of the body: it ends with an error
	}
	c.host.countGiveUp(reason)
	if reason == ReasonThrottled {
		c.host.count(nThrottled)
		c.t.warnThrottle(c.req, c.t.clock.Now())
	}
	n := c.sent
	noteGiveUp(c.parent, reason, c.key.above+n)
	var out error
	if resp != nil {
		// Why the request stopped (StopReason) goes with the attempt number
		// resp.Request carries, unless a retrying Transport beneath set it.
		switch m := mark.OfRequest(resp.Request); {
		case m == nil:
			resp.Request = c.answeredRequest(mark.Ended(c.parent, a.n, uint8(reason)))
		case m.Stop == 0:
			m.Stop = uint8(reason)
		}
	} else {
		e := &Error{Attempts: n, Reason: reason, Err: err, earlier: allErrors(c.errs), timeline: c.tl}
		if n > 0 {
			e.Key = c.key.sent()
		}
		if reason == ReasonDeadline || reason == ReasonCanceled {
			// nil if the Transport's clock saw the deadline first (stop)
			e.ctxErr = cmp.Or(c.parent.Err(), context.DeadlineExceeded)
		}
		out = e
	}
	if c.t.OnGiveUp != nil {
		c.t.OnGiveUp(&GiveUpEvent{Request: c.req, Attempts: n, Reason: reason, Response: resp,
			Err: out, BudgetWait: c.budget.waited})
	}
	c.t.logGiveUp(c.req, n, reason, resp, out)
	return c.finish(a, resp, out)
}

// answeredRequest returns the request a response carries: a copy of the
// caller's, with ctx and the idempotency key the Transport added.
func (c *call) answeredRequest(ctx context.Context) *http.Request {
	r := c.req.WithContext(ctx)
	if c.key.added != "" {
		r.Header = c.key.header.Clone()
	}
	return r
}

// finish ends the call after attempt a, completes its timeline, and
// remembers the attempts of the caller's key (see keying.fromAbove).
func (c *call) finish(a *attempt, resp *http.Response, err error) (*http.Response, error) {
	c.endTimeline(a, resp)
	if c.resume == nil {
		// (A body that may resume keeps its request in flight until it ends.)
		c.leave()
		c.body.Finish()
	}
	c.held = held{entered: c.held.entered}
	if c.key.callers != "" && c.sent > 0 {
		c.t.recent.Add(c.key.callers, c.key.prior, c.sent, c.t.clock.Now())
	}
	return resp, err
}

// closeHeld closes what the call holds and leaves, unless it finished: for a
// call that did not return (a hook panicked), or that ended in admit.
func (c *call) closeHeld() {
	if !c.held.entered {
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
	c.body.Finish() // (a no-op before admit sets it)
	*h = held{}
}

// leave tells the host and the budget that the request has ended, once.
func (c *call) leave() {
	if c.held.entered {
		c.host.leave()
		c.budget.account.End()
		c.held.entered = false
	}
}
