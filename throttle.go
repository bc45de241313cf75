package retryhttp

import (
	"time"

	"github.com/retryhttp/retryhttp/internal/hostgate"
)

// Defaults of a Throttle.
const (
	defaultThrottleK      = 2
	defaultThrottleWindow = 10 * time.Second
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
// fail at once with an *Error whose Reason is ReasonThrottled instead of adding to its
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
// Transport's table of hosts (see Transport: past 1024 hosts, idle ones are
// forgotten). Counting is lock-free.
type Throttle struct {
	// Off switches throttling off, whatever the policy beneath says.
	Off bool

	// K is how many requests per accepted one the host may be sent before
	// the client rejects any. Zero (or negative) means 2.
	K float64

	// Window is how far back requests and accepts are counted. Zero means
	// 10 s.
	Window time.Duration
}

// compile returns t's gate, nil when throttling is off.
func (t *Throttle) compile() *hostgate.Throttle {
	if t == nil || t.Off {
		return nil
	}
	k, w := t.K, t.Window
	if !(k > 0) {
		k = defaultThrottleK
	}
	if w <= 0 {
		w = defaultThrottleWindow
	}
	return hostgate.NewThrottle(k, w)
}
