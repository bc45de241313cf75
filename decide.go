package retryhttp

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/classify"
	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/hostgate"
)

// The decisions about a request. Each takes what it decides on (an
// attempt's outcome, the time) and returns a value; the attempt loop
// (call.run) acts on it. In the order a failed attempt meets them: judge
// (is its outcome worth another attempt?), allowed (may the request make
// one?), delay (how long until it goes?), and stop (does the caller's
// deadline come first?).

// A verdict is what an attempt's outcome is worth.
type verdict struct {
	retry    bool           // another attempt may help
	status   bool           // the response's status is one the policy retries (the host refused it)
	serverNo bool           // the server said not to retry a status that would be
	class    classify.Class // the class of the attempt's error
}

// judge returns the verdict on attempt a of the call: by its error's
// class, or by its status and the server's advice (a keyed request also
// retries 409, unless the policy lists its statuses), and then by
// Policy.Retryable. An attempt judged already (by the hedged attempts of a
// request) keeps its verdict.
func (c *call) judge(a *attempt) verdict {
	if a.judged {
		return a.v
	}
	p := c.p
	var v verdict
	if a.err != nil {
		v.class = classify.Of(a.err)
		if a.timedOut {
			v.class = classify.Class{Transient: true, NothingSent: v.class.NothingSent}
		}
		v.retry = v.class.Transient
	} else {
		v.status = p.retryStatus(a.resp.StatusCode, c.keyed)
		v.retry, v.serverNo = p.responseVerdict(a.resp, &a.fields, v.status)
	}
	if p.retryable != nil {
		v.retry = p.retryable(&Attempt{Request: c.req, Number: a.n, Response: a.resp, Err: a.err, Retry: v.retry})
		a.fields = 0 // the hook may have changed the header: it is scanned again if read
	}
	return v
}

// responseVerdict returns whether resp asks for another attempt, by its
// status (retryStatus: one the policy retries) and the server's advice,
// before Policy.Retryable has its say; serverNo reports that
// X-Should-Retry: false stopped a status that would have been retried. f
// holds the fields of resp's header that the Transport reads, or 0 if not
// known yet: it is then set, unless the status alone decides.
func (p *policy) responseVerdict(resp *http.Response, f *header.Fields, retryStatus bool) (retry, serverNo bool) {
	code := resp.StatusCode
	retry = retryStatus
	if !retry && code < 400 {
		// The server's advice cannot make it one to retry (a "true" asks
		// for a retry of a 4xx or 5xx) nor stop a retry: a success pays no
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

// A plan is what follows a failed attempt worth another, all of it
// decided at the failure: the reason to give up instead; or the wait
// before the next attempt and what set it, the next attempt's body, and the
// budget's verdict (with, for a retry to wait in its line, the latest it
// may leave it).
type plan struct {
	reason  Reason
	err     error // besides the attempt's, why the request ends: the next body's failure
	source  delaySource
	delay   time.Duration
	longest time.Duration // the longest wait the retry could have drawn: see longestWait

	body    io.ReadCloser                 // the next attempt's
	getBody func() (io.ReadCloser, error) // and its GetBody
	budget  budget.Decision
	paid    bool      // the retry spent a retry of credit (a server's wait spends none)
	until   time.Time // for budget.Wait: see lineEnd
}

// decide returns the plan after attempt a, which failed with v at now and
// is worth another attempt by its outcome (prev is the wait before a): by
// the policy, whether and when (see byPolicy); then the body for the next
// attempt; then the budget's verdict, the budget told first of the
// failure where it is evidence against the host. A plan with a reason ends
// the request; the caller carries out any other.
func (c *call) decide(a *attempt, v verdict, prev time.Duration, now time.Time) plan {
	pl := c.byPolicy(a, v, prev, now)
	if c.account != nil && overloadEvidence(a, pl, now) {
		c.account.Failure(now, &c.id)
	}
	if pl.reason != 0 {
		pl.reason = c.reported(pl.reason)
		return pl
	}
	var err error
	pl.body, pl.getBody, err = c.body.Next(c.req, c.sent+1)
	c.held.next = pl.body
	if err != nil {
		return plan{reason: c.reported(ReasonUnsafe), err: err}
	}
	if pl.source != delayBackoff {
		// The server timed the retry: its pacing, which costs no credit
		// and needs no line.
		return pl
	}
	pl.budget = c.account.Retry(now, c.id)
	pl.paid = pl.budget == budget.Go
	if pl.budget == budget.Wait {
		pl.until = c.lineEnd(a, &pl, now)
		if !pl.until.After(now) { // no time left to wait in
			pl.budget = budget.Refuse
		}
	}
	if pl.budget == budget.Refuse {
		pl.reason = ReasonBudget
	}
	return pl
}

// reported returns reason r, which ends a request, as the request reports
// it: with retries off for the request, a reason its failure gives (unsafe
// to send again, not transient, the server's word) is ReasonNoRetries,
// since no retry could have followed whatever the failure. (A wait too
// long, ReasonRetryAfter, is decided only for a request that may retry.)
func (c *call) reported(r Reason) Reason {
	if c.retriesOff() && (r == ReasonUnsafe || r == ReasonNotTransient || r == ReasonServer) {
		return ReasonNoRetries
	}
	return r
}

// byPolicy returns the plan after attempt a by the request's policy and
// deadline (see decide): whether it may have another attempt, and when.
func (c *call) byPolicy(a *attempt, v verdict, prev time.Duration, now time.Time) plan {
	if r := c.stop(time.Time{}, 0); r != 0 {
		return plan{reason: r} // the caller's context ended: its reason first
	}
	if r := c.allowed(a, v, now); r != 0 {
		return plan{reason: r}
	}
	delay, asked, source := c.delay(a, prev, now)
	if asked > c.p.maxRetryAfter {
		return plan{reason: ReasonRetryAfter}
	}
	if r := c.stop(now, delay); r != 0 {
		return plan{reason: r}
	}
	pl := plan{delay: delay, source: source, longest: c.longestWait(a, asked)}
	if c.waited > 0 && now.Add(delay).After(c.scheduleEnd(a, &pl, now)) {
		// The budget's line held an earlier retry of the request, and left
		// this one less than its wait: it took the slack, or made prev
		// longer than the schedule counts (DecorrelatedJitter draws from
		// it). A request that never waited in line gets its policy.
		return plan{reason: ReasonBudget}
	}
	return pl
}

// allowed returns why attempt a, worth another attempt by its outcome,
// may not have one (0 if it may): the method, the attempts left, the body,
// a retrying Transport beneath, the request's gates (adaptive throttling).
func (c *call) allowed(a *attempt, v verdict, now time.Time) Reason {
	// A base that never reported GetConn tells nothing: no proof.
	nothingSent := a.err != nil && (v.class.NothingSent || a.nothingWritten())
	switch {
	case !c.idem && !c.keyed && !nothingSent:
		return ReasonUnsafe
	case c.sent >= c.max:
		return c.exhausted()
	case !c.body.CanReplay(nothingSent):
		return ReasonUnsafe
	case c.retriedBeneathIt(a):
		return ReasonNoRetries
	case c.gates.Asks(hostgate.KindRetry) && !c.gates.Admit(hostgate.KindRetry, c.t.monoAt(now), c.t.rand):
		return ReasonThrottled
	}
	return 0
}

// exhausted returns why a request that made all the attempts it may make
// stops: retries off for it, or its attempts (MaxAttempts, or those a
// layer above left it) made.
func (c *call) exhausted() Reason {
	if c.retriesOff() {
		return ReasonNoRetries
	}
	return ReasonExhausted
}

// retriesOff reports whether the request may make one attempt only, its
// retries off (MaxAttempts 1, an SDK above retrying it),
// not spent by a layer above's earlier attempts.
func (c *call) retriesOff() bool { return c.max == 1 && c.aboveByKey == 0 }

// retriedBeneathIt reports whether the attempt's outcome comes from another
// retrying Transport beneath this one that already made several attempts
// (also when its answer then failed here: a body cut off while buffered).
func (c *call) retriedBeneathIt(a *attempt) bool {
	if a.resp != nil || a.retriedBeneath {
		return a.retriedBeneath
	}
	var e *Error
	return errors.As(a.err, &e) && e.Attempts > 1
}

// delay returns the wait before the next attempt, the wait the server asked
// for (0 if none), and what set the wait. A server's wait replaces the
// backoff, as gRPC's server pushback does, plus a jitter of at most 10 % or
// 1 s so that clients told the same instant do not return in lockstep.
func (c *call) delay(a *attempt, prev time.Duration, now time.Time) (delay, asked time.Duration, source delaySource) {
	if a.answerHeader() != nil {
		if d, source, ok := serverWait(a, now); ok && d > 0 {
			jitter := scale(min(d/10, time.Second), c.t.rand())
			return d + min(jitter, math.MaxInt64-d), d, source
		}
	}
	return max(c.p.backoff.Delay(c.retries, prev, c.t.rand()), 0), 0, delayBackoff
}

// serverWait returns the wait that attempt a's response asks for, at now,
// and what set it (see header.Wait).
func serverWait(a *attempt, now time.Time) (time.Duration, delaySource, bool) {
	d, kind, ok := header.Wait(a.answerHeader(), a.fieldsOf(), now)
	source := delayBackoff
	switch kind {
	case header.RetryAfter:
		source = delayRetryAfter
	case header.RateLimit:
		source = delayRateLimit
	}
	return d, source, ok
}

// stop returns why the request must end rather than wait d from now (0
// if it need not): its caller's context has ended (ReasonCanceled, or
// ReasonDeadline), or its deadline comes no later than the wait's end
// (ReasonDeadline). A zero now asks about the context alone. Every
// ReasonDeadline is decided here: the deadline is read by the Transport's
// clock, so a wait that ends at the deadline does not outlast it while the
// context's own timer has yet to fire.
func (c *call) stop(now time.Time, d time.Duration) Reason {
	if err := c.parent.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return ReasonDeadline
		}
		return ReasonCanceled
	}
	if dl, ok := c.parent.Deadline(); ok && !now.IsZero() && !now.Add(d).Before(dl) {
		return ReasonDeadline
	}
	return 0
}

// schedule returns how long the retries of a request after its next
// attempt could take at the slowest, facing answers like the last: took,
// the last attempt's time, for each attempt, and the longest wait before
// it. That is the server's, longest, before each when the last answer set
// it (server), else the longest the policy's Backoff draws, chained from
// longest, the longest wait before the next attempt. Its cost does not grow with
// MaxAttempts: once the sum passes the time left before the caller's
// deadline, the schedule outlasts the request, and it returns that
// (scheduleBeyond); and it asks the Backoff at most scheduleCalls times,
// the retries left after those waiting as long as the last (the strategies
// of this package reach their cap by then).
func (c *call) schedule(longest, took time.Duration, server bool) time.Duration {
	limit := scheduleBeyond
	if dl, ok := c.parent.Deadline(); ok {
		limit = min(max(dl.Sub(c.t.clock.Now()), 0), limit)
	}
	var total time.Duration
	left := c.max - c.sent - 1 // the retries left after the next
	for calls := 1; left > 0; calls, left = calls+1, left-1 {
		d := longest
		if !server {
			d = max(c.p.backoff.Delay(c.retries+calls, longest, largestSample), 0)
		}
		longest = d
		d = min(d, scheduleBeyond) + min(took, scheduleBeyond) // no overflow
		if calls == scheduleCalls {
			d = satMul(d, left) // this retry and those after it
			left = 1
		}
		total += min(d, scheduleBeyond) // total < limit: no overflow
		if total >= limit {
			return scheduleBeyond
		}
	}
	return total
}

// overloadEvidence reports whether attempt a, which failed at now and was
// worth another attempt, tells the budget that its host may be down or
// overloaded: any failure but an answer whose server said when to come
// back, unless it also says it is overloaded (Envoy's x-envoy-overloaded).
// pl is the plan decided after a: the source of its wait, if it has one,
// tells whether the server set it.
func overloadEvidence(a *attempt, pl plan, now time.Time) bool {
	if a.resp == nil {
		return true
	}
	if f := a.fieldsOf(); f&header.EnvoyOverloaded != 0 && header.Value(a.resp.Header, "X-Envoy-Overloaded") != "" {
		return true
	}
	if pl.reason == 0 {
		return pl.source == delayBackoff
	}
	d, _, ok := serverWait(a, now)
	return !ok || d <= 0
}

// longestWait returns the longest wait the retry after attempt a could
// draw: the server's, asked, with the most jitter delay adds to it, or else
// the policy's Backoff's for the largest sample, chained from the longest
// wait the retry before could draw (c.longest). A request's schedule is
// the sum of these: a wait the budget adds must fit inside it.
func (c *call) longestWait(a *attempt, asked time.Duration) time.Duration {
	if asked > 0 {
		return asked + min(asked/10, time.Second, math.MaxInt64-asked)
	}
	return max(c.p.backoff.Delay(c.retries, c.longest, largestSample), 0)
}

// scheduleEnd returns when the schedule of a request whose attempt a
// failed at now, the retry to come planned pl, ends: now, plus the longest
// wait of the retry to come, and the longest time each retry after it could
// take facing answers like a's (see schedule), plus what earlier retries
// left unused of their longest waits (c.slack: below zero where the
// budget's line held one past its own). Nothing the budget decides makes a
// request end later: with UnlimitedBudget, facing the same answers, it
// could end as late.
func (c *call) scheduleEnd(a *attempt, pl *plan, now time.Time) time.Time {
	took := time.Duration(max(c.t.monoAt(now)-c.sentAt, 0))
	// At most scheduleBeyond, as c.slack: no overflow.
	rest := c.schedule(pl.longest, took, pl.source != delayBackoff)
	return now.Add(min(pl.longest, scheduleBeyond) + rest + c.slack)
}

// lineEnd returns when a retry planned pl, after attempt a failed at now,
// leaves the budget's line at the latest unless let go: so that it can
// still go within its request's schedule (see scheduleEnd), but no later
// than just before the caller's deadline (by a tenth of the time left, at
// most a second), so that the caller gets the last failure rather than its
// deadline's error; and no later than its own wait for a retry from a layer
// above, whose own line waits have run (its key was sent lately).
func (c *call) lineEnd(a *attempt, pl *plan, now time.Time) time.Time {
	end, earliest := c.scheduleEnd(a, pl, now), now.Add(pl.delay)
	if c.aboveByKey > 0 {
		end = now
	}
	if dl, ok := c.parent.Deadline(); ok {
		if early := dl.Add(-min(time.Second, dl.Sub(now)/10)); early.Before(end) {
			end = early
		}
	}
	return maxTime(end, earliest)
}

// idempotent reports whether RFC 9110 section 9.2.2 makes method
// idempotent.
func idempotent(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete,
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

// retryStatus reports whether a response status is worth another attempt:
// one of the policy's statuses, or, with the default statuses, a 409 to a
// keyed request (the original request is still being processed).
func (p *policy) retryStatus(code int, keyed bool) bool {
	return p.statuses.has(code) || (keyed && code == http.StatusConflict && p.keyedConflict)
}

// largestSample is the largest uniform sample below 1: the one a Backoff
// draws its longest wait from.
const largestSample = 0x1p0 - 0x1p-53

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
