package retryhttp

import (
	"github.com/retryhttp/retryhttp/internal/clock"

	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"
)

// Transport is an http.RoundTripper that retries failed requests safely.
// Its zero value is ready to use and retries with the defaults of Policy:
//
//	client := &http.Client{Transport: &retryhttp.Transport{}}
//
// The exported fields are read on first use and must not change after it.
// A Transport is safe for simultaneous use by multiple goroutines.
type Transport struct {
	// Base sends each attempt. Nil means one pooled transport from
	// go-cleanhttp, made on first use and kept for the Transport's life.
	//
	// Retries never multiply across layers. A Base that is itself a
	// Transport sends every attempt once: only the outer one retries. A
	// Transport reached inside an attempt some other way (an SDK's client
	// called with the caller's context) sends once from the outer's second
	// attempt on; inside the first it may retry, and the outer Transport
	// then returns that result as it is (ReasonNested).
	Base http.RoundTripper

	// Policy applies to every request; an entry of Hosts, and a policy
	// given to WithPolicy, refine it (see Policy for how they layer).
	Policy Policy

	// Hosts holds per-host policies, each layered over Policy: a field an
	// entry leaves zero takes Policy's value. Keys are "host", "host:port" or
	// "*.suffix" (any subdomain of suffix, not suffix itself; such a key
	// takes no port and matches every port). They are case-insensitive and
	// a trailing dot is ignored. The most specific
	// match wins: host:port, then host, then the longest suffix. A request
	// without a port matches "host:port" keys with its scheme's default port.
	Hosts map[string]Policy

	// TrackHosts, if positive, keeps Stats per host (URL host, port
	// included) for up to that many hosts, the first seen; HostStats
	// returns them. Zero keeps none, at no cost.
	TrackHosts int

	// Budget bounds the retries of all requests through this Transport; it
	// may be shared with other Transports. Nil means a budget of the
	// default size owned by this Transport; UnlimitedBudget() turns
	// budgeting off. (A nil *Budget used directly allows every retry.)
	Budget *Budget

	// OnRetry, if set, is called before each retry's wait, on the
	// request's goroutine (before a hedge, on the goroutine of the timer
	// that sends it). Should the caller's context end during the wait,
	// that retry is not sent and OnGiveUp reports ReasonCanceled or
	// ReasonDeadline.
	OnRetry func(*RetryEvent)

	// PrepareRetry, if set, is called before each retry is sent, with the
	// retry's request: a copy of the caller's that the hook may change (its
	// header and URL: refresh an expired token, sign again with a new
	// timestamp) but not its Body. The caller's request and the other
	// attempts are never affected. An error ends the request with an *Error
	// (ReasonPrepareRetry) that wraps it; the retry is not sent.
	PrepareRetry func(*RetryRequest) error

	// OnGiveUp, if set, is called when a request ends with a failure: an
	// error, or a retryable status that was not retried (with MaxAttempts 1,
	// reason ReasonNoRetries). It runs on the request's goroutine before
	// RoundTrip returns. A request inside another Transport's attempt passes
	// straight through and reports nothing: the outer Transport decides.
	OnGiveUp func(*GiveUpEvent)

	// Logger, if set, receives a debug record for each retry (not for a
	// hedge: OnRetry sees those), an info
	// record for each give-up, and a warning when retries wait for the
	// budget, or that throttling rejects requests, at most once every 10 s
	// each, with the Transport's counts. Records carry OpenTelemetry's
	// attribute names, and URLs without userinfo or query values. Nil logs
	// nothing.
	Logger *slog.Logger

	once           sync.Once
	base           http.RoundTripper
	policy         *policy
	hosts          hostTable
	budget         *Budget
	rand           func() float64 // uniform in [0, 1); tests set it before first use
	nested         bool           // Base is itself a *Transport: mark every attempt
	stats          counters
	hostStats      hostCounters
	recent         recentKeys            // the callers' idempotency keys sent lately
	throttles      hostMap[hostThrottle] // per-host counts for Policy.Throttle
	hedges         hostMap[hostHedge]    // per-host latencies for Policy.Hedge
	warnedBudget   atomic.Int64          // when the Logger last heard of the budget, on the monotonic scale
	warnedThrottle atomic.Int64          // when it last heard of throttling
}

// A RetryEvent describes a retry about to happen.
type RetryEvent struct {
	Request  *http.Request  // the caller's request
	Attempt  int            // the attempt that failed: 1 for the first
	Response *http.Response // its response, or nil; the body is not to be read
	Err      error          // its error, or nil
	Delay    time.Duration  // the wait before the next attempt
	Source   DelaySource    // what set Delay

	// Hedge is set when the attempt about to be sent is a hedge: a copy
	// sent while attempt Attempt has not answered yet, after Delay, with
	// Source DelayHedge.
	Hedge bool

	// BudgetWait is how long the retry waited in the budget's line, its
	// credit being spent, before it was let go; 0 when the credit paid for
	// it. Let go, the retry then waits Delay, so that the retries a
	// recovery lets go together reach the server spread out: it goes out
	// BudgetWait + Delay after the failed attempt.
	BudgetWait time.Duration
}

// A RetryRequest is a retry about to be sent, as PrepareRetry sees it.
type RetryRequest struct {
	Request *http.Request // the retry's own copy of the caller's request
	Attempt int           // its attempt number: 2 for the first retry
}

// A GiveUpEvent describes a request that ended with a failure.
type GiveUpEvent struct {
	Request  *http.Request  // the caller's request
	Attempts int            // attempts made
	Reason   Reason         // why no further attempt was made
	Response *http.Response // the response returned, or nil
	Err      error          // the error returned, or nil

	// BudgetWait is how long the request's retries waited for the budget,
	// in all. With ReasonBudget, the last wait ended without news of the
	// dependency before the request's backoff schedule ran out.
	BudgetWait time.Duration
}

// DelaySource says what set the wait before a retry.
type DelaySource uint8

// The sources of a wait.
const (
	DelayBackoff    DelaySource = iota // the policy's Backoff
	DelayRetryAfter                    // the response's Retry-After field
	DelayRateLimit                     // the response's RateLimit field (t parameter) or X-RateLimit-Reset
	DelayHedge                         // the hedge delay (Policy.Hedge)
)

func (s DelaySource) String() string {
	switch s {
	case DelayBackoff:
		return "backoff"
	case DelayRetryAfter:
		return "Retry-After"
	case DelayRateLimit:
		return "RateLimit"
	case DelayHedge:
		return "hedge"
	}
	return "DelaySource(" + strconv.Itoa(int(s)) + ")"
}

// New returns a Transport sending through base with policy p.
func New(base http.RoundTripper, p Policy) *Transport {
	return &Transport{Base: base, Policy: p}
}

// NewClient returns a copy of c (a new http.Client when c is nil) whose
// transport retries with policy p through c's transport. A nil c.Transport
// means a go-cleanhttp pooled transport, as for a Transport's nil Base (not
// http.DefaultTransport).
func NewClient(c *http.Client, p Policy) *http.Client {
	var cc http.Client
	if c != nil {
		cc = *c
	}
	cc.Transport = New(cc.Transport, p)
	return &cc
}

func (t *Transport) init() {
	t.once.Do(func() {
		t.base = t.Base
		if t.base == nil {
			t.base = cleanhttp.DefaultPooledTransport()
		}
		t.policy = t.Policy.compileAll()
		t.hosts = newHostTable(t.Hosts, t.Policy)
		t.budget = t.Budget
		if t.budget == nil {
			t.budget = new(Budget)
		}
		t.nested = isTransport(t.base)
		if t.rand == nil {
			t.rand = rand.Float64
		}
	})
}

// isTransport reports whether rt is a *Transport, or wraps one: a base
// that instruments another (as otelretry's does) says what it wraps with
// an Unwrap() http.RoundTripper method.
func isTransport(rt http.RoundTripper) bool {
	for range 16 { // a bound against a wrapper that wraps itself
		switch r := rt.(type) {
		case *Transport:
			return true
		case interface{ Unwrap() http.RoundTripper }:
			rt = r.Unwrap()
		default:
			return false
		}
	}
	return false
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method; http.Client.CloseIdleConnections reaches it.
func (t *Transport) CloseIdleConnections() {
	t.init()
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// policyFor returns the policy in force for req: the host's entry (layered
// over the default) or the default, with the context's override over it.
func (t *Transport) policyFor(req *http.Request) *policy {
	p := t.policy
	if req.URL != nil && !t.hosts.empty() {
		if hp := t.hosts.lookup(req.URL.Scheme, req.URL.Hostname(), req.URL.Port()); hp != nil {
			p = hp
		}
	}
	if o, ok := req.Context().Value(overrideKey{}).(*override); ok {
		p = o.apply(p)
	}
	return p
}

// RoundTrip sends req, retrying transient failures as its policy allows.
// It never modifies req, always closes req's body, and returns either a
// response or an error. A failure that was not retried (or no longer) comes
// back as the last attempt's response, or as an *Error. A request that
// could not be sent at all (its idempotency key could not be made, its body
// did not match its ContentLength) gets an error wrapping ErrIdempotencyKey
// or ErrBodyLength.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	var hc *counters
	if t.TrackHosts > 0 && req.URL != nil {
		hc = t.hostStats.get(lowerASCII(req.URL.Host), t.TrackHosts)
	}
	t.stats.n[nRequests].Add(1)
	hc.add(nRequests, 1)
	m, live := attemptOf(req.Context())
	if live {
		// Another Transport's attempt: it retries, this one sends once,
		// and its budget already counted the request.
		t.stats.n[nAttempts].Add(1)
		hc.add(nAttempts, 1)
		return t.base.RoundTrip(req)
	}
	p := t.policyFor(req)
	if m == nil && hc == nil && !t.nested && p.plain && (req.Body == nil || req.Body == http.NoBody) &&
		idempotent(req.Method) && outerAttempt(req.Header) == 0 {
		// The fast path: a request that needs nothing of the Transport
		// but retries goes out as it is; only a failure pays for a call.
		t.stats.n[nAttempts].Add(1)
		resp, err := t.base.RoundTrip(req)
		if err == nil && resp != nil && !p.needsLook(resp) {
			completeResponse(resp, req)
			t.budget.succeeded(clock.Real{}, 1)
			return resp, nil
		}
		c := call{t: t, p: p, req: req, parent: req.Context(), pre: true, preResp: resp, preErr: err}
		return c.do()
	}
	c := call{t: t, p: p, req: req, parent: req.Context(), stale: m != nil, hc: hc}
	return c.do()
}

// needsLook reports whether a response on the fast path may be worth
// another attempt, or is a failure to give up on, and so needs the whole
// look of call.run. (A 409 is judged as if the request carried a key: the
// call looks for one.)
func (p *policy) needsLook(resp *http.Response) bool {
	retry, serverNo := p.responseVerdict(resp, true)
	return retry || serverNo
}

// responseVerdict returns whether resp asks for another attempt, by its
// status and the server's own word, before Policy.Retryable has its say;
// serverNo reports that X-Should-Retry: false stopped a status that would
// have been retried. keyed says whether the request carries an idempotency
// key (a keyed request also retries 409).
func (p *policy) responseVerdict(resp *http.Response, keyed bool) (retry, serverNo bool) {
	code := resp.StatusCode
	retry = p.retryStatus(code, keyed) || (code == http.StatusForbidden && rateLimited(resp.Header))
	switch shouldRetry(resp.Header) {
	case verdictNo:
		return false, retry
	case verdictYes:
		return retry || code >= 400, false
	}
	return retry, false
}

// do runs the call, and releases what it holds should a hook panic. (A
// function of one return, so that its defer costs next to nothing.)
func (c *call) do() (*http.Response, error) {
	defer c.abandon()
	return c.run()
}

// call is the state of one logical request.
type call struct {
	t         *Transport
	hc        *counters // the host's counters, if Transport.TrackHosts
	p         *policy
	req       *http.Request // the caller's, never modified
	parent    context.Context
	header    http.Header   // the request's header with an added key, or nil
	keyed     bool          // the request carries an idempotency key, if keyKnown
	keyKnown  bool          // keyed was looked for
	key       string        // the caller's idempotency key, if looked for and found
	prior     int           // attempts the key had before this request (a retry from above)
	max       int           // attempts this request may make: MaxAttempts, less an outer layer's
	sent      int           // attempts made
	again     *http.Request // a bodiless retry's request, for the next retry to resend
	againMark *attemptMark  // its mark
	pre       bool          // the first attempt was made on the fast path: preResp, preErr
	preResp   *http.Response
	preErr    error
	throttle  *hostThrottle // the host's counts, if Policy.Throttle is on
	hedge     *hostHedge    // the host's hedging state, if the request is hedged
	trace     bool          // watch attempts for a connection (nothing sent?)
	stale     bool          // the context holds the mark of a finished attempt
	readBody  bool          // read each attempt's response body (BufferResponse)
	horizon   time.Time     // when the backoff schedule would have ended: the budget wait ends by then
	waited    time.Duration // waited for the budget, in all

	// What the call holds, for abandon: the response of the last attempt
	// not yet drained nor returned, the body made for the next attempt
	// not yet sent, whether the caller's body was handed to prepareBody,
	// and whether the call has returned.
	open     *http.Response
	spare    io.ReadCloser
	prepared bool
	done     bool
	body     replay
}

// attempt is one attempt's result and the means to release it.
type attempt struct {
	n            int
	mark         *attemptMark
	resp         *http.Response
	err          error
	timedOut     bool // the attempt's own timeout fired
	innerRetries bool // a retrying Transport under this one made several attempts
	serverNo     bool // the server said not to retry a response whose status would be
	prepErr      bool // PrepareRetry failed: the attempt was not sent
	judged       bool // retry and f hold the verdict (a race judged it)
	retry        bool
	f            failure
	conn         *atomic.Uint32 // connAsked, connGot and connWrote bits; nil when not traced
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

func (c *call) run() (*http.Response, error) {
	req, p := c.req, c.p
	if p.keys != nil || !idempotent(req.Method) {
		// Else the key matters only to a 409, and is looked for then.
		c.keyed, c.keyKnown = hasKey(req.Header, p.keys), true
	}
	if !c.keyed && p.keys != nil && p.keys.applies(req.Method) {
		key, err := p.keys.newKey()
		if err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			c.done = true
			return nil, err
		}
		c.header = req.Header.Clone()
		if c.header == nil {
			c.header = make(http.Header, 1)
		}
		p.keys.setKey(c.header, key)
		c.keyed = true
	} else if c.keyed {
		c.key = callerKey(req.Header, p.keys)
	}
	c.max = p.maxAttempts
	c.outer(req)
	if p.throttle != nil && req.URL != nil {
		c.throttle = c.t.throttles.get(lowerASCII(req.URL.Host))
		if c.throttle.rejects(p.throttle, clock.MonoNow(), c.t.rand()) {
			c.count(nThrottled)
			c.warnThrottle(time.Now())
			if req.Body != nil {
				req.Body.Close()
			}
			c.done = true
			return c.giveUp(&attempt{}, ReasonThrottled, nil, ErrThrottled)
		}
	}
	body, err := prepareBody(req, p.maxBuffered)
	c.prepared = true // the caller's body is prepareBody's now
	if err != nil {
		c.done = true
		return nil, err
	}
	c.body = body
	// Only a retry needs to know whether an attempt reached a connection.
	c.trace = c.max > 1 && ((!idempotent(req.Method) && !c.keyed) || body.kind == bodyStream)
	if p.hedge != nil && c.max > 1 && (idempotent(req.Method) || c.keyed) && body.kind != bodyStream && req.URL != nil {
		c.hedge = c.t.hedges.get(lowerASCII(req.URL.Host))
	}
	c.readBody = p.bufferResponse > 0 && c.max > 1 &&
		(idempotent(req.Method) || c.keyed) && body.kind != bodyStream

	a := attempt{n: 1}
	var prev time.Duration // the previous wait
	reqBody, getBody, _ := c.body.next(req, 1)
	for {
		switch {
		case c.pre: // the fast path's attempt, made already
			c.pre = false
			c.sent = 1
			c.adopt(&a, c.preResp, c.preErr)
			c.preResp, c.preErr = nil, nil
		case a.n == 1 && c.hedge != nil:
			c.race(&a, reqBody, getBody)
		default:
			c.send(&a, reqBody, getBody)
		}
		resp, err := a.resp, a.err
		c.open, c.spare = resp, nil
		if a.prepErr { // the retry was not sent
			a.n--
			c.sent = a.n
			c.uncount(nAttempts)
			c.uncount(nRetries)
			return c.giveUp(&a, ReasonPrepareRetry, nil, err)
		}

		if c.parent.Err() != nil { // the caller's cancellation or deadline
			if resp != nil {
				return c.finish(resp, nil)
			}
			return c.giveUp(&a, ctxReason(c.parent), nil, err)
		}

		retry, f := c.verdict(&a)
		if c.throttle != nil {
			accepted := err == nil && !a.serverNo && !p.retryStatus(resp.StatusCode, c.isKeyed(resp.StatusCode))
			c.throttle.record(p.throttle, clock.MonoNow(), accepted)
		}
		if !retry {
			if err != nil {
				return c.giveUp(&a, ReasonNotTransient, nil, err)
			}
			if a.serverNo {
				return c.giveUp(&a, ReasonServer, resp, nil)
			}
			if p.retryStatus(resp.StatusCode, c.isKeyed(resp.StatusCode)) {
				return c.giveUp(&a, ReasonNotTransient, resp, nil)
			}
			c.t.budget.succeeded(clock.Real{}, a.n)
			return c.finish(resp, nil)
		}
		now := time.Now()
		c.t.budget.failure(now)
		// A base that never reported GetConn tells nothing: no proof.
		nothingSent := err != nil && (f.nothingSent || a.nothingWritten())
		var reason Reason
		switch {
		case !idempotent(req.Method) && !c.keyed && !nothingSent:
			reason = ReasonNotIdempotent
		case a.n >= c.max:
			reason = c.exhausted()
		case !c.body.canReplay(nothingSent):
			reason = ReasonBody
		case c.innerRetried(&a):
			reason = ReasonNested
		case c.throttle != nil && c.throttle.rejects(p.throttle, clock.Mono(now), c.t.rand()):
			c.count(nThrottled)
			c.warnThrottle(now)
			reason = ReasonThrottled
		}
		if reason != 0 {
			return c.giveUp(&a, reason, resp, err)
		}

		delay, asked, source := c.delay(&a, prev, now)
		if asked > p.maxRetryAfter {
			return c.giveUp(&a, ReasonRetryAfter, resp, err)
		}
		if dl, ok := c.parent.Deadline(); ok && !now.Add(delay).Before(dl) {
			return c.giveUp(&a, ReasonDeadline, resp, err)
		}
		nextBody, nextGet, berr := c.body.next(req, a.n+1)
		c.spare = nextBody
		if berr != nil {
			return c.giveUp(&a, ReasonBody, resp, errors.Join(err, berr))
		}
		credit := c.t.budget.retry(now)
		var waited time.Duration // in the budget's line
		if !credit {
			ok, out, outErr := c.awaitBudget(&a, now, delay, prev, nextBody)
			if !ok {
				return out, outErr
			}
			// Let go, the retry still waits its backoff, from now: the
			// retries a recovery releases together reach the dependency
			// spread out, as their first attempts' retries would have.
			waited = time.Since(now)
			now = now.Add(waited)
		}
		c.retryHooks(&a, delay, source, waited)
		if resp != nil {
			// The drain counts toward the wait: the next attempt starts at
			// now+delay, or when a drain longer than the delay ends.
			drainClose(resp, drainTime(delay))
			c.open = nil
		}
		if !waitUntil(c.parent, now.Add(delay)) {
			if credit {
				c.t.budget.refund() // granted, but never sent
			}
			if nextBody != nil {
				nextBody.Close()
				c.spare = nil
			}
			if err == nil {
				err = &StatusError{StatusCode: resp.StatusCode}
			}
			return c.giveUp(&a, ctxReason(c.parent), nil, err)
		}
		prev = delay
		a = attempt{n: a.n + 1}
		reqBody, getBody = nextBody, nextGet
		c.count(nRetries)
	}
}

// awaitBudget waits in the budget's line for leave to retry after attempt
// a failed, its credit being spent: until the budget lets the retry go, or
// the caller's context ends, or the backoff schedule of the whole request
// (at least this retry's own delay) would have run out. Meanwhile the failed
// response's body is kept in memory (up to drainLimit) and its connection
// freed. If the retry may not go, the call has ended with out and outErr:
// the failed response, or an *Error.
func (c *call) awaitBudget(a *attempt, now time.Time, delay, prev time.Duration, next io.ReadCloser) (ok bool, out *http.Response, outErr error) {
	c.count(nBudgetWaits)
	c.warnBudget(now)
	if c.horizon.IsZero() {
		c.horizon = now.Add(c.schedule(a.n, prev))
	}
	resp, err := a.resp, a.err
	if resp != nil && !keepClose(resp, drainTime(delay)) {
		resp, err = nil, &StatusError{StatusCode: resp.StatusCode} // its body is lost
		c.open = nil
	}
	ok = c.t.budget.wait(clock.Real{}, c.parent, maxTime(c.horizon, now.Add(delay)))
	c.waited += time.Since(now)
	if ok {
		return true, nil, nil
	}
	if next != nil {
		next.Close() // a stream body counts this as the unused attempt's close
		c.spare = nil
	}
	if c.parent.Err() != nil {
		if err == nil {
			err = &StatusError{StatusCode: resp.StatusCode}
		}
		c.open = nil
		out, outErr = c.giveUp(a, ctxReason(c.parent), nil, err)
		return false, out, outErr
	}
	c.count(nBudgetDenied)
	out, outErr = c.giveUp(a, ReasonBudget, resp, err)
	return false, out, outErr
}

// warnBudget tells the Logger, at most once per warnEvery, that retries
// wait for the budget, with the Transport's counts of waits and denials.
func (c *call) warnBudget(now time.Time) {
	c.warnOnce(&c.t.warnedBudget, now, "retryhttp: retry budget spent; retries wait for the dependency to answer",
		slog.Uint64("retryhttp.budget_waits", c.t.stats.n[nBudgetWaits].Load()),
		slog.Uint64("retryhttp.budget_denied", c.t.stats.n[nBudgetDenied].Load()))
}

// warnThrottle tells the Logger, at most once per warnEvery, that adaptive
// throttling rejects requests in the client.
func (c *call) warnThrottle(now time.Time) {
	c.warnOnce(&c.t.warnedThrottle, now, "retryhttp: the host rejects most requests; throttling them in the client",
		slog.Uint64("retryhttp.throttled", c.t.stats.n[nThrottled].Load()))
}

// adopt takes the outcome of a first attempt sent as the caller's own
// request (the fast path) into a, as sendWith would have.
func (c *call) adopt(a *attempt, resp *http.Response, err error) {
	if resp != nil {
		if m := markOf(resp.Request); m != nil && m.n.Load() > 1 {
			a.innerRetries = true
		}
		completeResponse(resp, c.req)
	}
	if err != nil && resp != nil { // a base breaking the RoundTripper contract
		resp.Body.Close()
		resp = nil
	}
	if err == nil && resp == nil {
		err = errors.New("retryhttp: base transport returned neither response nor error")
	}
	a.resp, a.err = resp, err
}

// completeResponse gives a response from the base what the caller may rely
// on, as http.Transport's have them: a body (http.Client tolerates a nil
// one; so do we) and the request it answers.
func completeResponse(resp *http.Response, req *http.Request) {
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	if resp.Request == nil {
		resp.Request = req
	}
}

// send makes attempt a with the given body.
func (c *call) send(a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error)) {
	c.count(nAttempts)
	c.sent = a.n
	c.sendWith(nil, a, body, getBody)
}

// sendWith makes attempt a with the given body under the caller's context
// or, in a race of hedged attempts (ra not nil), under the attempt's own.
func (c *call) sendWith(ra *raceAttempt, a *attempt, body io.ReadCloser, getBody func() (io.ReadCloser, error)) {
	p := c.p
	r := c.req
	var cancel context.CancelCauseFunc
	var timer *time.Timer
	// The first attempt goes out as the caller's request when nothing needs
	// changing: no allocation on the success path. Later attempts carry the
	// attempt mark, so a retrying Transport reached inside them sends once;
	// one reached inside an unmarked first attempt may retry, and this
	// Transport then returns its result as is (ReasonNested). A Base that is
	// itself a Transport gets the mark on every attempt.
	var marked context.Context // the parent with this attempt's mark
	// A bodiless retry with nothing of its own (no trace, timeout, header
	// of the Transport's or hook) resends the previous retry's request,
	// unchanged, with its mark renumbered: one request copy per call, not
	// one per retry. (Bases only read a request, as RoundTripper requires.)
	reusable := a.n > 1 && ra == nil && !c.trace && c.header == nil && p.attemptTimeout == 0 &&
		c.body.kind == bodyNone && c.t.PrepareRetry == nil
	if reusable && c.again != nil {
		r, a.mark = c.again, c.againMark
		a.mark.n.Store(int32(a.n))
		a.mark.done.Store(false)
		marked = r.Context()
	} else if a.n > 1 || c.t.nested || c.stale || c.header != nil || c.trace || p.attemptTimeout > 0 ||
		c.body.needsCopy(a.n) || ra != nil {
		if ra != nil {
			marked, a.mark = &ra.ctx, &ra.ctx.mark
		} else {
			marked, a.mark = withMark(c.parent, a.n)
		}
		ctx := marked
		if c.trace || c.header != nil {
			// Watched: whether the attempt wrote anything (c.trace), and
			// the resends net/http makes by itself within it (of requests
			// it resends: keyed ones, whose key the Transport added).
			conn := new(atomic.Uint32)
			a.conn = conn
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
				GetConn:      func(string) { conn.Add(connAsk) },
				GotConn:      func(httptrace.GotConnInfo) { conn.Or(connGot) },
				WroteHeaders: func() { conn.Or(connWrote) },
			})
		}
		if p.attemptTimeout > 0 {
			ctx, cancel = context.WithCancelCause(ctx)
			timer = time.AfterFunc(p.attemptTimeout, func() { cancel(ErrAttemptTimeout) })
		}
		r = c.req.WithContext(ctx)
		if c.header != nil {
			r.Header = c.header
		}
		r.Body, r.GetBody = body, getBody
		if reusable {
			c.again, c.againMark = r, a.mark
		}
		if a.n > 1 && c.t.PrepareRetry != nil {
			r.Header = r.Header.Clone() // the hook's to change, this attempt's alone
			if err := c.t.PrepareRetry(&RetryRequest{Request: r, Attempt: a.n}); err != nil {
				if body != nil {
					body.Close()
				}
				if cancel != nil {
					timer.Stop()
					cancel(nil)
				}
				a.mark.done.Store(true)
				a.err, a.prepErr = err, true
				return
			}
		}
	}
	resp, err := c.t.base.RoundTrip(r)
	if a.conn != nil {
		if asks := a.conn.Load() >> connAskShift; asks > 1 {
			c.countN(nResends, uint64(asks-1))
		}
	}
	if a.mark != nil {
		a.mark.done.Store(true)
	}
	if resp != nil {
		if resp.Body == nil { // http.Client tolerates it; so do we
			resp.Body = http.NoBody
		}
		// Whether a Transport under this one retried: its mark is on the
		// request it answered.
		if m := markOf(resp.Request); m != nil && m != a.mark && m.n.Load() > 1 {
			a.innerRetries = true
		}
		// The response's request is the caller's, as http.Transport returns
		// it, with this attempt's mark (for Attempts) over the caller's
		// context: not the attempt's own, which an attempt timeout cancels
		// and a trace watches.
		switch {
		case a.mark == nil:
			if resp.Request == nil {
				resp.Request = c.req
			}
		case ra == nil && r.Context() == marked:
			resp.Request = r
		case ra == nil:
			resp.Request = c.req.WithContext(marked)
		case a.n == 1 && !c.stale:
			// Not the race's own context, which ends with the body: the
			// caller's request, whose Attempts is 1, as the mark's. (A
			// context holding an earlier request's mark gets this one's.)
			resp.Request = c.req
		default:
			resp.Request = c.req.WithContext(withSameMark(c.parent, a.mark))
		}
	}
	inMemory := false // the whole body is in memory: nothing to release later
	if err == nil && resp != nil && c.readBody && resp.StatusCode != http.StatusSwitchingProtocols {
		inMemory, err = bufferBody(resp, p.bufferResponse)
		if err != nil {
			resp = nil
		}
	}
	fired := timer != nil && !timer.Stop() // the attempt timeout went off
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
	if cancel != nil {
		if err != nil {
			if (fired || context.Cause(r.Context()) == ErrAttemptTimeout) && c.parent.Err() == nil {
				a.timedOut = true
				if errors.Is(err, context.Canceled) {
					// Some transports (HTTP/2) report the attempt's
					// context as canceled: that is not the caller's doing.
					err = nil
				}
				err = &attemptTimeoutError{timeout: p.attemptTimeout, err: err}
			}
			cancel(nil)
		} else if inMemory {
			cancel(nil)
		} else {
			rb := &releaseBody{rc: resp.Body, release: func() { cancel(nil) }}
			if w, ok := resp.Body.(io.Writer); ok && resp.StatusCode == http.StatusSwitchingProtocols {
				resp.Body = &releaseRWBody{releaseBody: rb, w: w} // keep the upgraded connection writable
			} else {
				resp.Body = rb
			}
		}
	}
	a.resp, a.err = resp, err
}

// verdict decides whether the attempt's outcome is worth another attempt.
func (c *call) verdict(a *attempt) (bool, failure) {
	if a.judged {
		return a.retry, a.f
	}
	var f failure
	var retry bool
	if a.err != nil {
		f = classifyErr(a.err)
		if a.timedOut {
			f = failure{transient: true}
		}
		retry = f.transient
	} else {
		retry, a.serverNo = c.p.responseVerdict(a.resp, c.isKeyed(a.resp.StatusCode))
	}
	if c.p.retryable != nil {
		retry = c.p.retryable(&Attempt{Request: c.req, Number: a.n, Response: a.resp, Err: a.err, Retry: retry})
	}
	return retry, f
}

// isKeyed reports whether the request carries an idempotency key, when that
// matters to a response of status code: only a 409 needs it looked for in a
// request that is idempotent without it.
func (c *call) isKeyed(code int) bool {
	if !c.keyKnown && code == http.StatusConflict {
		c.keyed, c.keyKnown = hasKey(c.req.Header, c.p.keys), true
	}
	return c.keyed
}

// innerRetried reports whether the attempt's outcome comes from another
// retrying Transport under this one that already made several attempts.
func (c *call) innerRetried(a *attempt) bool {
	if a.resp != nil {
		return a.innerRetries
	}
	var e *Error
	return errors.As(a.err, &e) && e.Attempts > 1
}

// delay returns the wait before the next attempt, the wait the server asked
// for (0 if none), and what set the wait. A server's wait replaces the
// backoff, as gRPC's server pushback does, plus a jitter of at most 10 % or
// 1 s so that clients told the same instant do not return in lockstep.
func (c *call) delay(a *attempt, prev time.Duration, now time.Time) (delay, asked time.Duration, source DelaySource) {
	if a.resp != nil {
		if d, source, ok := serverWait(a.resp.Header, now); ok && d > 0 {
			if d > c.p.maxRetryAfter && c.p.capRetryAfter {
				d = c.p.maxRetryAfter // urllib3's way: wait the most we would
			}
			jitter := scale(min(d/10, time.Second), c.t.rand())
			return d + min(jitter, math.MaxInt64-d), d, source
		}
	}
	return max(c.p.backoff.Delay(a.n-1, prev, c.t.rand()), 0), 0, DelayBackoff
}

func (c *call) retryHooks(a *attempt, delay time.Duration, source DelaySource, waited time.Duration) {
	if c.t.OnRetry != nil {
		c.t.OnRetry(&RetryEvent{Request: c.req, Attempt: a.n, Response: a.resp, Err: a.err,
			Delay: delay, Source: source, BudgetWait: waited})
	}
	c.logRetry(a, delay, source, waited)
}

// giveUp ends the call with a failure: the response when there is one,
// else an *Error.
func (c *call) giveUp(a *attempt, reason Reason, resp *http.Response, err error) (*http.Response, error) {
	c.countGiveUp(reason)
	noteGiveUp(c.parent, reason, a.n)
	var out error
	if resp == nil {
		e := &Error{Attempts: a.n, Reason: reason, Err: err}
		if reason == ReasonDeadline || reason == ReasonCanceled {
			e.ctxErr = c.parent.Err()
			if e.ctxErr == nil {
				e.ctxErr = context.DeadlineExceeded
			}
		}
		out = e
	}
	if c.t.OnGiveUp != nil {
		c.t.OnGiveUp(&GiveUpEvent{Request: c.req, Attempts: a.n, Reason: reason, Response: resp, Err: out, BudgetWait: c.waited})
	}
	c.logGiveUp(a.n, reason, resp, out)
	return c.finish(resp, out)
}

func (c *call) finish(resp *http.Response, err error) (*http.Response, error) {
	c.body.finish()
	c.done = true
	if c.key != "" && c.sent > 0 {
		c.t.recent.add(c.key, c.prior, c.sent, time.Now())
	}
	return resp, err
}

// exhausted returns why a request that made all the attempts it may make
// stops: MaxAttempts reached, retries off for it, or an outer layer's
// retries having had its share.
func (c *call) exhausted() Reason {
	switch {
	case c.max < c.p.maxAttempts:
		return ReasonOuter
	case c.max == 1:
		return ReasonNoRetries
	}
	return ReasonExhausted
}

// outer finds whether req is a retry made by a layer above (see outer.go)
// and, if so, leaves it the attempts it has left.
func (c *call) outer(req *http.Request) {
	if n := outerAttempt(req.Header); n > 1 {
		c.count(nOuterRetries)
		c.max = 1 // the SDK above does the retrying
		return
	}
	if c.key == "" {
		return
	}
	if c.prior = c.t.recent.prior(c.key, time.Now()); c.prior > 0 {
		c.count(nOuterRetries)
		c.max = max(c.p.maxAttempts-c.prior, 1)
	}
}

// abandon releases what the call holds when it did not return: a hook
// (Retryable, a Backoff, OnRetry, OnGiveUp, a key generator, the Logger)
// panicked. The response and bodies are closed, and the panic goes on.
func (c *call) abandon() {
	if c.done {
		return
	}
	if c.open != nil {
		c.open.Body.Close()
	}
	if c.spare != nil {
		c.spare.Close()
	}
	if !c.prepared {
		if c.req.Body != nil {
			c.req.Body.Close()
		}
		return
	}
	c.body.finish()
}

func ctxReason(ctx context.Context) Reason {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ReasonDeadline
	}
	return ReasonCanceled
}

// schedule returns how long the backoff schedule of a request would still
// take after its attempt n failed, prev being the wait before attempt n:
// the longest wait the policy's Backoff gives before each retry left.
func (c *call) schedule(n int, prev time.Duration) time.Duration {
	const top = 0x1p0 - 0x1p-53 // the largest uniform sample below 1
	var total time.Duration
	for k := n - 1; k < c.max-1; k++ {
		d := max(c.p.backoff.Delay(k, prev, top), 0)
		total = min(total+d, math.MaxInt64/2)
		prev = d
	}
	return total
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// waitUntil sleeps until t, or until ctx is done; it reports whether t
// came first.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// attemptTimeoutError is the error of an attempt stopped by AttemptTimeout.
type attemptTimeoutError struct {
	timeout time.Duration
	err     error
}

func (e *attemptTimeoutError) Error() string {
	s := "retryhttp: attempt timeout (" + e.timeout.String() + ")"
	if e.err != nil && e.err != ErrAttemptTimeout {
		s += ": " + e.err.Error()
	}
	return s
}

func (e *attemptTimeoutError) Unwrap() []error {
	if e.err == nil || e.err == ErrAttemptTimeout {
		return []error{ErrAttemptTimeout}
	}
	return []error{ErrAttemptTimeout, e.err}
}

// Timeout reports true, like the other timeouts of net/http.
func (e *attemptTimeoutError) Timeout() bool { return true }

// releaseBody calls release once, when the body is closed or read to its end.
type releaseBody struct {
	rc      io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err == io.EOF {
		b.once.Do(b.release)
	}
	return n, err
}

// abort cancels the attempt's context, which ends a read in progress.
func (b *releaseBody) abort() { b.once.Do(b.release) }

func (b *releaseBody) Close() error {
	err := b.rc.Close()
	b.once.Do(b.release)
	return err
}

// releaseRWBody is a releaseBody over the read-write body of a 101
// Switching Protocols response.
type releaseRWBody struct {
	*releaseBody
	w io.Writer
}

func (b *releaseRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }
