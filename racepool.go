package retryhttp

import "github.com/retryhttp/retryhttp/internal/clock"

// inBubble reports whether the caller runs in a testing/synctest bubble
// (see clock.MonoNowIn), where a timer t makes belongs to the bubble and
// must not be kept for later requests. It reads the monotonic clock: only
// where a timer is about to be kept.
func (t *Transport) inBubble() bool {
	if !t.realClock {
		return false
	}
	_, bubble := clock.MonoNowIn()
	return bubble
}

// newRace returns a race from t's pool, or a new one.
// A race in a testing/synctest bubble is always a new one, and never goes
// back to the pool: its timer belongs to the bubble, and a pooled one to
// none.
func (t *Transport) newRace() *race {
	inBubble := t.inBubble()
	if !inBubble {
		if r, ok := t.races.Get().(*race); ok {
			return r
		}
	}
	r := &race{bubbled: inBubble}
	r.fire = r.hedge
	return r
}

// recycle puts r, stopped and with no hedge sent, back in its Transport's
// pool, its timer with it.
func (r *race) recycle() {
	t := r.c.t
	r.c = call{}
	r.p, r.host = nil, nil
	clear(r.attempts)
	r.attempts = r.attempts[:0]
	r.winner = nil
	r.primaryWon, r.over, r.stop = false, false, false
	r.launched, r.next, r.armed = 0, 0, 0
	if !r.bubbled {
		t.races.Put(r)
	}
}
