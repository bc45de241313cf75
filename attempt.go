package retryhttp

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// attempt is one attempt of a call: its number, its outcome, and its verdict.
type attempt struct {
	n              int
	mark           *mark.Mark // its number on its request's context; nil when sent as the caller's own request
	resp           *http.Response
	dropped        http.Header // the header of a response dropped as its body failed (see complete)
	err            error
	timedOut       bool           // the attempt's own timeout fired
	retriedBeneath bool           // a retrying Transport beneath made several attempts
	conn           *atomic.Uint32 // connAsk, connGot and connWrote bits; nil when not traced
	fields         header.Fields  // the fields of resp's header that judging reads, 0 until scanned
	paid           bool           // it spent a retry of the budget's credit, given back if it succeeds
	judged         bool           // v holds its verdict (hedging judged it)
	v              verdict
	back           time.Time // when its outcome came back, if its request records a timeline
}

// fieldsOf returns answerHeader()'s fields that judging reads, scanned once.
func (a *attempt) fieldsOf() header.Fields { return a.fields.Of(a.answerHeader()) }

// answerHeader returns the header of the attempt's response, or of one
// dropped as its body failed (a wait it asks for still holds); nil if none.
func (a *attempt) answerHeader() http.Header {
	if a.resp != nil {
		return a.resp.Header
	}
	return a.dropped
}

// Bits of attempt.conn, set by the attempt's httptrace hooks.
const (
	connGot      = 1 << iota         // GotConn: a connection was obtained
	connWrote                        // WroteHeaders: the request's header was written
	connAskShift = 8                 // the bits above count GetConn calls
	connAsk      = 1 << connAskShift // GetConn: the base looks for a connection
)

// nothingWritten reports whether the attempt provably sent nothing a server
// could act on: the base asked for a connection (it reports to httptrace) but
// got none, or never wrote the whole header (on HTTP/2, its HEADERS frame).
func (a *attempt) nothingWritten() bool {
	if a.conn == nil {
		return false
	}
	bits := a.conn.Load()
	return bits>>connAskShift != 0 && (bits&connGot == 0 || bits&connWrote == 0)
}

// markedRequest is an attempt's request and the context that carries its
// number, made together: one allocation for a retry's request, not two.
type markedRequest struct {
	r   http.Request
	ctx mark.Context
}

// sending is an attempt's request on its way, and what was made for it.
type sending struct {
	r      *http.Request
	marked context.Context         // the parent with the attempt's number; nil when r is the caller's request
	member *member                 // the group member it is, if hedged
	cancel context.CancelCauseFunc // ends the attempt's own context (attempt timeout)
	timer  clock.Timer             // the attempt timeout's
}

// prepare makes attempt a's request, with body, under the caller's context or
// a group member's own (m): the caller's request itself if nothing needs
// changing (no allocation on the success path). Others carry their number on
// the context (internal/mark): a retrying Transport inside sends once. An
// error is PrepareRetry's: the attempt is not sent, its body closed.
func (c *call) prepare(m *member, a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error)) (sending, error) {
	s := sending{r: c.req, member: m}
	if a.n == 1 && m == nil && !c.t.baseIsTransport && !c.markedBefore && c.key.header == nil && !c.trace &&
		c.p.attemptTimeout == 0 && !c.body.NeedsCopy(a.n) {
		return s, nil
	}
	// The request is made in the allocation that holds its context:
	// WithContext is inlined, and the copy it makes is not on the heap.
	var r *http.Request
	var mctx *mark.Context
	if m != nil {
		r, mctx = &m.req, &m.ctx
	} else {
		mr := new(markedRequest)
		mr.ctx.Context, mr.ctx.Mark.N = c.parent, a.n
		r, mctx = &mr.r, &mr.ctx
	}
	s.marked, a.mark = mctx, &mctx.Mark
	ctx := s.marked
	if c.trace || c.key.header != nil {
		// Traced: whether anything was written (c.trace), and net/http's
		// own resends of a request keyed here (Stats.NetHTTPResends).
		conn := new(atomic.Uint32)
		a.conn = conn
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GetConn:      func(string) { conn.Add(connAsk) },
			GotConn:      func(httptrace.GotConnInfo) { conn.Or(connGot) },
			WroteHeaders: func() { conn.Or(connWrote) },
		})
	}
	if c.p.attemptTimeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		s.cancel = cancel
		s.timer = c.t.clock.AfterFunc(c.p.attemptTimeout, func() { cancel(ErrAttemptTimeout) })
	}
	*r = *c.req.WithContext(ctx)
	s.r = r
	if c.key.header != nil {
		s.r.Header = c.key.header
	}
	s.r.Body, s.r.GetBody = body, getBody
	if m != nil || (a.n > 1 && c.t.PrepareRetry != nil) || c.resume != nil {
		ownHeaderAndURL(s.r)
	}
	if c.resume != nil {
		c.resume.ask(s.r.Header)
	}
	if a.n > 1 && c.t.PrepareRetry != nil {
		if err := c.prepareRetry(&s, a); err != nil {
			s.abandon(a)
			return sending{}, err
		}
	}
	return s, nil
}

// prepareRetry calls PrepareRetry with attempt a's request. Should the hook
// panic, the attempt's timeout and context end here (call.held has its body).
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

// ownHeaderAndURL gives r, a copy of the caller's request, a header (never
// nil) and a URL of its own: PrepareRetry may change them, and a losing group
// member may still be in the base (net/http's write loop can outlive
// RoundTrip) when the caller changes its request. Userinfo, which has no
// setters, stays shared.
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

// send sends attempt a's request and leaves its outcome in a. (The caller
// sets c.sent: a group member is sent on a copy of the call.)
func (c *call) send(a *attempt, s *sending) {
	c.host.count(nAttempts)
	resp, err := c.t.base.RoundTrip(s.r)
	c.complete(a, s, resp, err)
}

// complete leaves in a the outcome of an attempt, giving the response what
// the caller may rely on: a body (ending the attempt's context when closed),
// the request it responds to (with the attempt's number), and a response or
// an error, never both or neither.
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
		// A retrying Transport beneath leaves its attempt number there.
		if m := mark.OfRequest(resp.Request); m != nil && m != a.mark && m.N > 1 {
			a.retriedBeneath = true
		}
		if s.member == nil { // (a group member's is set by hedgedRequest)
			resp.Request = c.responseRequest(a, s, resp.Request)
		}
	}
	// A response dropped as its body fails to buffer, or as the attempt
	// times out, keeps its header: a wait the server asks for holds.
	inMemory := false // the whole body is in memory: nothing to release later
	if err == nil && resp != nil && c.readBody && resp.StatusCode != http.StatusSwitchingProtocols {
		if inMemory, err = respbody.Buffer(s.r.Context(), resp, c.p.bufferResponse); err != nil {
			a.dropped, resp = resp.Header, nil
		}
	}
	fired := s.timer != nil && !s.timer.Stop() // the attempt timeout went off
	if fired && err == nil && resp != nil {
		// Its context is canceled, which cuts off the body: it timed out.
		a.dropped, err = resp.Header, errors.New("response headers arrived as the attempt timed out")
	}
	if err != nil && resp != nil { // (or a base breaking the RoundTripper contract)
		resp.Body.Close()
		resp = nil
	}
	if err == nil && resp == nil {
		err = errors.New("retryhttp: base transport returned neither response nor error")
	}
	if s.cancel != nil {
		err = c.endTimeout(a, s, resp, err, fired, inMemory)
	}
	a.resp, a.err = resp, err
	if c.tl != nil {
		// Judging it may wait (a slow Retryable, another outcome's): its
		// Duration ends here.
		a.back = c.t.clock.Now()
	}
}

// responseRequest returns the request a response of attempt a (not a group
// member's) carries: the caller's, as http.Transport returns it, with the key
// the Transport added and the attempt's number on the caller's context, not
// on the attempt's own, which its timeout cancels. got is the base's.
func (c *call) responseRequest(a *attempt, s *sending, got *http.Request) *http.Request {
	switch {
	case a.mark == nil:
		return cmp.Or(got, c.req)
	case s.r.Context() == s.marked && c.key.added == "":
		return s.r
	}
	return c.answeredRequest(s.marked)
}

// endTimeout ends an attempt's own context (made for its timeout) when its
// response body is closed or read, or now if there is no body to read. It
// returns the attempt's error, which its timeout makes retryable.
func (c *call) endTimeout(a *attempt, s *sending, resp *http.Response, err error, fired, inMemory bool) error {
	if err == nil && !inMemory {
		cancel := s.cancel
		respbody.Wrap(resp, &respbody.Release{Body: resp.Body, Fn: func() { cancel(nil) }})
		return nil
	}
	if err != nil && (fired || context.Cause(s.r.Context()) == ErrAttemptTimeout) && c.parent.Err() == nil {
		a.timedOut = true
		if errors.Is(err, context.Canceled) {
			err = nil // HTTP/2 reports the attempt's own context so: not the caller's doing
		}
		err = &attemptTimeoutError{timeout: c.p.attemptTimeout, err: err}
	}
	s.cancel(nil)
	return err
}

// endError returns the error a request ends with after attempt a failed,
// unless it ends with resp (a's response, kept in memory).
func (a *attempt) endError(resp *http.Response) error {
	switch {
	case resp != nil:
		return nil
	case a.err != nil:
		return a.err
	}
	return &statusError{StatusCode: a.resp.StatusCode}
}

// drain drains and closes the attempt's response, if any, for
// respbody.MinTime at most and not past ctx's deadline.
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
