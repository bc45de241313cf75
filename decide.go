package retryhttp

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/classify"
	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/hostgate"
)

// The decisions about a request. Each takes what it decides on (an
// attempt's outcome, the time) and returns a value; the attempt loop
// (call.run) acts on it.

// A verdict is what an attempt's outcome is worth.
type verdict struct {
	retry    bool           // another attempt may help
	serverNo bool           // the server said not to retry a status that would be
	f        classify.Class // the class of the attempt's error
}

// judge returns the verdict on attempt a's outcome: by its error's class,
// or by its status and the server's word, and then by Policy.Retryable.
func (c *call) judge(a *attempt) verdict {
	if a.judged {
		return a.v
	}
	var v verdict
	if a.err != nil {
		v.f = classify.Of(a.err)
		if a.timedOut {
			v.f = classify.Class{Transient: true, NothingSent: v.f.NothingSent}
		}
		v.retry = v.f.Transient
	} else {
		v.retry, v.serverNo = c.p.responseVerdict(a.resp, &a.fields, c.keyed)
	}
	if c.p.retryable != nil {
		v.retry = c.p.retryable(&Attempt{Request: c.req, Number: a.n, Response: a.resp, Err: a.err, Retry: v.retry})
		a.fields = 0 // the hook may have changed the header: it is scanned again if read
	}
	return v
}

// responseVerdict returns whether resp asks for another attempt, by its
// status and the server's own word, before Policy.Retryable has its say;
// serverNo reports that X-Should-Retry: false stopped a status that would
// have been retried. keyed says whether the request carries an idempotency
// key (a keyed request also retries 409). f holds the fields of resp's
// header that the Transport reads, or 0 if not known yet: it is then set,
// unless the status alone decides.
func (p *policy) responseVerdict(resp *http.Response, f *header.Fields, keyed bool) (retry, serverNo bool) {
	code := resp.StatusCode
	retry = p.retryStatus(code, keyed)
	if !retry && code < 400 {
		// The server's word cannot make it one to retry (a "true" asks for
		// a retry of a 4xx or 5xx) nor stop a retry: a success pays no
		// header lookup.
		return false, false
	}
	fields := f.Of(resp.Header)
	if code == http.StatusForbidden && !retry {
		retry = header.RateLimited(resp.Header, fields)
	}
	switch header.ShouldRetry(resp.Header, fields) {
	case header.AdviceNo:
		return false, retry
	case header.AdviceYes:
		return retry || code >= 400, false
	}
	return retry, false
}

// needsLook reports whether a response on the fast path may be worth
// another attempt, or is a failure to give up on, and so needs the whole
// attempt loop. (A 409 is judged as if the request carried a key: the
// loop looks for one.) f is set as responseVerdict sets it.
func (p *policy) needsLook(resp *http.Response, f *header.Fields) bool {
	retry, serverNo := p.responseVerdict(resp, f, true)
	return retry || serverNo
}

// good reports whether an attempt's outcome wins a race of hedged
// attempts: an answer that is not to be retried. (Policy.Retryable judges
// it afterwards.)
func (c *call) good(a *attempt) bool {
	if a.err != nil {
		return false
	}
	retry, _ := c.p.responseVerdict(a.resp, &a.fields, c.keyed)
	return !retry
}

// A step is what follows a failed attempt worth another: the wait before
// the next attempt and what set it, or the reason to give up instead.
type step struct {
	reason Reason
	delay  time.Duration
	source DelaySource
}

// decide returns the step after attempt a, which failed with v at now
// and is worth another attempt by its outcome; prev is the wait before a.
func (c *call) decide(a *attempt, v verdict, prev time.Duration, now time.Time) step {
	if r := c.gate(a, v, now); r != 0 {
		return step{reason: r}
	}
	delay, asked, source := c.delay(a, prev, now)
	if asked > c.p.maxRetryAfter {
		return step{reason: ReasonRetryAfter}
	}
	if dl, ok := c.parent.Deadline(); ok && !now.Add(delay).Before(dl) {
		return step{reason: ReasonDeadline}
	}
	return step{delay: delay, source: source}
}

// gate returns why attempt a, worth another attempt by its outcome, may
// not have one (0 if it may): the method, the attempts left, the body, a
// retrying layer beneath, the request's gates (adaptive throttling).
func (c *call) gate(a *attempt, v verdict, now time.Time) Reason {
	// A base that never reported GetConn tells nothing: no proof.
	nothingSent := a.err != nil && (v.f.NothingSent || a.nothingWritten())
	switch {
	case !c.idem && !c.keyed && !nothingSent:
		return ReasonNotIdempotent
	case a.n >= c.max:
		return c.exhausted()
	case !c.body.CanReplay(nothingSent):
		return ReasonBody
	case c.innerRetried(a):
		return ReasonNested
	case c.gates.Asks(hostgate.KindRetry) && !c.gates.Admit(hostgate.KindRetry, c.t.monoAt(now), c.t.rand):
		return ReasonThrottled
	}
	return 0
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

// innerRetried reports whether the attempt's outcome comes from another
// retrying Transport under this one that already made several attempts
// (also when its answer then failed here: a body cut off while buffered).
func (c *call) innerRetried(a *attempt) bool {
	if a.resp != nil || a.innerRetries {
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
		if d, source, ok := serverWait(a, now); ok && d > 0 {
			if d > c.p.maxRetryAfter && c.p.capRetryAfter {
				d = c.p.maxRetryAfter // urllib3's way: wait the most we would
			}
			jitter := scale(min(d/10, time.Second), c.t.rand())
			return d + min(jitter, math.MaxInt64-d), d, source
		}
	}
	return max(c.p.backoff.Delay(a.n-1, prev, c.t.rand()), 0), 0, DelayBackoff
}

// serverWait returns the wait that attempt a's response asks for, at now,
// and what set it (see header.Wait).
func serverWait(a *attempt, now time.Time) (time.Duration, DelaySource, bool) {
	d, kind, ok := header.Wait(a.resp.Header, a.fieldsOf(), now)
	source := DelayBackoff
	switch kind {
	case header.RetryAfter:
		source = DelayRetryAfter
	case header.RateLimit:
		source = DelayRateLimit
	}
	return d, source, ok
}

// schedule returns how long the backoff schedule of a request would still
// take after its attempt n failed, prev being the wait before attempt n:
// the longest wait the policy's Backoff gives before each retry left. Its
// cost does not grow with MaxAttempts: once the sum passes the time left
// before the caller's deadline, the schedule outlasts the request, and it
// returns that (scheduleBeyond); and it asks the Backoff at most
// scheduleCalls times, the retries left after those waiting as long as the
// last (the strategies of this package reach their cap by then).
func (c *call) schedule(n int, prev time.Duration) time.Duration {
	const top = 0x1p0 - 0x1p-53 // the largest uniform sample below 1
	limit := scheduleBeyond
	if dl, ok := c.parent.Deadline(); ok {
		limit = min(max(dl.Sub(c.t.clock.Now()), 0), limit)
	}
	var total time.Duration
	left := c.max - n // the retries left
	for calls := 1; left > 0; calls, left = calls+1, left-1 {
		d := max(c.p.backoff.Delay(n-2+calls, prev, top), 0)
		if calls == scheduleCalls {
			d = satMul(d, left) // this retry's wait and those after it
			left = 1
		}
		total += min(d, scheduleBeyond) // total < limit: no overflow
		if total >= limit {
			return scheduleBeyond
		}
		prev = d
	}
	return total
}

// overloadEvidence reports whether attempt a, which failed at now and was
// worth another attempt, tells the budget that its host may be down or
// overloaded: any failure but an answer whose server said when to come
// back, unless it also says it is overloaded (Envoy's x-envoy-overloaded).
// st is the step decided after a: the source of its wait, if it has one,
// tells whether the server set it.
func overloadEvidence(a *attempt, st step, now time.Time) bool {
	if a.resp == nil {
		return true
	}
	if f := a.fieldsOf(); f&header.EnvoyOverloaded != 0 && header.Value(a.resp.Header, "X-Envoy-Overloaded") != "" {
		return true
	}
	if st.reason == 0 {
		return st.source == DelayBackoff
	}
	d, _, ok := serverWait(a, now)
	return !ok || d <= 0
}

// maxLineWait is how long a request without a deadline may wait in the
// budget's line for its host, in all (or its backoff schedule, if longer).
const maxLineWait = 10 * time.Second

// lineHorizon returns when the waits in the budget's line of a request
// whose attempt a failed at now end at the latest: at once for a retry from
// a layer above (beyond the retry's own backoff); just before the
// caller's deadline (by a tenth of the time left, at most a second), so
// that the caller gets the last failure rather than its deadline's error;
// or, without a deadline, maxLineWait after its first wait (or when its
// backoff schedule would have ended, if later). prev is the wait before a.
func (c *call) lineHorizon(a *attempt, prev time.Duration, now time.Time) time.Time {
	if c.prior > 0 {
		// A layer above retries this request (its key was sent lately): its
		// own line waits have run, and each new one would end closer to the
		// deadline. Its retries wait no longer than their backoff.
		return now
	}
	if dl, ok := c.parent.Deadline(); ok {
		return dl.Add(-min(time.Second, dl.Sub(now)/10))
	}
	return now.Add(max(c.schedule(a.n, prev), maxLineWait))
}

// ctxOver reports whether the caller's context has ended, or its deadline
// has come on the Transport's clock (a wait that ends at the deadline may
// wake before the context's own timer fires), and with what reason.
func (c *call) ctxOver() (Reason, bool) {
	if c.parent.Err() != nil {
		return ctxReason(c.parent), true
	}
	if dl, ok := c.parent.Deadline(); ok && !c.t.clock.Now().Before(dl) {
		return ReasonDeadline, true
	}
	return 0, false
}

// Bounds of schedule: the Backoff calls it makes at most, and the length it
// gives a schedule that lasts longer than the request may (a sum of two of
// them does not overflow).
const (
	scheduleCalls  = 64
	scheduleBeyond = time.Duration(math.MaxInt64 / 2)
)

// satMul returns d*n, or math.MaxInt64 where that overflows. Requires
// d, n >= 0.
func satMul(d time.Duration, n int) time.Duration {
	if d != 0 && int64(n) > math.MaxInt64/int64(d) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ctxReason returns the reason of a request that ctx, done, ended.
func ctxReason(ctx context.Context) Reason {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ReasonDeadline
	}
	return ReasonCanceled
}
