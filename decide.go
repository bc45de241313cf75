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
		v.status = p.retryStatus(a.resp.StatusCode, c.key.keyed)
		v.retry, v.serverNo = p.responseVerdict(a.resp, &a.fields, v.status)
	}
	if p.retryable != nil {
		v.retry = p.retryable(&Attempt{Request: c.req, Number: a.n, Response: a.resp, Err: a.err, Retry: v.retry})
		a.fields = 0 // the hook may have changed the header: it is scanned again if read
	}
	return v
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
	maxWait time.Duration // the longest wait the retry could have drawn: see maxWaitOf

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
	if c.budget.account != nil && overloadEvidence(a, pl, now) {
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
		return plan{reason: c.reported(ReasonUnsafe), err: err}
	}
	if pl.source != delayBackoff {
		// The server timed the retry: its pacing, which costs no credit
		// and needs no line.
		return pl
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
	if r := c.allowed(a, v, now); r != 0 {
		if s := c.stop(time.Time{}, 0); s != 0 {
			r = s // the caller's context ended: its reason first
		}
		return plan{reason: r}
	}
	delay, asked, source := c.delay(a, prev, now)
	if asked > c.p.maxRetryAfter {
		return plan{reason: ReasonRetryAfter}
	}
	if r := c.stop(now, delay); r != 0 {
		return plan{reason: r}
	}
	pl := plan{delay: delay, source: source, maxWait: c.maxWaitOf(a, asked)}
	if c.budget.waited > 0 && now.Add(delay).After(c.scheduleEnd(a, &pl, now)) {
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

// retriesOff reports whether the request may make one attempt only, its
// retries off (MaxAttempts 1, an SDK above retrying it),
// not spent by a layer above's earlier attempts.
func (c *call) retriesOff() bool { return c.max == 1 && c.key.prior == 0 }

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

// maxWaitOf returns the longest wait the retry after attempt a could
// draw: the server's, asked, with the most jitter delay adds to it, or else
// the policy's Backoff's for the largest sample, chained from the longest
// wait the retry before could draw (c.budget.maxWait). A request's schedule is
// the sum of these: a wait the budget adds must fit inside it.
func (c *call) maxWaitOf(a *attempt, asked time.Duration) time.Duration {
	if asked > 0 {
		return asked + min(asked/10, time.Second, math.MaxInt64-asked)
	}
	return max(c.p.backoff.Delay(c.retries, c.budget.maxWait, largestSample), 0)
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

// retryStatus reports whether a response status is worth another attempt:
// one of the policy's statuses, or, with the default statuses, a 409 to a
// keyed request (the original request is still being processed).
func (p *policy) retryStatus(code int, keyed bool) bool {
	return p.statuses.has(code) || (keyed && code == http.StatusConflict && p.keyedConflict)
}
