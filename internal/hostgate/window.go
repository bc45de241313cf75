package hostgate

import (
	"math"
	"sync/atomic"
)

// windowSlices is how many slices of time a sliding window is counted in:
// the count of a window of width W forgets events about W/windowSlices at
// a time.
const windowSlices = 10

// slidingCount counts events over a trailing window of windowSlices
// slices of time, without a lock. Each word holds a slice's index in its
// high half and the slice's count in its low half, so that a word left
// from an older slice is recognized and restarted with one
// compare-and-swap. Slices are numbered by sliceOf; the window ending with
// slice e holds slices e-windowSlices+1 to e.
type slidingCount [windowSlices]atomic.Uint64

// sliceOf returns the index of the slice of width nanoseconds holding
// clock, a time on the monotonic scale (clock.Mono), truncated to 32 bits.
func sliceOf(clock, width int64) uint32 {
	return uint32(clock / width)
}

// add counts one event in slice e. A slice's count stops at its maximum.
func (c *slidingCount) add(e uint32) {
	w := &c[e%windowSlices]
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

// sums returns the events a and b counted in the window ending with slice
// e: two counts kept side by side (requests, and those of them accepted),
// summed in one pass, which takes about half the time of two.
func sums(e uint32, a, b *slidingCount) (int64, int64) {
	var n, m int64
	for i := range a {
		if w := a[i].Load(); e-uint32(w>>32) < windowSlices {
			n += int64(uint32(w))
		}
		if w := b[i].Load(); e-uint32(w>>32) < windowSlices {
			m += int64(uint32(w))
		}
	}
	return n, m
}
