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
	DefaultBudgetRatio  = 0.55 // retries earned per success
	DefaultBudgetCredit = 10   // retries of credit held at most, and at the start
)

// A Budget bounds the retries of every request that shares it, so that an
// outage does not multiply the load on a failing dependency, and lets them
// through again as soon as the dependency is back.
//
// Retries spend attempts on evidence, judged per host (URL host, port
// included) inside the one budget, so that a dead host never holds up a
// healthy host's retries:
//   - A host is down once an attempt to it failed, until its next success:
//     an error, a timeout, or a retryable status without a wait
//     (503 without Retry-After, X-Should-Retry: false, x-envoy-overloaded
//     and the like are overload evidence). A server's explicit wait
//     (Retry-After or RateLimit on a 429 or 503) is not: such retries wait
//     what the server asked and count as no failure.
//   - While its host is down, a retry waits in the host's line instead of
//     spending its next attempt, within its caller's deadline (without
//     one, 10 s or its backoff schedule, whichever is longer). A probe
//     tests the host at backoff pace: after 100 to 200 ms without news of
//     it (jittered, so that clients whose lines formed together do not
//     probe together), the first retry in line goes, and each probe
//     doubles the silence the next needs, up to 5 s (10 s with the
//     jitter). The last attempt of a request with a deadline probes only
//     after the others, at 2 s of silence or twice the probes' pace,
//     whichever is longer, so that a request alone in an outage keeps it
//     for the host's return.
//   - The host's first success lets the line go as a ramp: rounds of
//     100 ms, 2 retries in the first, then twice the retries that
//     succeeded in the round before while none failed, half of them once
//     some did. After a long outage (no success for 5 s) a round lets go
//     no more than half the first attempts that succeeded in the round
//     before (at least 1): a dependency just back meets little more than
//     the client's own load.
//   - Otherwise a retry is paid with credit earned by successes, not by
//     time: a Budget holds up to DefaultBudgetCredit retries (it starts
//     full), each retry spends one, and each success earns back
//     DefaultBudgetRatio of one, as Finagle's and Envoy's budgets allow a
//     share of requests. A retry the credit cannot pay for waits in line,
//     and each success of its host lets one go once the credit pays for it.
//
// So a client whose failures are scattered (resets, a brownout) retries
// them as its successes pay; one whose dependency is down sends hardly
// more than its first attempts and a probe, for one client as for a fleet;
// and every caller still waiting when the dependency is back is served.
//
// The zero Budget has the default size. A Budget may be shared by several
// Transports, and is safe for simultaneous use; reporting a success costs
// no lock and no allocation unless retries wait or a host failed last. A
// budget counts time on the monotonic clock, so a step of the wall clock
// moves nothing.
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

// hears reports whether the budget hears of failures (failure): not
// UnlimitedBudget's, so that a failure's evidence is not looked for there.
func (b *Budget) hears() bool { return b.machine() != nil }

// failure reports an attempt at now whose outcome is retried.
func (b *Budget) failure(host string, now time.Time) { b.machine().Failure(host, now) }

// wait puts a retry that retry refused in line and blocks until the budget
// releases it (true), or until ctx is done or until passes (false); rnd
// jitters the probes' pace. last
// says that the retry is its request's last attempt, to keep for the
// host's return: it probes only after the others (see lane.prober).
func (b *Budget) wait(clk clock.Clock, rnd func() float64, host string, ctx context.Context, until time.Time, last bool) bool {
	return b.machine().Wait(clk, rnd, host, ctx, until, last)
}
