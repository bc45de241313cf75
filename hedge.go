package retryhttp

import (
	"math"
	"sync/atomic"
	"time"
)

// Defaults of a Hedge.
const (
	defaultHedgeQuantile = 0.95
	defaultHedgeMin      = 2 * time.Millisecond
	defaultHedgeMax      = time.Second
	defaultHedgeFraction = 0.05
)

// maxHedgesLimit bounds Hedge.MaxHedges.
const maxHedgesLimit = 16

// Hedge configures hedged requests ("The Tail at Scale", Dean and Barroso):
// when a request's first attempt has not answered after a delay, a copy of
// it is sent too, and the first answer that is not a retryable failure
// wins; the other attempts are canceled, and their bodies drained and
// closed.
//
// Only requests that may be sent twice are hedged: idempotent ones, or
// those carrying an idempotency key (the same on every copy), whose body can
// be sent again without a copy (GetBody, a buffered body, or none). Hedges
// count as attempts (MaxAttempts), never start past the deadline, stop once
// an attempt's answer asks for a wait (Retry-After), are paid for by the
// retry budget (a dependency in trouble gets no extra load from hedging),
// and are at most Fraction of a host's requests, so that a shift in latency
// cannot double the load.
//
// By default the delay adapts: it is the Quantile of the latency of the
// host's recent successful attempts (to their response headers), within
// [Min, Max], estimated in a fixed-size histogram that forgets the past as
// it fills. Until a host has 20 such attempts, Max is the delay. The
// histogram and the hedge counts are kept in the Transport's per-host
// state: at most 1024 hosts, shared with throttling, a host beyond that
// replacing the one seen first.
type Hedge struct {
	// Delay, if positive, is a fixed delay, used instead of the adaptive
	// one.
	Delay time.Duration

	// Quantile of the recent latencies the adaptive delay follows. Zero
	// means 0.95.
	Quantile float64

	// Min and Max bound the adaptive delay. Zero means 2 ms and 1 s.
	Min, Max time.Duration

	// MaxHedges is how many copies one request may get. Zero means 1, more
	// than 16 means 16: more copies of one request would add load, not cut
	// its latency any further. Each is an attempt: a request gets no more
	// than MaxAttempts-1.
	MaxHedges int

	// Fraction bounds the hedges of a host to this share of its requests,
	// over the last 10 s. Zero means 0.05.
	Fraction float64
}

// hedgePolicy is a Hedge converted for use.
type hedgePolicy struct {
	fixed     time.Duration
	quantile  float64
	min, max  time.Duration
	maxHedges int
	fraction  float64
}

func (h *Hedge) compile() *hedgePolicy {
	if h == nil || h.MaxHedges < 0 {
		return nil
	}
	c := &hedgePolicy{fixed: h.Delay, quantile: h.Quantile, min: h.Min, max: h.Max,
		maxHedges: h.MaxHedges, fraction: h.Fraction}
	if !(c.quantile > 0 && c.quantile < 1) {
		c.quantile = defaultHedgeQuantile
	}
	if c.min <= 0 {
		c.min = defaultHedgeMin
	}
	if c.max <= 0 {
		c.max = defaultHedgeMax
	}
	c.max = max(c.max, c.min)
	if c.maxHedges == 0 {
		c.maxHedges = 1
	}
	c.maxHedges = min(c.maxHedges, maxHedgesLimit)
	if !(c.fraction > 0) {
		c.fraction = defaultHedgeFraction
	}
	c.fraction = min(c.fraction, 1)
	return c
}

// Latency histogram: buckets whose bounds grow by 2^(1/4) (19 % apart)
// from 100 µs, up to about 100 s.
const (
	latencyBuckets = 80
	latencyFloor   = 100 * time.Microsecond
	latencyMinimum = 20   // observations before the quantile is trusted
	latencyHalve   = 2000 // observations after which every count is halved
)

// hostHedge is what a Transport knows of one host for hedging: its recent
// latencies (the race reads its delay from them) and how many of its
// requests were hedged (the hedge fraction, a gate). Lock-free; kept in the
// host's hostState, hedgeSlot.
type hostHedge struct {
	buckets [latencyBuckets]atomic.Uint32
	seen    atomic.Uint32 // observations since the last halving
	total   atomic.Int64  // observations in the histogram, about

	requests, hedges slidingCount // over the last hedgeWindow: the hedge fraction
}

// hedgeWindow is how far back the hedge fraction counts a host's requests
// and hedges.
const hedgeWindow = 10 * time.Second

// hedgeState returns the hedging state of host h.
func hedgeState(h *hostState) *hostHedge { return stateIn[hostHedge](h, hedgeSlot) }

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

// observe records the latency of a successful attempt.
func (h *hostHedge) observe(d time.Duration) {
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

// delay returns the hedge delay for the host under p.
func (h *hostHedge) delay(p *hedgePolicy) time.Duration {
	if p.fixed > 0 {
		return p.fixed
	}
	total := h.total.Load()
	if total < latencyMinimum {
		return p.max
	}
	want := int64(math.Ceil(p.quantile * float64(total)))
	var sum int64
	for i := range h.buckets {
		sum += int64(h.buckets[i].Load())
		if sum >= want {
			return min(max(bucketTop(i), p.min), p.max)
		}
	}
	return p.max
}

var _ hostGate = (*hedgePolicy)(nil)

// scope: the hedge fraction is asked about hedges, and told of the
// requests that may be hedged as they start.
func (p *hedgePolicy) scope() (attemptKind, hostEvent) { return hedgeAttempt, requestStarts }

// admit lets a hedge go if one more keeps the host's hedges within
// p.fraction of its requests, and counts it if so. A nil p admits every
// attempt.
func (p *hedgePolicy) admit(h *hostState, _ attemptKind, now int64, _ func() float64) bool {
	return p == nil || hedgeState(h).mayHedge(p, now)
}

// record counts a request that may be hedged as it starts.
func (p *hedgePolicy) record(h *hostState, e hostEvent, now int64) {
	if p != nil && e == requestStarts {
		hedgeState(h).request(now)
	}
}

// request counts a request that may be hedged, at clock.
func (h *hostHedge) request(clock int64) {
	h.requests.add(sliceOf(clock, int64(hedgeWindow)/windowSlices))
}

// mayHedge reports whether one more hedge at clock keeps the host's hedges
// within p.fraction of its requests, and counts it if so.
func (h *hostHedge) mayHedge(p *hedgePolicy, clock int64) bool {
	e := sliceOf(clock, int64(hedgeWindow)/windowSlices)
	requests, hedges := sums(e, &h.requests, &h.hedges)
	if float64(hedges+1) > p.fraction*float64(requests)+1 {
		return false
	}
	h.hedges.add(e)
	return true
}
