package retryhttp

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// The wait before a retry: through the budget (its credit, or its host's
// line), then the backoff or the server's wait.

// wait takes the retry after attempt a, which failed at now, through the
// budget and then its wait st.delay. It returns false when the call ended
// meanwhile, with what it returns.
func (c *call) wait(a *attempt, st step, prev time.Duration, now time.Time) (*http.Response, error, bool) {
	var waited time.Duration // in the budget's line
	decision := c.lane.Retry(now, c.id)
	switch decision {
	case budget.Refuse:
		c.count(nBudgetDenied)
		c.warnBudget(now, warnRefused)
		resp, err := c.dropRetry(a, ReasonBudget, c.held.resp)
		return resp, err, false
	case budget.Wait:
		if resp, err, ok := c.awaitBudget(a, now, st.delay, prev); !ok {
			return resp, err, false
		}
		// Let go, the retry waits what is left of its backoff, which counts
		// from its failure: the line spread the releases of a recovery over
		// its rounds, and a probe goes at backoff pace already. A server's
		// wait counts from the release, so that the retries the host's
		// successes let go reach it at the pace it asked for.
		waited = c.t.clock.Now().Sub(now)
		now = now.Add(waited)
		if st.source == DelayBackoff {
			st.delay = max(st.delay-waited, 0)
		}
		if dl, ok := c.parent.Deadline(); ok && !now.Add(st.delay).Before(dl) {
			// Let go too late: its wait would end past the deadline.
			resp, err := c.dropRetry(a, ReasonDeadline, c.held.resp)
			return resp, err, false
		}
	}
	c.retryHooks(a, waited+st.delay, st.source, waited)
	if c.held.resp != nil { // (not if the budget wait lost its body, closed)
		// The drain counts toward the wait: the next attempt starts at
		// now+delay, or when a drain longer than the delay ends (cut off
		// respbody.Time after it starts).
		respbody.Drain(c.held.resp, respbody.Time(st.delay), c.t.clock)
		c.held.resp = nil
	}
	if st.delay <= 0 && c.parent.Err() == nil {
		return nil, nil, true // no wait
	}
	if c.t.clock.Sleep(c.parent, now.Add(st.delay), nil) == clock.WokeTime {
		return nil, nil, true
	}
	if decision == budget.Go {
		c.lane.Refund() // paid for, but never sent
	}
	resp, err := c.dropRetry(a, ctxReason(c.parent), nil)
	return resp, err, false
}

// dropRetry gives up for reason on the retry after attempt a, which
// failed, closing the body made for it: resp, a's response kept in memory,
// is returned if not nil, else an *Error with a's failure.
func (c *call) dropRetry(a *attempt, reason Reason, resp *http.Response) (*http.Response, error) {
	if c.held.next != nil {
		c.held.next.Close()
		c.held.next = nil
	}
	var err error
	if resp == nil {
		if err = a.err; err == nil {
			err = &StatusError{StatusCode: a.resp.StatusCode}
		}
	}
	return c.giveUp(a, reason, resp, err)
}

// awaitBudget waits in the budget's line for leave to retry after attempt
// a failed, its host being down or the credit spent: until the budget lets
// the retry go, or the caller's context ends, or its horizon passes (see
// lineHorizon). Meanwhile the failed response's body is kept in memory (up
// to respbody.Limit) and its connection freed. If the retry may not go, the
// call has ended with what it returns.
func (c *call) awaitBudget(a *attempt, now time.Time, delay, prev time.Duration) (*http.Response, error, bool) {
	c.count(nBudgetWaits)
	if c.horizon.IsZero() {
		c.horizon = c.lineHorizon(a, prev, now)
	}
	resp, err := a.resp, a.err
	if resp != nil && !respbody.Keep(resp, respbody.Time(delay), c.t.clock) {
		resp, err = nil, &StatusError{StatusCode: resp.StatusCode} // its body is lost
		c.held.resp = nil
	}
	ok := c.lane.Wait(c.t.clock, c.t.rand, c.parent, maxTime(c.horizon, now.Add(delay)))
	end := c.t.clock.Now()
	c.waited += end.Sub(now)
	if ok {
		return nil, nil, true
	}
	if !errors.Is(c.parent.Err(), context.Canceled) {
		c.warnBudget(end, warnInLine) // (not for a caller who gave up)
	}
	if c.held.next != nil {
		c.held.next.Close() // a stream body counts this as the unused attempt's close
		c.held.next = nil
	}
	if reason, over := c.ctxOver(); over {
		if err == nil {
			err = &StatusError{StatusCode: resp.StatusCode}
		}
		c.held.resp = nil
		resp, err = c.giveUp(a, reason, nil, err)
		return resp, err, false
	}
	c.count(nBudgetDenied)
	resp, err = c.giveUp(a, ReasonBudget, resp, err)
	return resp, err, false
}
