package hostgate

import "time"

// ThrottleMinRequests is how many requests the window must hold before
// throttling rejects any attempt (see the root's Throttle).
const ThrottleMinRequests = 20

// Throttle is the gate of adaptive throttling, as the Google SRE book
// describes it ("Handling Overload"): it rejects an attempt to a host with
// probability max(0, (requests - K*accepts) / (requests + 1)) over a
// trailing window. A nil *Throttle (throttling off) admits every attempt.
type Throttle struct {
	k1000 int64 // K, times 1000
	slice int64 // nanoseconds per slice of the window (windowSlices of them)
}

// NewThrottle returns the gate for K k and a window of w, both positive.
func NewThrottle(k float64, w time.Duration) *Throttle {
	return &Throttle{k1000: int64(min(k, 1e6) * 1000), slice: max(int64(w)/windowSlices, 1)}
}

// K returns the gate's K.
func (p *Throttle) K() float64 { return float64(p.k1000) / 1000 }

// Window returns the gate's window.
func (p *Throttle) Window() time.Duration { return time.Duration(p.slice * windowSlices) }

// scope: throttling is asked about first attempts and retries (not
// hedges), and told whether the host accepted each outcome.
func (p *Throttle) scope() (Kind, Event) { return KindFirst | KindRetry, Accepted | Refused }

// admit rejects an attempt with the probability of the host's counts.
func (p *Throttle) admit(h *Host, _ Kind, now int64, rand func() float64) bool {
	return p == nil || !stateIn[throttleState](h, throttleSlot).rejects(p, now, rand())
}

// record counts an outcome of an attempt sent to h.
func (p *Throttle) record(h *Host, e Event, now int64) {
	if p != nil && e&(Accepted|Refused) != 0 {
		stateIn[throttleState](h, throttleSlot).record(p, now, e == Accepted)
	}
}

// throttleState counts one host's requests and accepts over the window.
type throttleState struct {
	requests, accepts slidingCount
}

// rejects reports whether an attempt at clock (on the monotonic scale:
// clock.Mono) is to be rejected in the client, u being a uniform sample in
// [0, 1). A rejected attempt counts as a request at once; one that is sent
// counts when its outcome is recorded, so that a burst of attempts still in
// flight is not taken for rejections. Nothing is rejected while the window
// holds fewer than ThrottleMinRequests requests: until then every request
// counted is an attempt the host answered.
func (h *throttleState) rejects(p *Throttle, clock int64, u float64) bool {
	e := sliceOf(clock, p.slice)
	requests, accepts := sums(e, &h.requests, &h.accepts)
	excess := requests*1000 - p.k1000*accepts
	if requests < ThrottleMinRequests || excess <= 0 || u*float64(requests+1)*1000 >= float64(excess) {
		return false
	}
	h.requests.add(e)
	return true
}

// record counts an attempt sent at about clock, and whether the host
// accepted it.
func (h *throttleState) record(p *Throttle, clock int64, accepted bool) {
	e := sliceOf(clock, p.slice)
	h.requests.add(e)
	if accepted {
		h.accepts.add(e)
	}
}
