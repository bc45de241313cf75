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

// The decisions about a request, each a function of its inputs whose result
// call.run acts on; a failed attempt meets judge, allowed, delay and stop.

// A verdict is what an attempt's outcome is worth.
type verdict struct {
	retry    bool           // another attempt may help
	status   bool           // the response's status is one the policy retries
	serverNo bool           // the server's advice stopped a status that would be retried
	class    classify.Class // the attempt's error's
}

// judge returns the verdict on attempt a, by its error or its response, then
// by Policy.Retryable, unless hedging judged it already.
func (c *call) judge(a *attempt) verdict {
	if a.judged {
		return a.v
	}
	var v verdict
	if a.err != nil {
		v.class = classify.Of(a.err)
		v.class.Transient = v.class.Transient || a.timedOut // an attempt timeout is worth another
		v.retry = v.class.Transient
	} else {
		v.status = c.p.retryStatus(a.resp.StatusCode, c.key.keyed)
		v.retry, v.serverNo = c.p.responseVerdict(a.resp, &a.fields, v.status)
	}
	if c.p.retryable != nil {
		v.retry = c.p.retryable(&Attempt{Request: c.req, Number: a.n, Response: a.resp, Err: a.err, Retry: v.retry})
		a.fields = 0 // the hook may have changed the header: it is scanned again if read
	}
	c.record(a, v.retry)
	return v
}

// A plan is what follows a failed attempt worth another, all decided at the
// failure: a reason to give up, or the next attempt's wait, body and budget.
type plan struct {
	reason  Reason
	err     error // the error the request ends with, if not the attempt's: joined with the next body's
	source  delaySource
	delay   time.Duration
	maxWait time.Duration // the longest wait the retry could have drawn (see byPolicy)
	body    io.ReadCloser
	getBody func() (io.ReadCloser, error)
	budget  budget.Decision
	paid    bool      // the retry spent a retry of credit (a server's wait spends none)
	until   time.Time // with budget.Wait: when the retry leaves the line at the latest (lineEnd)
}

// decide returns the plan after attempt a, failed with v at now and worth
// another: the policy's, then the budget's.
func (c *call) decide(a *attempt, v verdict, now time.Time) plan {
	pl := c.byPolicy(a, v, now)
	if c.budget.account != nil && hostFailure(a, pl, now) {
		c.budget.account.Failure(now, &c.budget.id)
	}
	if pl.reason != 0 {
		pl.reason = c.reported(pl.reason)
		return pl
	}
	var err error
	pl.body, pl.getBody, err = c.body.Next(c.req, c.sent+1)
	c.held.next = pl.body
	if err != nil {
		return plan{reason: c.reported(ReasonUnsafe), err: errors.Join(a.err, err)}
	}
	if pl.source != delayBackoff {
		return pl // the server timed the retry: it costs no credit and needs no line
	}
	pl.budget = c.budget.account.Retry(now, c.budget.id)
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

// reported returns r, a reason a request ends for, as it is reported: with
// retries off, a reason the failure gives is ReasonNoRetries, as no retry
// could have followed any failure. (ReasonRetryAfter needs a retry to come.)
func (c *call) reported(r Reason) Reason {
	if c.retriesOff() && (r == ReasonUnsafe || r == ReasonNotTransient || r == ReasonServer) {
		return ReasonNoRetries
	}
	return r
}

// byPolicy returns the plan after attempt a by the policy and the deadline.
func (c *call) byPolicy(a *attempt, v verdict, now time.Time) plan {
	if r := c.allowed(a, v, now); r != 0 {
		return plan{reason: r} // (no retry could follow, the caller's context aside)
	}
	delay, asked, source := c.delay(a, now)
	if asked > c.p.maxRetryAfter {
		return plan{reason: ReasonRetryAfter}
	}
	if r := c.stop(now, delay); r != 0 {
		return plan{reason: r}
	}
	// The longest wait the retry could have drawn: the server's with the most
	// jitter, else the Backoff's at its largest sample, chained from the last.
	maxWait := asked + min(asked/10, time.Second, math.MaxInt64-asked)
	if asked <= 0 {
		maxWait = max(c.p.backoff.Delay(c.retries, c.budget.maxWait, largestSample), 0)
	}
	pl := plan{delay: delay, source: source, maxWait: maxWait}
	if c.budget.waited > 0 && now.Add(delay).After(c.scheduleEnd(a, &pl, now)) {
		// The budget's line held an earlier retry and left this wait no room
		// (it took the spare time, or lengthened c.prev: DecorrelatedJitter).
		return plan{reason: ReasonBudget}
	}
	return pl
}

// allowed returns why attempt a may not have another attempt, or 0.
func (c *call) allowed(a *attempt, v verdict, now time.Time) Reason {
	nothingSent := a.err != nil && (v.class.NothingSent || a.nothingWritten())
	switch {
	case !c.idem && !c.key.keyed && !nothingSent:
		return ReasonUnsafe
	case c.sent >= c.max && c.retriesOff():
		return ReasonNoRetries
	case c.sent >= c.max:
		return ReasonExhausted
	case !c.body.CanReplay(nothingSent):
		return ReasonUnsafe
	case c.retriedBeneathIt(a):
		return ReasonNoRetries
	case c.gates.Asks(hostgate.KindRetry) && !c.gates.Admit(hostgate.KindRetry, c.t.monoAt(now), c.t.rand):
		return ReasonThrottled
	}
	return 0
}

// retriesOff reports whether the request has one attempt because its
// retries are off (MaxAttempts 1, an SDK above retrying it), not spent above.
func (c *call) retriesOff() bool { return c.max == 1 && c.key.prior == 0 }

// retriedBeneathIt reports whether a retrying Transport beneath made several
// attempts for attempt a, even if its response then failed here.
func (c *call) retriedBeneathIt(a *attempt) bool {
	if a.resp != nil || a.retriedBeneath {
		return a.retriedBeneath
	}
	var e *Error
	return errors.As(a.err, &e) && e.Attempts > 1
}

// delay returns the wait before the next attempt, the wait the server asked
// for (0 if none), and what set it. A server's wait replaces the backoff, as
// gRPC's pushback does, plus at most 10 % or 1 s of jitter, lest clients told
// the same instant return in lockstep.
func (c *call) delay(a *attempt, now time.Time) (delay, asked time.Duration, source delaySource) {
	if a.answerHeader() != nil {
		if d, source, ok := serverWait(a, now); ok && d > 0 {
			jitter := scale(min(d/10, time.Second), c.t.rand())
			return d + min(jitter, math.MaxInt64-d), d, source
		}
	}
	return max(c.p.backoff.Delay(c.retries, c.prev, c.t.rand()), 0), 0, delayBackoff
}

// serverWait returns the wait attempt a's response asks for at now, and its
// source.
func serverWait(a *attempt, now time.Time) (time.Duration, delaySource, bool) {
	d, kind, ok := header.Wait(a.answerHeader(), a.fieldsOf(), now)
	switch kind {
	case header.RetryAfter:
		return d, delayRetryAfter, ok
	case header.RateLimit:
		return d, delayRateLimit, ok
	}
	return d, delayBackoff, ok
}

// stop returns why the request must end rather than wait d from now, or 0 (a
// zero now asks of the context alone). Only stop decides ReasonDeadline, on
// the Transport's clock, which may reach it before the context's timer fires.
func (c *call) stop(now time.Time, d time.Duration) Reason {
	err := c.parent.Err()
	switch dl, ok := c.parent.Deadline(); {
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonDeadline
	case err != nil:
		return ReasonCanceled
	case ok && !now.IsZero() && !now.Add(d).Before(dl):
		return ReasonDeadline
	}
	return 0
}

// hostFailure reports whether attempt a, failed at now, counts against its
// host in the budget: any failure but a response saying when to come back (as
// pl, the plan after a, may tell), unless it says x-envoy-overloaded.
func hostFailure(a *attempt, pl plan, now time.Time) bool {
	switch {
	case a.resp == nil:
		return true
	case a.fieldsOf()&header.EnvoyOverloaded != 0 && header.Value(a.resp.Header, "X-Envoy-Overloaded") != "":
		return true
	case pl.reason == 0:
		return pl.source == delayBackoff
	}
	d, _, ok := serverWait(a, now)
	return !ok || d <= 0
}

// responseVerdict returns whether resp asks for another attempt by its status
// and the server's advice (X-Should-Retry), and whether the advice stopped a
// retry. f caches resp's header's fields.
func (p *policy) responseVerdict(resp *http.Response, f *header.Fields, retryStatus bool) (retry, serverNo bool) {
	code := resp.StatusCode
	retry = retryStatus
	if !retry && code < 400 {
		// Advice cannot change that ("true" retries a 4xx or 5xx): no lookup.
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

// retryStatus reports whether status code is worth another attempt: one of
// the policy's, or by default a 409 to a keyed request (still in progress).
func (p *policy) retryStatus(code int, keyed bool) bool {
	return p.statuses.has(code) || (keyed && code == http.StatusConflict && p.keyedConflict)
}
