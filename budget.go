package retryhttp

import (
	"github.com/retryhttp/retryhttp/internal/budget"
)

// A Budget, safe for simultaneous use, bounds per host the retries of the Transports sharing it.
//   - It never makes a request end later than its policy's schedule allows (the longest waits
//     its Backoff can draw, or the server's Retry-After, plus its attempts' time), nor past its
//     deadline: it refuses a retry, or delays it inside that schedule.
//   - Alone, it is invisible: a request with no other request to its host (URL host and port)
//     in flight and no failure of another in 10 s gets its policy, each retry paid by credit.
//   - Credit: up to NewBudget's credit retries (the zero Budget's: 10), full at first; each retry
//     or hedge spends one, each success earns ratio of one (0.55); it refills wholly in 10 s.
//   - A retry the credit cannot pay for, with nothing else in flight to its host, is refused at
//     once (ReasonBudget). With others in flight it waits in the host's line, as does any retry
//     after another request failed the host since its last success (10 s). When its request's
//     schedule or deadline would not let it wait longer, it leaves the line: it goes if the host
//     is back and has failed no attempt since, and is refused (ReasonBudget) otherwise.
//   - The line lets retries go on the host's successes (a ramp), or one as a probe after a
//     silence of its own longest backoff; each spends a retry of credit, if there is one.
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
