package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// attempt is one attempt of a call: its number, its outcome, and what the
// outcome is judged to be worth.
type attempt struct {
	n              int
	mark           *mark.Mark     // on its request's context; nil when sent as the caller's own request
	resp           *http.Response // its response, or nil
	dropped        http.Header    // the header of a response dropped as its body failed (see complete)
	err            error          // its error, or nil
	timedOut       bool           // the attempt's own timeout fired
	retriedBeneath bool           // a retrying Transport under this one made several attempts
	conn           *atomic.Uint32 // connAsk, connGot and connWrote bits; nil when not traced
	fields         header.Fields  // the fields of resp's header its judging reads, 0 until scanned
	paid           bool           // it spent a retry of the budget's credit, given back if it succeeds

	judged bool    // v holds the verdict (hedging judged it)
	v      verdict // valid if judged
}

// fieldsOf returns the fields of the attempt's response header that its
// judging reads, scanning the header once. Requires a header.
func (a *attempt) fieldsOf() header.Fields { return a.fields.Of(a.answerHeader()) }

// answerHeader returns the header of the attempt's answer: its response's,
// or that of a response dropped as its body failed; nil if neither. A
// wait the server asked for in it holds for the retry.
func (a *attempt) answerHeader() http.Header {
	if a.resp != nil {
		return a.resp.Header
	}
	return a.dropped
}

// Bits of attempt.conn, set by the attempt's httptrace hooks.
const (
	connGot   = 1 << iota // GotConn: a connection was obtained
	connWrote             // WroteHeaders: the request's header was written

	connAskShift = 8                 // the bits above count GetConn calls
	connAsk      = 1 << connAskShift // GetConn: the base looks for a connection
)

// nothingWritten reports whether the attempt provably never sent a request
// a server could act on: the base reported asking for a connection (so it
// reports through httptrace at all) and either never got one, or never
// finished writing the request's header on it. net/http reports
// WroteHeaders once the whole header is written (HTTP/1.1) or the HEADERS
// frame (HTTP/2); a server cannot apply a request whose header it never
// got whole, as when a connection is closed under a request still queued
// behind others.
func (a *attempt) nothingWritten() bool {
	if a.conn == nil {
		return false
	}
	bits := a.conn.Load()
	return bits>>connAskShift != 0 && (bits&connGot == 0 || bits&connWrote == 0)
}

// markedRequest is an attempt's request and the context that carries its
// mark, made together: one allocation for a retry's request, not two.
type markedRequest struct {
	r   http.Request
	ctx mark.Context
}

// sending is an attempt's request on its way, and what was made for it.
type sending struct {
	r      *http.Request
	marked context.Context         // the parent with the attempt's mark; nil when r is the caller's request
	ra     *member                 // the attempt's own context, in a group
	cancel context.CancelCauseFunc // ends the attempt's context, with an attempt timeout
	timer  clock.Timer             // the attempt timeout's
}

// prepare makes the request of attempt a, with the given body, under the
// caller's context or, in hedging (ra not nil), under the attempt's own. The
// first attempt goes out as the caller's request when nothing needs
// changing: no allocation on the success path. Later attempts carry the
// attempt mark, so that a retrying Transport reached inside them sends once;
// one reached inside an unmarked first attempt may retry, and this
// Transport then returns its result as it is (ReasonNoRetries). A Base that is
// itself a Transport gets the mark on every attempt.
//
// For a retry it calls PrepareRetry, whose error it returns: the attempt
// is then not sent, and its body closed.
func (c *call) prepare(ra *member, a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error)) (sending, error) {
	p := c.p
	s := sending{r: c.req, ra: ra}
	if a.n == 1 && !c.t.overTransport && !c.markedBefore && c.key.header == nil && !c.trace && p.attemptTimeout == 0 &&
		!c.body.NeedsCopy(a.n) && ra == nil {
		return s, nil
	}
	var mr *markedRequest
	if ra != nil {
		s.marked, a.mark = &ra.ctx, &ra.ctx.Mark
	} else {
		mr = new(markedRequest)
		mr.ctx.Context = c.parent
		mr.ctx.Mark.N = a.n
		s.marked, a.mark = &mr.ctx, &mr.ctx.Mark
	}
	ctx := s.marked
	if c.trace || c.key.header != nil {
		// Watched: whether the attempt wrote anything (c.trace), and the
		// resends net/http makes by itself within it (of requests it
		// resends: keyed ones, whose key the Transport added).
		conn := new(atomic.Uint32)
		a.conn = conn
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GetConn:      func(string) { conn.Add(connAsk) },
			GotConn:      func(httptrace.GotConnInfo) { conn.Or(connGot) },
			WroteHeaders: func() { conn.Or(connWrote) },
		})
	}
	if p.attemptTimeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		s.cancel = cancel
		s.timer = c.t.clock.AfterFunc(p.attemptTimeout, func() { cancel(ErrAttemptTimeout) })
	}
	// The request is made in the allocation that holds its context:
	// WithContext is inlined, and the copy it makes is not on the heap.
	if mr != nil {
		mr.r = *c.req.WithContext(ctx)
		s.r = &mr.r
	} else {
		ra.req = *c.req.WithContext(ctx)
		s.r = &ra.req
	}
	if c.key.header != nil {
		s.r.Header = c.key.header
	}
	s.r.Body, s.r.GetBody = body, getBody
	if ra != nil || (a.n > 1 && c.t.PrepareRetry != nil) {
		ownHeaderAndURL(s.r)
	}
	if a.n > 1 && c.t.PrepareRetry != nil {
		if err := c.prepareRetry(&s, a); err != nil {
			s.abandon(a)
			return sending{}, err
		}
	}
	return s, nil
}

// prepareRetry calls PrepareRetry with the request of attempt a. Should
// the hook panic, the attempt's timeout and context end here (its body is
// the call's to close: call.held).
func (c *call) prepareRetry(s *sending, a *attempt) error {
	returned := false
	defer func() {
		if !returned {
			s.end(a)
		}
	}()
	err := c.t.PrepareRetry(s.r)
	returned = true
	return err
}

// ownHeaderAndURL gives r, a copy of the caller's request made with
// WithContext, a header and a URL of its own instead of the caller's, for
// an attempt that PrepareRetry may change (this attempt's alone) or for
// an attempt of a group: one that lost may still be in the base after
// RoundTrip returned (canceled; net/http's write loop can outlive its
// RoundTrip), when the caller may change its request again. The URL's
// Userinfo, which has no setters, stays shared. The header is not nil, so that a hook can set fields in the copy of a request built
// without one.
func ownHeaderAndURL(r *http.Request) {
	r.Header = r.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	if r.URL != nil {
		u := *r.URL
		r.URL = &u
	}
}

// abandon releases what was made for an attempt that is not sent.
func (s *sending) abandon(a *attempt) {
	if s.r != nil && s.r.Body != nil {
		s.r.Body.Close()
	}
	s.end(a)
}

// end ends the timeout and context made for an attempt that is not sent.
func (s *sending) end(a *attempt) {
	if s.cancel != nil {
		s.timer.Stop()
		s.cancel(nil)
	}
	if a.mark != nil {
		a.mark.Done()
	}
}

// send sends attempt a's request, counting it, and leaves its outcome in
// a. (The call's count of attempts sent, c.sent, is its caller's to set: a
// hedge runs on a copy of the call.)
func (c *call) send(a *attempt, s *sending) {
	c.host.count(nAttempts)
	resp, err := c.t.base.RoundTrip(s.r)
	c.complete(a, s, resp, err)
}

// complete leaves in a the outcome of an attempt that the base answered
// with resp and err, giving the response what the caller may rely on: a
// body, the request it answers (with the attempt's mark, for Attempts), a
// body that ends the attempt's context when closed, and the RoundTripper
// contract kept (a response or an error, never both or neither).
func (c *call) complete(a *attempt, s *sending, resp *http.Response, err error) {
	if a.conn != nil {
		if asks := a.conn.Load() >> connAskShift; asks > 1 {
			c.host.countN(nNetHTTPResends, uint64(asks-1))
		}
	}
	if a.mark != nil {
		a.mark.Done()
	}
	if resp != nil {
		if resp.Body == nil { // http.Client tolerates it; so do we
			resp.Body = http.NoBody
		}
		// Whether a Transport under this one retried: its mark is on the
		// request it answered.
		if m := mark.OfRequest(resp.Request); m != nil && m != a.mark && m.N > 1 {
			a.retriedBeneath = true
		}
		if s.ra == nil { // (a group's attempt gets it from the group: hedgedRequest)
			resp.Request = c.responseRequest(a, s, resp.Request)
		}
	}
	// The header of an answer whose body then fails to buffer, or which
	// came as the attempt timed out, is the server's: a wait it asks for
	// holds for the retry.
	var answered http.Header
	if err == nil && resp != nil {
		answered = resp.Header
	}
	inMemory := false // the whole body is in memory: nothing to release later
	if err == nil && resp != nil && c.readBody && resp.StatusCode != http.StatusSwitchingProtocols {
		inMemory, err = respbody.Buffer(s.r.Context(), resp, c.p.bufferResponse)
		if err != nil {
			resp = nil
		}
	}
	fired := s.timer != nil && !s.timer.Stop() // the attempt timeout went off
	if fired && err == nil && resp != nil {
		// The headers came as the timeout canceled the attempt's context,
		// which cuts off the body: the attempt timed out.
		resp.Body.Close()
		resp, err = nil, errors.New("response headers arrived as the attempt timed out")
	}
	if err != nil && resp != nil { // a base breaking the RoundTripper contract
		resp.Body.Close()
		resp = nil
	}
	if err == nil && resp == nil {
		err = errors.New("retryhttp: base transport returned neither response nor error")
	}
	if s.cancel != nil {
		err = c.endTimeout(a, s, resp, err, fired, inMemory)
	}
	a.resp, a.err, a.fields, a.dropped = resp, err, 0, nil
	if resp == nil {
		a.dropped = answered
	}
}

// responseRequest returns the request a response of attempt a, not a
// hedged one, is to carry: the caller's, as http.Transport returns it, with
// this attempt's mark (for Attempts) over the caller's context, and the
// idempotency key the Transport added (a header of its own, not the one the
// attempts share); not the attempt's own context, which an attempt timeout
// cancels and a trace watches. got is the request the base set.
func (c *call) responseRequest(a *attempt, s *sending, got *http.Request) *http.Request {
	switch {
	case a.mark == nil:
		if got == nil {
			return c.req
		}
		return got
	case s.r.Context() == s.marked && c.key.added == "":
		return s.r
	}
	return c.answeredRequest(s.marked)
}

// endTimeout ties the end of an attempt's own context (made for its
// timeout) to its outcome: now for an error or a body in memory, else when
// the body is closed or read to its end. It returns the attempt's error,
// which an attempt timeout turns into one the loop retries.
func (c *call) endTimeout(a *attempt, s *sending, resp *http.Response, err error, fired, inMemory bool) error {
	switch {
	case err != nil:
		if (fired || context.Cause(s.r.Context()) == ErrAttemptTimeout) && c.parent.Err() == nil {
			a.timedOut = true
			if errors.Is(err, context.Canceled) {
				// Some transports (HTTP/2) report the attempt's context as
				// canceled: that is not the caller's doing.
				err = nil
			}
			err = &attemptTimeoutError{timeout: c.p.attemptTimeout, err: err}
		}
		s.cancel(nil)
	case inMemory:
		s.cancel(nil)
	default:
		cancel := s.cancel
		respbody.Wrap(resp, &respbody.Release{Body: resp.Body, Fn: func() { cancel(nil) }})
	}
	return err
}

// endError returns the error a request whose attempt a failed ends with,
// unless it ends with resp (a's response, kept in memory): a's error, or
// its status as a statusError.
func (a *attempt) endError(resp *http.Response) error {
	if resp != nil {
		return nil
	}
	if a.err != nil {
		return a.err
	}
	return &statusError{StatusCode: a.resp.StatusCode}
}

// drain drains and closes the attempt's response, if any: for
// respbody.MinTime at most, and not past ctx's deadline (the caller's).
func (a *attempt) drain(ctx context.Context, clk clock.Clock) {
	if a.resp == nil {
		return
	}
	limit := respbody.MinTime
	if dl, ok := ctx.Deadline(); ok {
		limit = max(min(limit, dl.Sub(clk.Now())), 0)
	}
	respbody.Drain(ctx, a.resp, limit, clk)
}
