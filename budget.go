package retryhttp

import (
	"github.com/retryhttp/retryhttp/internal/budget"
)

// A Budget, safe for simultaneous use, bounds per host (URL host and port) the retries of the
// Transports sharing it. Each host holds up to credit retries (10 by default), full at first
// and refilled in 10 s: a retry or hedge spends one and gives it back if it succeeds; any
// other success earns ratio of one (0.55 by default).
//   - A retry the server timed (Retry-After, RateLimit, X-RateLimit-Reset) spends nothing.
//   - Any other retry goes at its backoff if the credit pays, unless another request to the
//     host is in flight and another failed it since the host's last success (in 10 s). Else
//     it waits in the host's line while another request to the host is in flight, and is
//     refused (ReasonBudget) when none is.
//   - In line, each success of the host lets go the oldest retries the credit pays for; after a
//     silence of its longest backoff, the oldest goes anyway. When its schedule runs out or its
//     deadline nears, a retry goes if the host's last answer was a success, else is refused.
type Budget struct {
	unlimited bool
	m         budget.Budget // the machinery; its zero value has the default size
}

// NewBudget returns a budget whose hosts each hold up to credit retries
// (and start with them all) and earn ratio of a retry for each success. A
// ratio below zero (or NaN) counts as zero, above 1000 as 1000, and is kept
// to a billionth; a credit below zero counts as zero, above a million as a
// million.
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
