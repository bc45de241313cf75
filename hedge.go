package retryhttp

import (
	"time"

	"github.com/retryhttp/retryhttp/internal/hostgate"
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
// when a request's first attempt has not answered for a while (After), a
// copy of it is sent too, and the first outcome not to be retried (as the
// policy judges it, Policy.Retryable included) wins; the other attempts
// are canceled, and their bodies drained and closed.
//
// Only requests that may be sent twice are hedged: idempotent ones, or
// those carrying an idempotency key (the same on every copy), whose body can
// be sent again without a copy (GetBody, a buffered body, or none). Hedges
// count as attempts (MaxAttempts), never start past the deadline, stop once
// an attempt's answer asks for a wait (a Retry-After above 0), are paid for by the
// retry budget (a dependency in trouble gets no extra load from hedging),
// and are at most Fraction of a host's requests, so that a shift in latency
// cannot double the load.
//
// By default that while adapts: it is the Quantile of the latency of the
// host's recent successful attempts (to their response headers), within
// [Min, Max], estimated in a fixed-size histogram that forgets the past as
// it fills. Until a host has 20 such attempts, Max is that while. The
// histogram and the hedge counts are kept in the Transport's table of hosts
// (see Transport: past 1024 hosts, idle ones are forgotten).
type Hedge struct {
	// Off switches hedging off, whatever the policy beneath says.
	Off bool

	// After, if positive, is how long a request's attempts go unanswered
	// before a hedge is sent: a fixed time, used instead of the adaptive
	// one.
	After time.Duration

	// Quantile of the recent latencies the adaptive After follows. Zero
	// means 0.95.
	Quantile float64

	// Min and Max bound the adaptive After. Zero means 2 ms and 1 s.
	Min, Max time.Duration

	// MaxHedges is how many copies one request may get. Zero (or
	// negative) means 1, more
	// than 16 means 16: more copies of one request would add load, not cut
	// its latency any further. Each is an attempt: a request gets no more
	// than MaxAttempts-1.
	MaxHedges int

	// Fraction bounds the hedges of a host to this share of its requests,
	// over the last 10 s. Zero means 0.05.
	Fraction float64
}

// compile returns h with its defaults, nil when hedging is off.
func (h *Hedge) compile() *hostgate.Hedge {
	if h == nil || h.Off {
		return nil
	}
	c := &hostgate.Hedge{Fixed: h.After, Quantile: h.Quantile, Min: h.Min, Max: h.Max,
		MaxHedges: h.MaxHedges, Fraction: h.Fraction}
	if !(c.Quantile > 0 && c.Quantile < 1) {
		c.Quantile = defaultHedgeQuantile
	}
	if c.Min <= 0 {
		c.Min = defaultHedgeMin
	}
	if c.Max <= 0 {
		c.Max = defaultHedgeMax
	}
	c.Max = max(c.Max, c.Min)
	if c.MaxHedges <= 0 {
		c.MaxHedges = 1
	}
	c.MaxHedges = min(c.MaxHedges, maxHedgesLimit)
	if !(c.Fraction > 0) {
		c.Fraction = defaultHedgeFraction
	}
	c.Fraction = min(c.Fraction, 1)
	return c
}
