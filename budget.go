package retryhttp

import (
	"context"
	"time"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/clock"
)

// Defaults of the budget a Transport makes when its Budget is nil, and of
// the zero Budget.
const (
	DefaultBudgetRatio  = 0.6 // retries earned per success
	DefaultBudgetCredit = 10  // retries of credit held at most, and at the start
)

// A Budget bounds the retries of every request that shares it, so that an
// outage does not multiply the load on a failing dependency, and lets the
// retries through again as soon as the dependency is back.
//
// Retries are paid with credit, and credit is earned by successes, not by
// time: a Budget holds up to DefaultBudgetCredit retries of credit (it
// starts full), each retry spends one, and each success (an attempt whose
// outcome is not retried) earns back DefaultBudgetRatio of one. A client
// whose failures are sparse never runs out; one whose dependency is down
// spends its credit once and then earns none, so the dependency sees
// hardly more than the first attempts, for one client as for a fleet.
//
// A retry that finds the credit spent waits in line, within its request's
// deadline and the time its own backoff schedule would have taken, instead
// of failing at once. Each host (URL host, port included) has a line of its
// own, let through by news of that host alone, so that a dead host's
// retries never hold up a healthy host's (the credit is one pool):
//   - A success of the host starts a recovery, which releases waiting retries in
//     rounds of 100 ms, evenly spread over each round: 2 in the first,
//     then twice the retries that succeeded in the round before while no
//     attempt failed in it (slow start), half of them once some did, and
//     none once no retry succeeded (the recovery ends). A released retry
//     then waits its own backoff, so the releases of a round reach the
//     dependency spread out, and the ramp is paced by the dependency's
//     answers, not by the client's other traffic. After a long outage
//     (retries have waited for over 5 s), a recovery starts with 1 release,
//     and a round releases no more retries than half the first attempts
//     that succeeded in the round before (at least 1): a dependency just
//     back meets little more than the client's own load.
//   - While no outcome of the host is reported for a second, the retry at
//     the head of its line goes through as a probe. Each probe doubles the
//     silence the next one needs, up to 32 s, until a success. A client
//     that keeps sending never probes: its first attempts tell.
//
// So a recovering dependency meets a ramp, not a herd, and every caller
// still waiting when it is back is served.
//
// The zero Budget has the default size. A Budget may be shared by several
// Transports, and is safe for simultaneous use; reporting a success costs
// no lock and no allocation unless retries are waiting. A budget counts
// time on the monotonic clock, so a step of the wall clock moves nothing.
type Budget struct {
	unlimited bool
	m         budget.Budget // the machinery; its zero value has the default size
}

// NewBudget returns a budget that holds up to credit retries (and starts
// with them all) and earns ratio of a retry for each success. A ratio
// below zero (or NaN) counts as zero, above 1000 as 1000; a credit below
// zero counts as zero, above a million as a million. With no credit, every
// retry waits in line for news of the dependency.
func NewBudget(ratio float64, credit int) *Budget {
	b := new(Budget)
	b.m.Size(ratio, credit)
	return b
}

// UnlimitedBudget returns a budget that allows every retry: set it as
// Transport.Budget to turn budgeting off.
func UnlimitedBudget() *Budget { return &Budget{unlimited: true} }

// machine returns b's machinery, or nil (which allows every retry) for a
// nil or unlimited Budget.
func (b *Budget) machine() *budget.Budget {
	if b == nil || b.unlimited {
		return nil
	}
	return &b.m
}

// retry asks for one retry at now and reports whether the credit pays for
// it, spending one retry of credit if so. It refuses while other retries
// wait in line: a refused retry may wait.
func (b *Budget) retry(host string, now time.Time) bool { return b.machine().Retry(host, now) }

// refund gives back a retry that retry granted but that was never sent
// (its caller gave up during the wait before it).
func (b *Budget) refund() { b.machine().Refund() }

// succeeded reports an attempt whose outcome is not retried; attempt is its
// number, 1 for a request's first. It reads clk only when retries wait.
func (b *Budget) succeeded(clk clock.Clock, host string, attempt int) {
	b.machine().Succeeded(clk, host, attempt)
}

// failure reports an attempt at now whose outcome is retried.
func (b *Budget) failure(host string, now time.Time) { b.machine().Failure(host, now) }

// wait puts a retry that retry refused in line and blocks until the budget
// releases it (true), or until ctx is done or until passes (false). last
// says that the retry is its request's last attempt.
func (b *Budget) wait(clk clock.Clock, host string, ctx context.Context, until time.Time, last bool) bool {
	return b.machine().Wait(clk, host, ctx, until, last)
}
