package retryhttp

import (
	"math"
	"time"
)

// Default bounds of the backoff strategies: a zero Base or Cap means these.
const (
	defaultBase = 100 * time.Millisecond
	defaultCap  = 10 * time.Second
)

// A Backoff computes the wait before a retry.
//
// Delay is called with n, the number of retries already made (0 before the
// first retry), prev, the wait before the previous retry (0 before the first),
// and u, a uniform random sample in [0, 1). It must be a pure function of its
// arguments: one Backoff serves every concurrent request of a Transport, and
// the Transport supplies the randomness. A negative result is treated as 0.
// prev is the wait the Transport made, the budget's line included (see
// RetryEvent.Delay). A request's schedule, inside which alone the budget may
// delay a retry, is the sum of its retries' longest waits: for any Backoff,
// its Delay for the largest sample below 1, given the longest wait before.
//
// The strategies of this package are the formulas of the AWS Architecture
// Blog article "Exponential Backoff And Jitter" (Marc Brooker, 2015), with
// the article's attempt equal to n: the first retry waits up to Base (Full
// Jitter draws from [0, Base)). The article's simulator
// (awslabs/aws-arch-backoff-simulator) counts the failure before its first
// sleep, so its first sleep is the formula at attempt 1, up to twice its
// base: the range of each wait here is half the simulator's for the same
// retry (until the cap), and a Base twice the simulator's base gives its
// sleeps exactly. Decorrelated Jitter does not depend on n and starts as
// the simulator does (see DecorrelatedJitter). A random draw in [0, 1) makes
// each range half-open, and waits are truncated to whole nanoseconds. The
// strategies are overflow-safe for any n.
type Backoff interface {
	Delay(n int, prev time.Duration, u float64) time.Duration
}

var (
	_ Backoff = FullJitter{}
	_ Backoff = EqualJitter{}
	_ Backoff = DecorrelatedJitter{}
	_ Backoff = Constant(0)
)

// FullJitter waits a uniform random time in [0, min(Cap, Base*2^n)): the
// AWS article's "Full Jitter", the default strategy. The first retry waits
// in [0, Base), the second in [0, 2*Base). It spreads a crowd of clients the
// most for the least total waiting.
// A zero Base means 100 ms, a zero Cap 10 s.
type FullJitter struct{ Base, Cap time.Duration }

// Delay returns U(0, min(Cap, Base*2^n)).
func (f FullJitter) Delay(n int, _ time.Duration, u float64) time.Duration {
	base, cap := bounds(f.Base, f.Cap)
	return scale(expCapped(base, cap, n), u)
}

// EqualJitter waits half of min(Cap, Base*2^n) plus a uniform random part of
// the other half: the AWS article's "Equal Jitter". The first retry waits in
// [Base/2, Base), the second in [Base, 2*Base). It never waits less than
// half the exponential delay.
// A zero Base means 100 ms, a zero Cap 10 s.
type EqualJitter struct{ Base, Cap time.Duration }

// Delay returns v/2 + U(0, v/2) with v = min(Cap, Base*2^n).
func (e EqualJitter) Delay(n int, _ time.Duration, u float64) time.Duration {
	base, cap := bounds(e.Base, e.Cap)
	v := expCapped(base, cap, n)
	half := v / 2
	return half + scale(v-half, u)
}

// DecorrelatedJitter waits min(Cap, U(Base, 3*prev)), where prev is the
// previous wait and Base before the first retry: the AWS article's
// "Decorrelated Jitter", sleep = min(cap, random_between(base, sleep*3)),
// with the article's simulator's first sleep of Base. The first retry waits
// in [Base, 3*Base), the second in [Base, 3*w) after a first wait w. The
// wait grows from the previous one rather than from the retry count.
//
// A Transport passes as prev the wait it made before the previous retry,
// which is the server's when Retry-After or RateLimit set it: the chain then
// goes on from that wait, where the article's goes on from its own last
// draw. When 3*prev is less than Base the wait is Base (the article would
// draw between 3*sleep and base).
// A zero Base means 100 ms, a zero Cap 10 s.
type DecorrelatedJitter struct{ Base, Cap time.Duration }

// Delay returns min(Cap, U(Base, 3*prev)), with prev = Base when prev <= 0.
func (d DecorrelatedJitter) Delay(_ int, prev time.Duration, u float64) time.Duration {
	base, cap := bounds(d.Base, d.Cap)
	if prev <= 0 {
		prev = base
	}
	hi := time.Duration(math.MaxInt64)
	if prev <= math.MaxInt64/3 {
		hi = 3 * prev
	}
	if hi < base {
		hi = base
	}
	v := base + scale(hi-base, u)
	return min(v, cap)
}

// Constant waits the same time before every retry.
type Constant time.Duration

// Delay returns time.Duration(c).
func (c Constant) Delay(int, time.Duration, float64) time.Duration { return time.Duration(c) }

// bounds returns a strategy's Base and Cap, zero ones replaced by the defaults.
func bounds(base, cap time.Duration) (time.Duration, time.Duration) {
	if base <= 0 {
		base = defaultBase
	}
	if cap <= 0 {
		cap = defaultCap
	}
	return base, cap
}

// expCapped returns min(cap, base<<n) without overflow. Requires base, cap > 0.
func expCapped(base, cap time.Duration, n int) time.Duration {
	if n < 0 {
		n = 0
	}
	if n >= 63 || base > cap>>uint(n) {
		return cap
	}
	return base << uint(n)
}

// scale returns d*u for u in [0, 1), truncated to whole nanoseconds.
func scale(d time.Duration, u float64) time.Duration {
	if u <= 0 || d <= 0 {
		return 0
	}
	if u >= 1 {
		return d
	}
	v := float64(d) * u
	if v >= float64(d) { // rounding near math.MaxInt64
		return d
	}
	return time.Duration(v)
}
