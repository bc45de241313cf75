package retryhttp

import (
	"github.com/retryhttp/retryhttp/internal/budget"
)

// A Budget, safe for simultaneous use, bounds per host the retries of the Transports sharing it.
//   - Alone, it is invisible: a request with no other request to its host (URL host and port)
//     in flight and no failure of another in 10 s gets its policy, each retry paid by credit.
//   - Credit: up to NewBudget's credit retries (the zero Budget's: 10), full at first; each retry
//     or hedge spends one, each success earns ratio of one (0.55); it refills wholly in 10 s.
//   - A retry the credit cannot pay for, with nothing else in flight to its host, is refused at
//     once (ReasonBudget); with others in flight it waits in the host's line, as does any retry
//     with others in flight after another request failed the host since its last success (10 s).
//   - The line: the host's first success lets it go as a ramp (2 in the first 100 ms, then twice
//     those that succeeded); each later success lets one more go if the credit pays; with no
//     news, one goes as a probe after 100 ms, then twice as long each time, up to 5 s. A retry
//     leaves it unsent before its deadline (10 s without one), with ReasonBudget.
//   - So a host failing every attempt gets the credit, a tenth of it a second, and the probes.
//     A server's Retry-After is no failure: such a retry waits what it asks.
type Budget struct {
	unlimited bool
	m         budget.Budget // the machinery; its zero value has the default size
}

// NewBudget returns a budget whose hosts each hold up to credit retries
// (and start with them all) and earn ratio of a retry for each success. A
// ratio below zero (or NaN) counts as zero, above 1000 as 1000; a credit
// below zero counts as zero, above a million as a million.
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
