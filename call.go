package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/hostgate"
	"github.com/retryhttp/retryhttp/internal/replay"
)

// call is one logical request on its way through the attempt loop.
type call struct {
	t      *Transport
	p      *policy
	req    *http.Request // the caller's, never modified
	parent context.Context
	hc     *counters    // the host's counters, if Transport.TrackHosts
	stale  bool         // the context holds the mark of a finished attempt
	lane   *budget.Lane // the host's part of the budget; nil: unlimited
	id     uint64       // the request's id for the budget, once it reported a failure
	ended  bool         // the budget was told that the request ended

	// What admission settled.
	header   http.Header          // the request's header with an added key, or nil
	keyed    bool                 // the request carries an idempotency key
	key      string               // the caller's idempotency key, if any was looked for
	prior    int                  // attempts the key had before this request (a retry from above)
	idem     bool                 // idempotent: by its method, or declared (see declaredIdempotent)
	max      int                  // attempts this request may make: MaxAttempts, less an outer layer's
	body     replay.Body          // how the request's body is sent again
	trace    bool                 // attempts are watched for whether anything was sent
	readBody bool                 // each attempt's response body is read (BufferResponse)
	gates    hostgate.Request     // the policy's gates, bound to the host
	hedge    *hostgate.HedgeState // the host's hedging state, if the request is hedged

	// Progress.
	sent    int           // attempts sent
	horizon time.Time     // when waits in the budget's line end at the latest: see lineHorizon
	waited  time.Duration // waited for the budget, in all

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

// release closes what the call holds, and ends it for the budget.
func (c *call) release() {
	c.endLane()
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

// do runs the call, and releases what it holds should a hook panic. first
// is the first attempt if it was made already (on the fast path). (A
// function of one return, so that its defer costs next to nothing.)
func (c *call) do(first *attempt) (*http.Response, error) {
	defer c.release()
	return c.run(first)
}

// run takes the request through its attempts, in the order a request
// lives: admit it, send, judge the outcome, gate the retry, wait, and send
// again.
func (c *call) run(first *attempt) (*http.Response, error) {
	if resp, err, ok := c.admit(); !ok {
		return resp, err
	}
	a := attempt{n: 1}
	if first != nil {
		a, c.sent = *first, 1
	} else {
		c.sendFirst(&a)
	}
	var prev time.Duration // the wait before a
	for {
		c.held.resp, c.held.next = a.resp, nil
		if c.parent.Err() != nil { // the caller's cancellation or deadline
			if a.resp != nil {
				return c.finish(a.resp, nil)
			}
			return c.giveUp(&a, ctxReason(c.parent), nil, a.err)
		}
		v := c.judge(&a)
		c.recordAnswer(&a, v)
		if !v.retry {
			return c.conclude(&a, v)
		}
		// A race's winner that is to be retried (Retryable) comes after
		// every attempt the race sent: so does its retry.
		a.n = max(a.n, c.sent)
		now := c.t.clock.Now() // the failure's: the wait counts from it, its drain included
		st := c.decide(&a, v, prev, now)
		if c.lane != nil && overloadEvidence(&a, st, now) {
			c.lane.Failure(now, &c.id)
		}
		if st.reason != 0 {
			return c.giveUp(&a, st.reason, a.resp, a.err)
		}
		body, getBody, err := c.body.Next(c.req, a.n+1)
		c.held.next = body
		if err != nil {
			return c.giveUp(&a, ReasonBody, a.resp, errors.Join(a.err, err))
		}
		if resp, err, ok := c.wait(&a, st, prev, now); !ok {
			return resp, err
		}
		prev = st.delay
		if resp, err, ok := c.sendRetry(&a, body, getBody); !ok {
			return resp, err
		}
	}
}

// sendRetry sends the retry after attempt a, with its body, and leaves its
// outcome in a; it returns false, with what the call returns, when
// PrepareRetry failed.
func (c *call) sendRetry(a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error)) (*http.Response, error, bool) {
	next := attempt{n: a.n + 1}
	s, err := c.prepare(nil, &next, body, getBody)
	c.held.next = nil // sent, or closed by prepare
	if err != nil {
		resp, err := c.giveUp(a, ReasonPrepareRetry, nil, err)
		return resp, err, false
	}
	c.count(nRetries)
	*a = next
	c.send(a, &s)
	c.sent = a.n
	return nil, nil, true
}

// admit settles what the request is (keyed, a retry from a layer above,
// how its body is sent again) and whether its gates let it go. It returns
// false when the request ends there, with what it returns.
func (c *call) admit() (*http.Response, error, bool) {
	req, p := c.req, c.p
	c.held.callerBody = req.Body
	declared := p.idempotent || declaredIdempotent(req.Header)
	c.idem = declared || idempotent(req.Method)
	// Looked for whatever the method: a key tells a retry from a layer
	// above (see outer), and lets a 409 be retried.
	c.keyed = header.HasKey(req.Header, p.keys.name())
	if !c.keyed && !declared && p.keys != nil && p.keys.applies(req.Method) {
		key, err := p.keys.newKey()
		if err != nil {
			c.release()
			return nil, err, false
		}
		c.header = req.Header.Clone()
		if c.header == nil {
			c.header = make(http.Header, 1)
		}
		p.keys.setKey(c.header, key)
		c.keyed = true
	} else if c.keyed {
		c.key = header.CallerKey(req.Header, p.keys.name())
	}
	c.max = p.maxAttempts
	c.outer(req)
	if p.gates.Len() > 0 && req.URL != nil {
		kinds := hostgate.KindFirst
		if c.max > 1 {
			kinds |= hostgate.KindRetry
		}
		c.gates.Use(&p.gates)
		c.gates.MayMake(kinds, &c.t.perHost, req.URL.Host)
		if c.gates.Asks(hostgate.KindFirst) && !c.gates.Admit(hostgate.KindFirst, c.t.mono(), c.t.rand) {
			c.release()
			resp, err := c.giveUp(&attempt{}, ReasonThrottled, nil, ErrThrottled)
			return resp, err, false
		}
	}
	body, err := replay.Prepare(req, p.maxBuffered)
	c.held.callerBody = nil // replay.Prepare's now: closed on error
	if err != nil {
		return nil, err, false
	}
	c.body = body
	c.held.replay = true
	hedgeable := c.max > 1 && (c.idem || c.keyed) && body.Kind != replay.Stream
	// Only a retry needs to know whether an attempt reached a connection,
	// and only where the base's answer cannot tell it: a stream body's
	// attempt (was none of it read?), and a timeout of the Transport's
	// ending a request that is not safe to repeat (did it end the wait for
	// a connection?). Elsewhere net/http tells it at no cost: a request it
	// did not write on a reused connection it sends again by itself (one
	// without a body, or whose body GetBody re-creates, as the Transport's
	// copies have it), and a failure to connect is a dial error.
	c.trace = c.max > 1 && (body.Kind == replay.Stream || (!c.idem && !c.keyed && p.attemptTimeout > 0))
	if hedgeable && c.gates.Used() {
		c.gates.MayMake(hostgate.KindHedge, &c.t.perHost, req.URL.Host)
		if p.hedge != nil {
			c.hedge = hostgate.HedgeOf(c.gates.Host())
		}
	}
	c.readBody = p.bufferResponse > 0 && hedgeable
	return nil, nil, true
}

// outer finds whether req is a retry made by a layer above (see outer.go)
// and, if so, leaves it the attempts it has left.
func (c *call) outer(req *http.Request) {
	if c.key != "" {
		// Also for a retry marked below: the key's attempts add up.
		c.prior = c.t.recent.Prior(c.key, c.t.clock.Now())
	}
	if n := header.SDKAttempt(req.Header); n > 1 {
		c.count(nOuterRetries)
		c.max = 1 // the SDK above does the retrying
		return
	}
	if c.prior > 0 {
		c.count(nOuterRetries)
		c.max = max(c.p.maxAttempts-c.prior, 1)
	}
}

// sendFirst sends the first attempt: hedged, if the request is (the race
// then tells the gates that the request starts, as it starts).
func (c *call) sendFirst(a *attempt) {
	body, getBody, _ := c.body.Next(c.req, 1)
	if c.hedge != nil {
		c.race(a, body, getBody)
		return
	}
	if c.gates.Hears(hostgate.RequestStarts) {
		c.gates.Record(hostgate.RequestStarts, c.t.mono())
	}
	s, _ := c.prepare(nil, a, body, getBody) // no PrepareRetry for a first attempt: no error
	c.send(a, &s)
	c.sent = 1
}

// recordAnswer tells the gates that hear of it whether the host accepted
// attempt a, judged v: anything but a transient failure.
func (c *call) recordAnswer(a *attempt, v verdict) {
	if !c.gates.Hears(hostgate.Accepted | hostgate.Refused) {
		return
	}
	e := hostgate.Refused
	if a.err == nil && !v.serverNo && !c.p.retryStatus(a.resp.StatusCode, c.keyed) {
		e = hostgate.Accepted
	}
	c.gates.Record(e, c.t.mono())
}

// conclude ends the call with attempt a's outcome, which is not to be
// retried: a success, or a failure given up on.
func (c *call) conclude(a *attempt, v verdict) (*http.Response, error) {
	switch {
	case a.err != nil:
		return c.giveUp(a, ReasonNotTransient, nil, a.err)
	case v.serverNo:
		c.lane.Failure(c.t.clock.Now(), &c.id) // the server's word: it is overloaded
		return c.giveUp(a, ReasonServer, a.resp, nil)
	case c.p.retryStatus(a.resp.StatusCode, c.keyed):
		return c.giveUp(a, ReasonNotTransient, a.resp, nil)
	}
	c.lane.Success(c.t.clock, a.n)
	return c.finish(a.resp, nil)
}

// endLane tells the budget that the request has ended, once.
func (c *call) endLane() {
	if !c.ended {
		c.lane.End()
		c.ended = true
	}
}

// giveUp ends the call with a failure: the response when there is one,
// else an *Error.
func (c *call) giveUp(a *attempt, reason Reason, resp *http.Response, err error) (*http.Response, error) {
	c.countGiveUp(reason)
	if reason == ReasonThrottled {
		c.count(nThrottled)
		c.warnThrottle(c.t.clock.Now())
	}
	n := max(a.n, c.sent) // a race's winner: the race's hedges were sent too
	noteGiveUp(c.parent, reason, n)
	var out error
	if resp == nil {
		e := &Error{Attempts: n, Reason: reason, Err: err}
		if reason == ReasonDeadline || reason == ReasonCanceled {
			e.ctxErr = c.parent.Err()
			if e.ctxErr == nil {
				e.ctxErr = context.DeadlineExceeded
			}
		}
		out = e
	}
	c.giveUpHooks(n, reason, resp, out)
	return c.finish(resp, out)
}

// finish ends the call: the response and bodies are the caller's or
// released, and the outer-layer memory learns the attempts of the key.
func (c *call) finish(resp *http.Response, err error) (*http.Response, error) {
	c.endLane()
	c.body.Finish()
	c.held = held{}
	if c.key != "" && c.sent > 0 {
		c.t.recent.Add(c.key, c.prior, c.sent, c.t.clock.Now())
	}
	return resp, err
}
