package hostgate

import (
	"math"
	"sync/atomic"
	"time"
)

// Hedge is the compiled policy of hedging (the root's Hedge with its
// defaults), and the gate of the hedge fraction: a hedge goes only while
// a host's hedges stay within Fraction of its requests. A nil *Hedge
// (hedging off) admits every attempt.
type Hedge struct {
	Fixed     time.Duration // a fixed delay, if positive
	Quantile  float64       // of the recent latencies the adaptive delay follows
	Min, Max  time.Duration // bounds of the adaptive delay
	MaxHedges int           // copies of one request at most
	Fraction  float64       // of a host's requests hedged at most
}

// Latency histogram: buckets whose bounds grow by 2^(1/4) (19 % apart)
// from 100 µs, up to about 100 s.
const (
	latencyBuckets = 80
	latencyFloor   = 100 * time.Microsecond
	latencyMinimum = 20   // observations before the quantile is trusted
	latencyHalve   = 2000 // observations after which every count is halved
)

// HedgeState is what a Transport knows of one host for hedging: its recent
// latencies (the race reads its delay from them) and how many of its
// requests were hedged (the hedge fraction, a gate). Lock-free; kept in the
// host's Host, hedgeSlot.
type HedgeState struct {
	buckets [latencyBuckets]atomic.Uint32
	seen    atomic.Uint32 // observations since the last halving
	total   atomic.Int64  // observations in the histogram, about

	requests, hedges slidingCount // over the last hedgeWindow: the hedge fraction
}

// hedgeWindow is how far back the hedge fraction counts a host's requests
// and hedges.
const hedgeWindow = 10 * time.Second

// HedgeOf returns the hedging state of host h.
func HedgeOf(h *Host) *HedgeState { return stateIn[HedgeState](h, hedgeSlot) }

func latencyBucket(d time.Duration) int {
	if d <= latencyFloor {
		return 0
	}
	b := int(4 * math.Log2(float64(d)/float64(latencyFloor)))
	return min(b, latencyBuckets-1)
}

// bucketTop returns the upper bound of bucket b.
func bucketTop(b int) time.Duration {
	return time.Duration(float64(latencyFloor) * math.Exp2(float64(b+1)/4))
}

// Observe records the latency of a successful attempt.
func (h *HedgeState) Observe(d time.Duration) {
	h.buckets[latencyBucket(d)].Add(1)
	h.total.Add(1)
	if h.seen.Add(1) == latencyHalve {
		// Forget the past by half: old latencies weigh less and less.
		h.seen.Store(0)
		var total int64
		for i := range h.buckets {
			for {
				v := h.buckets[i].Load()
				if h.buckets[i].CompareAndSwap(v, v/2) {
					total += int64(v / 2)
					break
				}
			}
		}
		h.total.Store(total)
	}
}

// Delay returns the hedge delay for the host under p.
func (h *HedgeState) Delay(p *Hedge) time.Duration {
	if p.Fixed > 0 {
		return p.Fixed
	}
	total := h.total.Load()
	if total < latencyMinimum {
		return p.Max
	}
	want := int64(math.Ceil(p.Quantile * float64(total)))
	var sum int64
	for i := range h.buckets {
		sum += int64(h.buckets[i].Load())
		if sum >= want {
			return min(max(bucketTop(i), p.Min), p.Max)
		}
	}
	return p.Max
}

// scope: the hedge fraction is asked about hedges, and told of the
// requests that may be hedged as they start.
func (p *Hedge) scope() (Kind, Event) { return KindHedge, RequestStarts }

// admit lets a hedge go if one more keeps the host's hedges within
// p.Fraction of its requests, and counts it if so. A nil p admits every
// attempt.
func (p *Hedge) admit(h *Host, _ Kind, now int64, _ func() float64) bool {
	return p == nil || HedgeOf(h).mayHedge(p, now)
}

// record counts a request that may be hedged as it starts.
func (p *Hedge) record(h *Host, e Event, now int64) {
	if p != nil && e == RequestStarts {
		HedgeOf(h).request(now)
	}
}

// request counts a request that may be hedged, at clock.
func (h *HedgeState) request(clock int64) {
	h.requests.add(sliceOf(clock, int64(hedgeWindow)/windowSlices))
}

// mayHedge reports whether one more hedge at clock keeps the host's hedges
// within p.Fraction of its requests, and counts it if so.
func (h *HedgeState) mayHedge(p *Hedge, clock int64) bool {
	e := sliceOf(clock, int64(hedgeWindow)/windowSlices)
	requests, hedges := sums(e, &h.requests, &h.hedges)
	if float64(hedges+1) > p.Fraction*float64(requests)+1 {
		return false
	}
	h.hedges.add(e)
	return true
}
