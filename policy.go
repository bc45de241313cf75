package retryhttp

import (
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/hostgate"
)

// Defaults of a zero Policy.
const (
	defaultMaxAttempts     = 4
	defaultMaxRetryAfter   = 30 * time.Second
	defaultMaxBufferedBody = 64 << 10
)

// DefaultStatuses are the response status codes retried when Policy.Statuses
// is nil: 408 Request Timeout, 429 Too Many Requests, 500 Internal Server
// Error, 502 Bad Gateway, 503 Service Unavailable and 504 Gateway Timeout.
// The function returns a new slice on each call.
func DefaultStatuses() []int { return []int{408, 429, 500, 502, 503, 504} }

// A Policy says which outcomes are retried, how often and how long to wait.
// The zero Policy is the default: up to 4 attempts, full jitter from 100 ms
// to 10 s, the DefaultStatuses and transient network errors, Retry-After
// honoured up to 30 s, no attempt timeout, bodies buffered up to 64 KiB,
// response bodies left to the caller, no idempotency keys.
//
// Policies are layered: a Transport.Hosts entry lies over Transport.Policy,
// and a policy given to WithPolicy over the one that would apply without it.
// A field left at its zero value takes the value of the policy beneath, so a
// host entry that sets only AttemptTimeout keeps the Transport's MaxAttempts
// and Backoff. Each field has a value that switches it off, whatever lies
// beneath:
//
//	field            default (nothing beneath sets it)   off
//	MaxAttempts      4                                   1 (no retries)
//	Backoff          FullJitter, 100 ms to 10 s          Constant(0) (no wait)
//	Statuses         DefaultStatuses()                   []int{} (errors only)
//	Retryable        the default verdict                 -
//	AttemptTimeout   none                                negative
//	MaxRetryAfter    30 s                                -
//	HostWait         off                                 negative
//	MaxBufferedBody  64 KiB                              negative (never buffer)
//	BufferResponse   off                                 negative
//	IdempotencyKeys  off                                 &IdempotencyKeys{Off: true}
//	Idempotent       false                               - (a layer cannot undo it)
//	Throttle         off                                 &Throttle{Off: true}
//	Hedge            off                                 &Hedge{Off: true}
//	ResumeResponse   off                                 - (a layer cannot undo it)
//	Timeline         off                                 - (a layer cannot undo it)
//
// Transport.Explain returns, as text, the policy a request or host gets, each setting
// with the layer it comes from.
//
// A Policy is a value: a Transport converts it once, on first use, and each
// request keeps the converted policy it started with.
type Policy struct {
	// MaxAttempts bounds the attempts of one request, the first included.
	// Zero means the policy beneath, else 4; 1 (or less)
	// means no retries.
	MaxAttempts int

	// Backoff computes the wait before each retry. Nil means the policy
	// beneath, else FullJitter from 100 ms to 10 s.
	Backoff Backoff

	// Statuses lists the response status codes worth another attempt.
	// Nil means the policy beneath, else DefaultStatuses, and then a
	// request carrying an idempotency key also retries 409 Conflict (the
	// original request is still being processed). A list set is the whole
	// list: an empty non-nil slice retries no status. Codes outside 0..639
	// are ignored.
	Statuses []int

	// Retryable, if set, sees the outcome of every attempt that comes back
	// while its request waits for it, successes included, on the
	// request's goroutine: of a hedged request, each attempt's in the order
	// they come back, until one it does not retry wins (attempts canceled
	// by that win, or by the caller's context, are not shown; while it
	// peeks into a slow body, the request waits, a hedged one too). It decides
	// whether the outcome is worth another attempt, overriding
	// the default verdict given in Attempt.Retry (return a.Retry to keep
	// it). Nil means the policy beneath, else the default verdict. It can,
	// for example, retry a 200 whose header says the work was not done, or
	// refuse to retry a 500 from one endpoint. It does not make a
	// non-idempotent request safe to send again: that still needs an
	// idempotency key or proof that nothing was sent. It may look into the response body with
	// Attempt.Peek (an API's error code in JSON), but must not read or
	// close the body itself.
	Retryable func(*Attempt) bool

	// AttemptTimeout bounds one attempt from its start until its response
	// headers arrive; it never extends the caller's deadline. After the
	// headers arrive, the body is governed by the caller's context alone.
	// An attempt that times out is retried. Zero means the policy beneath,
	// else none; negative means none.
	AttemptTimeout time.Duration

	// MaxRetryAfter is the longest Retry-After (or RateLimit reset) a
	// server may ask for: a longer request is not waited, and the response
	// goes back to the caller at once. Zero (or negative) means the policy
	// beneath, else 30 s. A Retry-After of 0, or a date not in the future,
	// asks for no wait: the retry waits the Backoff, as it would without
	// Retry-After, so that clients told "now" together do not come back
	// together.
	MaxRetryAfter time.Duration

	// HostWait, when positive, makes a host's own word hold its new
	// requests: once a response asks for a wait (a 429 or 503 with
	// Retry-After or RateLimit, or any response whose RateLimit, or
	// X-RateLimit-Remaining: 0 with a reset, says none are left), a new
	// request's first attempt to that host goes no sooner than the wait
	// ends. When it ends, the requests held go one at a time, spaced by
	// the wait divided by the requests the host served before it asked
	// (so about as fast as it served them), each new one after those held.
	// A request whose turn would come past its deadline, or more than
	// HostWait from now, ends at once, sent to no one (ReasonDeadline, or
	// ReasonRetryAfter). Turn it on for APIs that limit a client's rate
	// and ask it to keep away while limited (GitHub, for one). Zero means
	// the policy beneath, else off; negative means off.
	HostWait time.Duration

	// MaxBufferedBody bounds how much of a request body without GetBody is
	// buffered so it can be sent again. A larger body, or one of unknown
	// length, is streamed once and retried only when none of it was read.
	// Zero means the policy beneath, else 64 KiB; negative
	// means never buffer.
	MaxBufferedBody int64

	// BufferResponse, when positive, makes each attempt of a request that
	// may be sent again (an idempotent method, or one carrying an
	// idempotency key, with a body that can be re-created) read its
	// response body into memory, up to BufferResponse bytes, before the
	// attempt is over. A body cut off (shorter than its Content-Length, a
	// broken chunked stream, a reset) then fails the attempt and is retried
	// like any transient failure, after the wait its header asked for, if
	// any: the caller gets a complete body or an error, never a truncated
	// body. AttemptTimeout, if set, covers reading
	// the body too, so a stalled body is retried as well. A body longer
	// than BufferResponse is returned as it streams, its first bytes from
	// memory. Zero means the policy beneath, else off; negative means off.
	BufferResponse int64

	// IdempotencyKeys, if set, makes the Transport add an idempotency key
	// to non-idempotent requests that have none, so they can be retried.
	// Nil means the policy beneath, else off; Off switches it off. No key
	// is added where no retry can follow (MaxAttempts 1).
	// Turn it on only for servers that honour the key: one that ignores it
	// applies a retried POST twice.
	IdempotencyKeys *IdempotencyKeys

	// Idempotent declares the requests this policy applies to idempotent,
	// whatever their method: a POST or PATCH that the server applies at
	// most once by design (a search, a query) is then retried like a GET,
	// without a key. Set it for one request with WithPolicy, or for a host
	// with Transport.Hosts. A request can declare itself as net/http lets
	// it too, with an Idempotency-Key or X-Idempotency-Key field whose
	// value is nil (not sent). False means the policy beneath: a layer
	// cannot undo a declaration made beneath it.
	Idempotent bool

	// Throttle, if set, turns on adaptive throttling for each host: when a
	// host rejects most of what it is sent, the client rejects part of the
	// attempts itself (ReasonThrottled), first attempts and retries alike. See
	// Throttle. Nil means the policy beneath, else off; Off switches it
	// off.
	Throttle *Throttle

	// Hedge, if set, hedges requests that may be sent twice: a copy goes
	// when the first attempt has not answered after a delay that adapts to
	// the host's latency (see Hedge). Nil means the policy beneath, else
	// off; Off switches it off.
	Hedge *Hedge

	// ResumeResponse makes the body of a 200 to a GET or QUERY that breaks
	// mid-way continue inside the body the caller reads: a retry asks for
	// the rest (Range: bytes=N-, If-Range), and its 206 carries on. The
	// response must allow it: Accept-Ranges: bytes, no content coding, a
	// strong ETag (or, without one, a Last-Modified a second or more
	// before its Date). Each resume is a retry, counted and waited for as
	// any; an answer that is not the rest of the same body ends the read
	// with an error, never with bytes missing, repeated or mixed. False
	// means the policy beneath: a layer cannot undo it.
	ResumeResponse bool

	// Timeline records each attempt of a request (when it went, how long
	// it took, what came back, the wait before it and what set it), for
	// the Timeline function to return from the request's response or
	// error. False means the policy beneath: a layer cannot undo it. Off,
	// it costs nothing.
	Timeline bool
}

// policy is a Policy converted for use: defaults resolved, statuses as a set.
type policy struct {
	hostKey        string  // the key of Transport.Hosts it was made from, if any: for Explain
	src            Policy  // what it was made from, for layering another over it
	oneAttempt     *policy // the same with MaxAttempts 1, for WithPolicy(ctx, Policy{MaxAttempts: 1}); nil when not made
	maxAttempts    int
	backoff        Backoff
	statuses       statusSet
	keyedConflict  bool // Statuses left to the defaults: a keyed request also retries 409
	retryable      func(*Attempt) bool
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	hostWait       time.Duration // 0: off
	maxBuffered    int64
	bufferResponse int64           // 0: off
	hedge          *hostgate.Hedge // nil: off
	keys           *keyPolicy      // nil: off
	keyHeader      string          // keys.header, or "": the name a caller's key may have besides the usual two
	idempotent     bool            // Policy.Idempotent
	timeline       bool            // Policy.Timeline
	resume         bool            // Policy.ResumeResponse
	gates          hostgate.Set    // the gates on
}

// over returns p layered over under: each zero field of p takes under's value.
func (p Policy) over(under Policy) Policy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = under.MaxAttempts
	}
	if p.Backoff == nil {
		p.Backoff = under.Backoff
	}
	if p.Statuses == nil {
		p.Statuses = under.Statuses
	}
	if p.Retryable == nil {
		p.Retryable = under.Retryable
	}
	if p.AttemptTimeout == 0 {
		p.AttemptTimeout = under.AttemptTimeout
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = under.MaxRetryAfter
	}
	if p.HostWait == 0 {
		p.HostWait = under.HostWait
	}
	if p.MaxBufferedBody == 0 {
		p.MaxBufferedBody = under.MaxBufferedBody
	}
	if p.BufferResponse == 0 {
		p.BufferResponse = under.BufferResponse
	}
	if p.IdempotencyKeys == nil {
		p.IdempotencyKeys = under.IdempotencyKeys
	}
	p.Idempotent = p.Idempotent || under.Idempotent
	p.ResumeResponse = p.ResumeResponse || under.ResumeResponse
	p.Timeline = p.Timeline || under.Timeline
	if p.Throttle == nil {
		p.Throttle = under.Throttle
	}
	if p.Hedge == nil {
		p.Hedge = under.Hedge
	}
	return p
}

func (p *Policy) compile() *policy {
	c := &policy{
		src:            *p,
		maxAttempts:    p.MaxAttempts,
		backoff:        p.Backoff,
		retryable:      p.Retryable,
		attemptTimeout: max(p.AttemptTimeout, 0),
		maxRetryAfter:  p.MaxRetryAfter,
		hostWait:       max(p.HostWait, 0),
		maxBuffered:    p.MaxBufferedBody,
		bufferResponse: max(p.BufferResponse, 0),
		keys:           p.IdempotencyKeys.compile(),
		hedge:          p.Hedge.compile(),
		idempotent:     p.Idempotent,
		timeline:       p.Timeline,
		resume:         p.ResumeResponse,
	}
	hostgate.Add(&c.gates, p.Throttle.compile())
	hostgate.Add(&c.gates, c.hedge) // the hedge fraction
	if c.keys != nil {
		c.keyHeader = c.keys.header
	}
	if c.maxAttempts == 0 {
		c.maxAttempts = defaultMaxAttempts
	}
	c.maxAttempts = max(c.maxAttempts, 1)
	if c.backoff == nil {
		c.backoff = FullJitter{}
	}
	statuses := p.Statuses
	if statuses == nil {
		statuses = DefaultStatuses()
		c.keyedConflict = true
	}
	for _, s := range statuses {
		c.statuses.add(s)
	}
	if c.maxRetryAfter <= 0 {
		c.maxRetryAfter = defaultMaxRetryAfter
	}
	if c.maxBuffered == 0 {
		c.maxBuffered = defaultMaxBufferedBody
	}
	return c
}

// compileAll compiles p and its variant of one attempt (see oneAttempt).
func (p *Policy) compileAll() *policy {
	c := p.compile()
	oneAttempt := *c
	oneAttempt.maxAttempts = 1
	oneAttempt.src.MaxAttempts = 1
	c.oneAttempt = &oneAttempt
	return c
}

// statusSet is a set of status codes 0..639.
type statusSet [10]uint64

func (s *statusSet) add(code int) {
	if code >= 0 && code < 640 {
		s[code/64] |= 1 << (code % 64)
	}
}

func (s *statusSet) has(code int) bool {
	return code >= 0 && code < 640 && s[code/64]&(1<<(code%64)) != 0
}

// idempotent reports whether RFC 9110 section 9.2.2 makes method
// idempotent, or RFC 10008 (QUERY: safe and idempotent, with content).
func idempotent(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete, "QUERY",
		"GET_0RTT", "HEAD_0RTT": // quic-go's GET and HEAD that may go in early data
		return true
	}
	return false
}

// declaredIdempotent reports whether the caller declared its request
// idempotent as net/http's Transport lets it: an Idempotency-Key or
// X-Idempotency-Key field present with a nil value (which is not sent).
// Such a request is retried as an idempotent one, whatever its method.
func declaredIdempotent(h http.Header) bool {
	if len(h) == 0 {
		return false
	}
	v, ok := h[header.DefaultKey]
	if ok && v == nil {
		return true
	}
	v, ok = h[header.XKey]
	return ok && v == nil
}
