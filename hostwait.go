package retryhttp

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A host told to wait (Policy.HostWait): a host that asked a request to
// keep away for a while asked it of every request, so new ones wait too,
// and then go about as fast as the host served them before it asked.

// hostHold is what a host said of waiting: until when it asked its clients
// to keep away, and the turns of the new requests held meanwhile.
type hostHold struct {
	mu     sync.Mutex
	until  time.Time     // the end of the latest wait the host asked for
	next   time.Time     // the turn of the next request held: until, then a pace after each
	pace   time.Duration // between turns: the wait, divided by the requests served before it
	served int           // the requests the host served since it last asked for a wait
}

// heard tells h of attempt a's response, judged v, back at now: a wait it
// asks for (a 429, 503 or rate-limit 403 whose Retry-After or RateLimit
// asks one, or any response whose RateLimit, or X-RateLimit-Remaining: 0
// with a reset, says none are left), or a request served.
func (h *hostHold) heard(a *attempt, v verdict, now time.Time) {
	d, source, ok := serverWait(a, now)
	code := a.resp.StatusCode
	limited := code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable ||
		code == http.StatusForbidden && v.retry
	h.mu.Lock()
	defer h.mu.Unlock()
	switch end := now.Add(d); {
	case ok && d > 0 && (limited || source == delayRateLimit):
		if end.After(h.until) {
			h.pace = d / time.Duration(max(h.served, 1))
			h.until, h.next, h.served = end, maxTime(h.next, end), 0 // those held keep their turns
		}
	case !v.retry:
		h.served++
	}
}

// turn returns when a new request at now may go: now, unless the host's
// wait has not ended, or requests held before it still wait their turns;
// then its own turn, which it takes, unless that comes at limit or later
// (ok false).
func (h *hostHold) turn(now, limit time.Time) (at time.Time, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	at = maxTime(h.until, h.next)
	switch {
	case !at.After(now):
		return now, true
	case !at.Before(limit):
		return at, false
	}
	h.next = at.Add(h.pace)
	return at, true
}

// holds reports whether the host asked, since a turn at t was given, for a
// wait that lasts past t.
func (h *hostHold) holds(t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until.After(t)
}

// awaitHost holds the request's first attempt while its host's wait, and
// the turns of the requests held before it, last (Policy.HostWait). It
// returns why the request ends instead, if it does, and the error.
func (c *call) awaitHost() (Reason, error) {
	h := &c.host.hold
	var since time.Time // when the request began to wait
	for c.p.hostWait > 0 {
		now := c.t.clock.Now()
		if since.IsZero() {
			since = now
		}
		limit, reason := now.Add(c.p.hostWait), ReasonRetryAfter
		if dl, ok := c.parent.Deadline(); ok && dl.Before(limit) {
			limit, reason = dl, ReasonDeadline
		}
		at, ok := h.turn(now, limit)
		switch {
		case !ok:
			return reason, fmt.Errorf("retryhttp: the host asked to wait; this request's turn comes %v from now, past its %s",
				at.Sub(now), map[Reason]string{ReasonDeadline: "deadline", ReasonRetryAfter: "HostWait"}[reason])
		case !at.After(now):
			return 0, nil
		}
		if c.t.clock.Sleep(c.parent, at, nil) != clock.WokeTime {
			return c.stop(time.Time{}, 0), c.parent.Err()
		}
		c.recordWait(at.Sub(since), 0, "HostWait")
		if !h.holds(at) {
			return 0, nil
		}
	}
	return 0, nil // off
}
