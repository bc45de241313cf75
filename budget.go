package retryhttp

import (
	"math"
	"sync/atomic"
	"time"
)

// Defaults of the budget a Transport makes when its Budget is nil: the
// defaults of Finagle's RetryBudget and Linkerd's retry budgets.
const (
	DefaultBudgetRatio     = 0.2
	DefaultBudgetMinPerSec = 10
	DefaultBudgetWindow    = 10 * time.Second
)

// budgetSlices is how many slices of time a Budget window is counted in.
const budgetSlices = 10

// A Budget bounds the retries of every request that shares it, so that an
// outage does not multiply the load on a failing dependency: over a sliding
// window, retries may not exceed ratio times the logical requests, plus a
// floor of minPerSec retries per second of the window, so that a quiet
// client can still retry. With the defaults (20 %, 10/s, 10 s) a client
// sending many requests into a full outage sends about 1.2 attempts per
// request instead of MaxAttempts (precisely at most 1 + ratio +
// floor/requests per window: 1.25 at 200 requests per second).
//
// The window remembers the healthy traffic before an outage: retries it
// did not need are credit that the outage's first seconds may spend, as in
// Finagle. After one window the outage has only its own requests' credit.
//
// The zero Budget has the default size. A Budget is safe for simultaneous
// use and lock-free: each slice of the window is two atomic words. Time
// enters its methods as a parameter; pass time.Now(), whose monotonic
// reading keeps the budget's windows true across steps of the wall clock.
type Budget struct {
	ratio     int64 // retries allowed per 1000 requests
	floor     int64 // retries allowed per window, times 1000
	slice     int64 // nanoseconds per slice
	unlimited bool
	buckets   [budgetSlices]bucket
}

// bucket counts one slice of time. Each word holds the slice's index (its
// low 32 bits) in its high half and the count in its low half, so a word
// from an older slice is recognized and restarted in one compare-and-swap.
type bucket struct {
	requests atomic.Uint64
	retries  atomic.Uint64
	_        [48]byte // keep buckets on separate cache lines
}

// NewBudget returns a budget allowing, over any window of the given length,
// retries up to ratio times the requests plus minPerSec retries per second
// of the window. A zero or negative window means DefaultBudgetWindow;
// ratio and minPerSec below zero (or NaN) count as zero. A ratio above
// 10000 counts as 10000: more than any request can retry, and small enough
// that Retry's sums cannot overflow.
func NewBudget(ratio, minPerSec float64, window time.Duration) *Budget {
	if window <= 0 {
		window = DefaultBudgetWindow
	}
	if !(ratio > 0) {
		ratio = 0
	}
	if !(minPerSec > 0) {
		minPerSec = 0
	}
	ratio = min(ratio, 10000)
	slice := max(int64(window)/budgetSlices, 1)
	return &Budget{
		ratio: clampInt64(math.Round(ratio * 1000)),
		floor: clampInt64(math.Round(minPerSec * float64(slice*budgetSlices) / float64(time.Second) * 1000)),
		slice: slice,
	}
}

// UnlimitedBudget returns a budget that allows every retry: set it as
// Transport.Budget to turn budgeting off.
func UnlimitedBudget() *Budget { return &Budget{unlimited: true} }

// size returns the budget's parameters: those of NewBudget, or the
// defaults for a zero Budget.
func (b *Budget) size() (ratio, floor, slice int64) {
	if b.slice == 0 {
		return DefaultBudgetRatio * 1000,
			DefaultBudgetMinPerSec * int64(DefaultBudgetWindow/time.Second) * 1000,
			int64(DefaultBudgetWindow) / budgetSlices
	}
	return b.ratio, b.floor, b.slice
}

func clampInt64(f float64) int64 {
	if f >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return int64(f)
}

// Request records a logical request made at now: it earns the budget
// ratio retries.
func (b *Budget) Request(now time.Time) {
	if b == nil || b.unlimited {
		return
	}
	_, _, slice := b.size()
	e := epoch(now, slice)
	increment(&b.buckets[e%budgetSlices].requests, e)
}

// Retry asks for one retry at now. It reports whether the budget allows it,
// and if so counts it.
func (b *Budget) Retry(now time.Time) bool {
	if b == nil || b.unlimited {
		return true
	}
	ratio, floor, slice := b.size()
	e := epoch(now, slice)
	w := &b.buckets[e%budgetSlices].retries
	increment(w, e)
	requests, retries := b.sums(e)
	// retries includes this one: a concurrent caller that sees the sum
	// before this increment is balanced by this caller seeing its.
	if retries*1000 <= ratio*requests+floor {
		return true
	}
	decrement(w, e)
	return false
}

// unretry takes back a retry that Retry(now) granted but that was never
// sent (the caller gave up during its wait).
func (b *Budget) unretry(now time.Time) {
	if b == nil || b.unlimited {
		return
	}
	_, _, slice := b.size()
	e := epoch(now, slice)
	decrement(&b.buckets[e%budgetSlices].retries, e)
}

// clockOrigin anchors the budget's clock. Times taken with time.Now carry a
// monotonic reading, and now.Sub(clockOrigin) uses it: a step of the wall
// clock (NTP, a manual change) neither re-grants a spent budget nor expires
// a window early.
var (
	clockOrigin     = time.Now()
	clockOriginUnix = clockOrigin.UnixNano()
)

// epoch returns the index of the slice holding now, truncated to 32 bits.
// now is placed on the Unix time line by the monotonic clock: the wall
// time at clockOrigin plus the monotonic time since (for a time without a
// monotonic reading, that is its own wall time). (Two slices 2^32 slices
// apart share an index: with the default 1 s slices, 136 years apart.)
func epoch(now time.Time, slice int64) uint32 {
	d := clockOriginUnix + int64(now.Sub(clockOrigin))
	e := d / slice
	if d < 0 && d%slice != 0 { // floor, so that every slice is slice long
		e--
	}
	return uint32(e)
}

// sums returns the requests and retries counted in the window ending with
// slice e.
func (b *Budget) sums(e uint32) (requests, retries int64) {
	for i := range b.buckets {
		requests += count(b.buckets[i].requests.Load(), e)
		retries += count(b.buckets[i].retries.Load(), e)
	}
	return requests, retries
}

// count returns the count of word w if its slice lies in the window ending
// with slice e.
func count(w uint64, e uint32) int64 {
	if e-uint32(w>>32) >= budgetSlices {
		return 0
	}
	return int64(uint32(w))
}

func increment(w *atomic.Uint64, e uint32) {
	for {
		old := w.Load()
		next := uint64(e)<<32 | 1
		if uint32(old>>32) == e {
			if uint32(old) == math.MaxUint32 {
				return
			}
			next = old + 1
		}
		if w.CompareAndSwap(old, next) {
			return
		}
	}
}

func decrement(w *atomic.Uint64, e uint32) {
	for {
		old := w.Load()
		if uint32(old>>32) != e || uint32(old) == 0 {
			return
		}
		if w.CompareAndSwap(old, old-1) {
			return
		}
	}
}
