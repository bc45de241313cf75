package hostgate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// The rejection probability is the SRE book's, exactly: with u just below
// the probability an attempt is rejected, just above it is sent.
func TestThrottleFormula(t *testing.T) {
	p := NewThrottle(2, 10*time.Second) // the defaults
	now := time.Now()
	var h throttleState
	require.False(t, h.rejects(p, clock.Mono(now), 0), "nothing counted: never rejected")
	for range 100 {
		h.record(p, clock.Mono(now), false)
	}
	for range 10 {
		h.record(p, clock.Mono(now), true) // 110 requests, 10 accepted
	}
	// p = (110 - 2*10)/(110+1)
	assert.True(t, h.rejects(p, clock.Mono(now), 90.0/111-1e-9), "u just below p: rejected")
	// That rejection counted: p = (111 - 20)/112.
	assert.False(t, h.rejects(p, clock.Mono(now), 91.0/112+1e-9), "u just above p: sent")
	assert.True(t, h.rejects(p, clock.Mono(now), 91.0/112-1e-9))

	// A host that accepts half of what it is sent (K=2) is never throttled.
	var ok throttleState
	for i := range 1000 {
		require.False(t, ok.rejects(p, clock.Mono(now), 0))
		ok.record(p, clock.Mono(now), i%2 == 0)
	}
	// Attempts in flight do not count: a burst to a new host is not throttled.
	var cold throttleState
	for range 1000 {
		require.False(t, cold.rejects(p, clock.Mono(now), 0))
	}
}

// Requests and accepts are counted over the trailing window only.
func TestThrottleWindowSlides(t *testing.T) {
	p := NewThrottle(2, 10*time.Second)
	t0 := time.Now()
	var h throttleState
	for range 1000 {
		h.record(p, clock.Mono(t0), false) // 1000 requests, none accepted
	}
	assert.True(t, h.rejects(p, clock.Mono(t0.Add(9*time.Second)), 0.5), "inside the window")
	assert.False(t, h.rejects(p, clock.Mono(t0.Add(11*time.Second)), 0.5), "the window has moved past them")
}

// A window of a few requests does not tell a host's state from chance:
// after the refusal of a host's first attempt, nothing is rejected (even
// at u = 0) while the window holds fewer than ThrottleMinRequests
// requests; from then on, the formula.
func TestThrottleWaitsForEnoughRequests(t *testing.T) {
	p := NewThrottle(2, 10*time.Second) // the defaults
	now := clock.Mono(time.Now())
	var h throttleState
	h.record(p, now, false) // p would be (1 - 0)/(1+1)
	for range 100 {
		require.False(t, h.rejects(p, now, 0), "one request counted: nothing rejected")
	}
	for range ThrottleMinRequests - 2 {
		h.record(p, now, false)
	}
	require.False(t, h.rejects(p, now, 0), "%d requests counted", ThrottleMinRequests-1)
	h.record(p, now, false)
	// p = 20/21.
	assert.False(t, h.rejects(p, now, 20.0/21+1e-9), "u just above p: sent")
	assert.True(t, h.rejects(p, now, 20.0/21-1e-9), "u just below p: rejected")
}
