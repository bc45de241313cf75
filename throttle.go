package retryhttp

import (
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// ErrThrottled is wrapped by the error of a request that adaptive
// throttling (Policy.Throttle) rejected in the client: it was never sent.
var ErrThrottled = errors.New("retryhttp: throttled in the client (the host rejects most requests)")

// Defaults of a Throttle.
const (
	DefaultThrottleK      = 2
	DefaultThrottleWindow = 10 * time.Second
)

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
// The counts are kept per host (URL host, port included), at most
// throttleHosts hosts per Transport; a host beyond that replaces the one
// seen first. Counting is lock-free.
type Throttle struct {
	// K is how many requests per accepted one the host may be sent before
	// the client rejects any. Zero means DefaultThrottleK; negative turns
	// throttling off (to switch it off for one host).
	K float64

	// Window is how far back requests and accepts are counted. Zero means
	// DefaultThrottleWindow.
	Window time.Duration
}

// throttlePolicy is a Throttle converted for use.
type throttlePolicy struct {
	k1000 int64 // K, times 1000
	slice int64 // nanoseconds per slice of the window
}

func (t *Throttle) compile() *throttlePolicy {
	if t == nil || t.K < 0 || math.IsNaN(t.K) {
		return nil
	}
	k, w := t.K, t.Window
	if k == 0 {
		k = DefaultThrottleK
	}
	if w <= 0 {
		w = DefaultThrottleWindow
	}
	return &throttlePolicy{k1000: int64(min(k, 1e6) * 1000), slice: max(int64(w)/throttleSlices, 1)}
}

const (
	throttleSlices = 10   // a window is counted in 10 slices of time
	throttleHosts  = 1024 // hosts a Transport keeps counts for
)

// hostThrottle counts one host's requests and accepts, slice by slice. Each
// word holds a slice's index in its high half and its count in the low
// half, so a word from an older slice is recognized and restarted with one
// compare-and-swap.
type hostThrottle struct {
	requests, accepts [throttleSlices]atomic.Uint64
}

// rejects reports whether an attempt at clock (on the monotonic scale: clock.Mono)
// is to be rejected in the
// client, u being a uniform sample in [0, 1). A rejected attempt counts as a
// request at once; one that is sent counts when its outcome is recorded, so
// that a burst of attempts still in flight is not taken for rejections.
func (h *hostThrottle) rejects(p *throttlePolicy, clock int64, u float64) bool {
	e := sliceOf(clock, p.slice)
	var requests, accepts int64
	for i := range h.requests {
		requests += countIn(h.requests[i].Load(), e)
		accepts += countIn(h.accepts[i].Load(), e)
	}
	excess := requests*1000 - p.k1000*accepts
	if excess <= 0 || u*float64(requests+1)*1000 >= float64(excess) {
		return false
	}
	bump(&h.requests[e%throttleSlices], e)
	return true
}

// record counts an attempt sent at about clock, and whether the host
// accepted it.
func (h *hostThrottle) record(p *throttlePolicy, clock int64, accepted bool) {
	e := sliceOf(clock, p.slice)
	bump(&h.requests[e%throttleSlices], e)
	if accepted {
		bump(&h.accepts[e%throttleSlices], e)
	}
}

// sliceOf returns the index of the slice holding clock, a time on the
// monotonic scale (clock.Mono), truncated to 32 bits.
func sliceOf(clock, slice int64) uint32 {
	return uint32(clock / slice)
}

// countIn returns the count of word w if its slice lies in the window
// ending with slice e.
func countIn(w uint64, e uint32) int64 {
	if e-uint32(w>>32) >= throttleSlices {
		return 0
	}
	return int64(uint32(w))
}

// bump adds one to word w for slice e, restarting it if it holds an older
// slice.
func bump(w *atomic.Uint64, e uint32) {
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

// hostMap holds a T for each of up to throttleHosts hosts; a host beyond
// that replaces the one added first. Looking a known host up takes no lock,
// and the host looked up last is found without hashing. It keeps the
// per-host state of throttling (hostThrottle) and hedging (hostHedge).
type hostMap[T any] struct {
	hosts sync.Map                     // host -> *hostEntry[T]
	last  atomic.Pointer[hostEntry[T]] // the entry found or made last

	mu    sync.Mutex
	order []*hostEntry[T] // in the order they were added, oldest first
}

type hostEntry[T any] struct {
	host string
	v    T
}

// get returns the T of host, making a zero one if need be.
func (m *hostMap[T]) get(host string) *T {
	if e := m.last.Load(); e != nil && e.host == host {
		return &e.v
	}
	if v, ok := m.hosts.Load(host); ok {
		e := v.(*hostEntry[T])
		m.last.Store(e)
		return &e.v
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.hosts.Load(host); ok {
		return &v.(*hostEntry[T]).v
	}
	e := &hostEntry[T]{host: host}
	m.hosts.Store(host, e)
	m.order = append(m.order, e)
	if len(m.order) > throttleHosts {
		old := m.order[0]
		m.hosts.Delete(old.host)
		// (A get racing with this may still make old the last: it then
		// serves its host until another host is looked up, as it did
		// before it was forgotten.)
		m.last.CompareAndSwap(old, nil)
		m.order[0] = nil
		m.order = m.order[1:]
	}
	m.last.Store(e)
	return &e.v
}
