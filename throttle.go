package retryhttp

import (
	"errors"
	"math"
	"time"
)

// ErrThrottled is wrapped by the error of a request that adaptive
// throttling (Policy.Throttle) rejected in the client: it was never sent.
var ErrThrottled = errors.New("retryhttp: throttled in the client (the host rejects most requests)")

// Defaults of a Throttle.
const (
	defaultThrottleK      = 2
	defaultThrottleWindow = 10 * time.Second
)

// throttleMinRequests is how many requests the window must hold before
// throttling rejects any attempt: see Throttle.
const throttleMinRequests = 20

// Throttle configures client-side adaptive throttling for a host, as the
// Google SRE book describes it ("Handling Overload"): the Transport counts,
// over a trailing window, the attempts it was asked to send to the host
// (requests: those it rejected, and those sent, once their outcome is
// known) and those the host accepted (any outcome but a transient failure:
// a 503, a 429, a refused connection...), and rejects each new attempt,
// first or retry, in the client with probability
//
//	max(0, (requests - K*accepts) / (requests + 1))
//
// A host that accepts everything is never throttled. One that accepts a
// third of what it is sent gets about K times what it accepts, and the rest
// fail at once with ErrThrottled (ReasonThrottled) instead of adding to its
// overload; as it recovers, accepts rise and the throttling fades within a
// window.
//
// No attempt is rejected while the window holds fewer than 20 requests
// (so a host sent fewer than 2 a second, at the default window, is never
// throttled): so few answers do not tell a host's state from chance, and a
// rejection made on them feeds on itself, counted as a request that no
// accept can follow. Without that floor, one reset among a host's first
// answers (requests 1, accepts 0: p = 1/2) could throttle, for tens of
// seconds, a host that accepts 80 % of what it is sent: each rejection
// raises the next one's probability toward requests/(requests+1), and once
// most attempts are rejected the share sent grows back only K times the
// share accepted per window.
//
// The counts are kept per host (URL host, port included), in the
// Transport's per-host state: at most 1024 hosts, shared with hedging, a
// host beyond that replacing the one seen first. Counting is lock-free.
type Throttle struct {
	// K is how many requests per accepted one the host may be sent before
	// the client rejects any. Zero means 2; negative turns
	// throttling off (to switch it off for one host).
	K float64

	// Window is how far back requests and accepts are counted. Zero means
	// 10 s.
	Window time.Duration
}

// throttlePolicy is a Throttle converted for use.
type throttlePolicy struct {
	k1000 int64 // K, times 1000
	slice int64 // nanoseconds per slice of the window (windowSlices of them)
}

func (t *Throttle) compile() *throttlePolicy {
	if t == nil || t.K < 0 || math.IsNaN(t.K) {
		return nil
	}
	k, w := t.K, t.Window
	if k == 0 {
		k = defaultThrottleK
	}
	if w <= 0 {
		w = defaultThrottleWindow
	}
	return &throttlePolicy{k1000: int64(min(k, 1e6) * 1000), slice: max(int64(w)/windowSlices, 1)}
}

// throttleState returns the throttling counts of host h.
func throttleState(h *hostState) *hostThrottle { return stateIn[hostThrottle](h, throttleSlot) }

var _ hostGate = (*throttlePolicy)(nil)

// scope: throttling is asked about first attempts and retries (not
// hedges), and told whether the host accepted each outcome.
func (p *throttlePolicy) scope() (attemptKind, hostEvent) {
	return firstAttempt | retryAttempt, hostAccepted | hostRefused
}

// admit rejects an attempt with the probability of the host's counts. A
// nil p (throttling off) admits every attempt.
func (p *throttlePolicy) admit(h *hostState, _ attemptKind, now int64, rand func() float64) bool {
	return p == nil || !throttleState(h).rejects(p, now, rand())
}

// record counts an outcome of an attempt sent to h.
func (p *throttlePolicy) record(h *hostState, e hostEvent, now int64) {
	if p != nil && e&(hostAccepted|hostRefused) != 0 {
		throttleState(h).record(p, now, e == hostAccepted)
	}
}

// hostThrottle counts one host's requests and accepts over the window.
type hostThrottle struct {
	requests, accepts slidingCount
}

// rejects reports whether an attempt at clock (on the monotonic scale:
// clock.Mono) is to be rejected in the client, u being a uniform sample in
// [0, 1). A rejected attempt counts as a request at once; one that is sent
// counts when its outcome is recorded, so that a burst of attempts still in
// flight is not taken for rejections. Nothing is rejected while the window
// holds fewer than throttleMinRequests requests: until then every request
// counted is an attempt the host answered.
func (h *hostThrottle) rejects(p *throttlePolicy, clock int64, u float64) bool {
	e := sliceOf(clock, p.slice)
	requests, accepts := sums(e, &h.requests, &h.accepts)
	excess := requests*1000 - p.k1000*accepts
	if requests < throttleMinRequests || excess <= 0 || u*float64(requests+1)*1000 >= float64(excess) {
		return false
	}
	h.requests.add(e)
	return true
}

// record counts an attempt sent at about clock, and whether the host
// accepted it.
func (h *hostThrottle) record(p *throttlePolicy, clock int64, accepted bool) {
	e := sliceOf(clock, p.slice)
	h.requests.add(e)
	if accepted {
		h.accepts.add(e)
	}
}
