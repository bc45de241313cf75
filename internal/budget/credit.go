package budget

import (
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A host's credit pays for its retries. It holds up to the budget's credit
// (and starts full); each retry spends one retry of it, each success earns
// back the budget's ratio of one, and the whole of it refills in 10 s (a
// tenth a second): so a host alone always has the credit, and a dead host
// gets no more retries than the credit, a tenth of it a second, and its
// line's probes. Credit is counted in thousandths of a retry, as spent, so
// that the zero lane is full.

// spendLocked spends one retry of credit at now, refilled first, if there
// is that much, and reports whether it did. Requires b.mu held.
func (l *Lane) spendLocked(now time.Time) bool {
	_, credit := l.b.size()
	l.refillLocked(now, credit)
	for {
		s := l.spent.Load()
		if s+1000 > credit {
			return false
		}
		if l.spent.CompareAndSwap(s, s+1000) {
			return true
		}
	}
}

// refillLocked refills the credit for the time since it last did, at
// credit per refill time. Requires b.mu held.
func (l *Lane) refillLocked(now time.Time, credit int64) {
	m := clock.Mono(now)
	elapsed := m - l.refilled
	if l.spent.Load() == 0 || l.refilled == 0 || elapsed < 0 {
		l.refilled = m // full, first use, or a clock of another world (a bubble's)
		return
	}
	if elapsed >= int64(refill) {
		l.earn(credit) // the whole credit
		l.refilled = m
		return
	}
	refillUs := int64(refill / time.Microsecond)
	if give := credit * (elapsed / 1000) / refillUs; give > 0 { // no overflow
		l.earn(give)
		// The time the grant accounts for, so that the rest of a milli-retry
		// is not lost, however often the credit is read.
		l.refilled += give * refillUs / credit * 1000
	}
}

// earn adds m milli-retries of credit, up to the budget's credit. It takes
// no lock.
func (l *Lane) earn(m int64) {
	for {
		s := l.spent.Load()
		if s == 0 || m == 0 {
			return
		}
		if l.spent.CompareAndSwap(s, max(s-m, 0)) {
			return
		}
	}
}
