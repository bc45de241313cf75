package budget

import (
	"math/bits"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A host's credit pays for its retries. It holds up to the budget's credit
// (and starts full); each retry spends one retry of it, each success earns
// back the budget's ratio of one, and the whole of it refills in 10 s (a
// tenth a second): so a host alone always has the credit, and a dead host
// gets no more retries than the credit, a tenth of it a second, and its
// line's probes. Credit is counted as spent, so that the zero account is
// full, in units of a billionth of a retry, so that a ratio as small as a
// success in a million still earns.

// unit is the part of a retry that credit is counted in.
const unit = 1_000_000_000

// spendLocked spends one retry of credit at now, refilled first, if there
// is that much, and reports whether it did. Requires b.mu held.
func (acc *Account) spendLocked(now time.Time) bool {
	_, credit := acc.b.size()
	acc.refillLocked(now, credit)
	for {
		s := acc.spent.Load()
		if s+unit > credit {
			return false
		}
		if acc.spent.CompareAndSwap(s, s+unit) {
			return true
		}
	}
}

// refillLocked refills the credit for the time since it last did, at
// credit per refill time. Requires b.mu held.
func (acc *Account) refillLocked(now time.Time, credit int64) {
	m := clock.Mono(now)
	elapsed := m - acc.refilled
	if acc.spent.Load() == 0 || acc.refilled == 0 || elapsed < 0 {
		acc.refilled = m // full, first use, or a clock of another world (a bubble's)
		return
	}
	if elapsed >= int64(refill) {
		acc.earn(credit) // the whole credit
		acc.refilled = m
		return
	}
	if give := mulDiv(credit, elapsed, int64(refill)); give > 0 {
		acc.earn(give)
		// The time the grant accounts for, so that the rest of a unit is
		// not lost, however often the credit is read.
		acc.refilled += mulDiv(give, int64(refill), credit)
	}
}

// mulDiv returns a*b/c for a, b, c above zero, where the quotient fits in
// an int64 though the product may not.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// earn adds m units of credit, up to the budget's credit. It takes
// no lock.
func (acc *Account) earn(m int64) {
	for {
		s := acc.spent.Load()
		if s == 0 || m == 0 {
			return
		}
		if acc.spent.CompareAndSwap(s, max(s-m, 0)) {
			return
		}
	}
}
