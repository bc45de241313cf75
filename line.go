package retryhttp

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/respbody"
)

// A retry's wait in its host's line in the budget, and the schedule that
// bounds it: a retry the budget holds waits no longer than its request's
// policy could have made it wait, given the same responses, and not past the
// caller's deadline.

// budgetState is a request's part in its host's budget: the account, and
// how long its retries may still wait in the host's line (see scheduleEnd).
type budgetState struct {
	account *budget.Account // the host's part of the budget; nil: unlimited
	id      uint64          // the request's id for the budget, once it reported a failure
	maxWait time.Duration   // the longest wait the last retry could draw (plan.maxWait)
	unused  time.Duration   // the part of the schedule's waits so far not waited (see scheduleEnd)
	waited  time.Duration   // waited in line, in all
}

// awaitBudget waits in the host's line for the budget to let go the retry
// planned pl after attempt a failed at now (another request failed the host
// lately, or its credit is spent): until the budget lets it go, the caller's
// context ends, or the request's schedule would no longer let it go
// (pl.until: see lineEnd). Meanwhile the failed response's body is kept in
// memory (up to respbody.Limit) and its connection freed. Let go, it returns
// how long the retry waited, and leaves in pl.delay what is left of its
// wait; else false, with the call's result.
func (c *call) awaitBudget(a *attempt, pl *plan, now time.Time) (time.Duration, *http.Response, error, bool) {
	resp, err := a.resp, a.err
	if resp != nil && !respbody.Keep(c.parent, resp, c.drainTime(now, pl.delay), c.t.clock) {
		resp, err = nil, &statusError{StatusCode: resp.StatusCode} // its body is lost
		c.held.resp = nil
	}
	// A body read past pl.until, as a drain may outlast a wait, leaves the
	// retry no time in line: it goes at once if the host's last outcome
	// was a success (Wait's time-up rule), and is refused otherwise.
	ok, paid := c.budget.account.Wait(c.t.clock, c.parent, pl.until, pl.maxWait) // a probe goes at its backoff's pace
	end := c.t.clock.Now()
	waited := end.Sub(now)
	c.budget.waited += waited
	if ok {
		// Let go, the retry waits what is left of its backoff, which
		// counts from its failure.
		pl.delay = max(pl.delay-waited, 0)
		pl.paid = paid
		if r := c.stop(end, pl.delay); r != 0 { // the caller gave up as the line let it go
			if paid {
				c.budget.account.Refund() // paid for, but never sent
			}
			resp, err := c.giveUp(a, r, c.held.resp, a.endError(c.held.resp))
			return 0, resp, err, false
		}
		if waited > 0 {
			c.host.count(nBudgetWaits)
		}
		return waited, nil, nil, true
	}
	if c.t.Logger != nil && !errors.Is(c.parent.Err(), context.Canceled) {
		c.t.warnBudget(c.req, end, warnInLine) // (not for a caller who gave up)
	}
	if r := c.stop(end, 0); r != 0 {
		if err == nil {
			err = &statusError{StatusCode: resp.StatusCode}
		}
		c.held.resp = nil
		resp, err = c.giveUp(a, r, nil, err)
		return 0, resp, err, false
	}
	c.host.count(nBudgetRefusals)
	resp, err = c.giveUp(a, ReasonBudget, resp, err)
	return 0, resp, err, false
}

// scheduleEnd returns when the schedule ends of a request whose attempt a
// failed at now, the retry to come planned pl: now, plus the longest wait of
// the retry to come, the longest time each retry after it could take given
// responses like a's (see schedule), and what earlier retries left unused of
// their longest waits (c.budget.unused: below zero where the budget's line
// held one past its own). So the budget never makes a request end later
// than it could with UnlimitedBudget, given the same responses.
func (c *call) scheduleEnd(a *attempt, pl *plan, now time.Time) time.Time {
	took := time.Duration(max(c.t.monoAt(now)-c.sentAt, 0))
	// At most scheduleBeyond, as c.budget.unused: no overflow.
	rest := c.schedule(pl.maxWait, took, pl.source != delayBackoff)
	return now.Add(min(pl.maxWait, scheduleBeyond) + rest + c.budget.unused)
}

// lineEnd returns when a retry planned pl, after attempt a failed at now,
// leaves the line at the latest unless let go, never before its delay ends:
// when it could still go within its request's schedule (see scheduleEnd), but
// no later than a tenth of the time left (at most a second) before the
// caller's deadline, so that the caller gets the last failure rather than the
// deadline's error. A retry from a layer above (its key was sent lately),
// whose line waits have run already, waits its delay only.
func (c *call) lineEnd(a *attempt, pl *plan, now time.Time) time.Time {
	end, earliest := c.scheduleEnd(a, pl, now), now.Add(pl.delay)
	if c.key.prior > 0 {
		end = now
	}
	if dl, ok := c.parent.Deadline(); ok {
		if early := dl.Add(-min(time.Second, dl.Sub(now)/10)); early.Before(end) {
			end = early
		}
	}
	return maxTime(end, earliest)
}

// schedule returns how long the retries of a request after its next attempt
// could take at the slowest, given responses like the last: for each, took
// (the last attempt's time) and the longest wait before it. That wait is
// maxWait, the next attempt's, where the server set it (server); else the
// longest the policy's Backoff draws, chained from maxWait. Its cost does
// not grow with MaxAttempts: once the sum passes the time left before the
// caller's deadline, the schedule outlasts the request, and it returns
// scheduleBeyond; and it asks the Backoff at most scheduleCalls times, the
// retries left after those waiting as long as the last (this package's
// strategies reach their cap by then).
func (c *call) schedule(maxWait, took time.Duration, server bool) time.Duration {
	limit := scheduleBeyond
	if dl, ok := c.parent.Deadline(); ok {
		limit = min(max(dl.Sub(c.t.clock.Now()), 0), limit)
	}
	var total time.Duration
	left := c.max - c.sent - 1 // the retries left after the next
	for calls := 1; left > 0; calls, left = calls+1, left-1 {
		d := maxWait
		if !server {
			d = max(c.p.backoff.Delay(c.retries+calls, maxWait, largestSample), 0)
		}
		maxWait = d
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

// largestSample is the largest uniform sample below 1: the one a Backoff
// draws its longest wait from.
const largestSample = 0x1p0 - 0x1p-53

// satMul returns d*n, or math.MaxInt64 where that overflows. Requires
// d, n >= 0.
func satMul(d time.Duration, n int) time.Duration {
	if d != 0 && int64(n) > math.MaxInt64/int64(d) {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}

// Bounds of schedule: the Backoff calls it makes at most, and the length it
// gives a schedule that lasts longer than the request may (a sum of two of
// them does not overflow).
const (
	scheduleCalls  = 64
	scheduleBeyond = time.Duration(math.MaxInt64 / 2)
)

// maxTime returns the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
