package hostgate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The adaptive delay is a high quantile of the host's recent latencies, and
// follows them when they shift.
func TestHedgeDelayAdapts(t *testing.T) {
	p := &Hedge{Quantile: 0.95, Min: 2 * time.Millisecond, Max: time.Second, MaxHedges: 1, Fraction: 0.05} // the defaults
	var h HedgeState
	assert.Equal(t, p.Max, h.Delay(p), "too few latencies: Max")
	for i := range 1000 {
		d := 5 * time.Millisecond
		if i%50 == 0 {
			d = 500 * time.Millisecond // 2 % slow
		}
		h.Observe(d)
	}
	d := h.Delay(p)
	assert.GreaterOrEqual(t, d, 5*time.Millisecond)
	assert.Less(t, d, 6*time.Millisecond, "p95 of a latency that is 5 ms 98 % of the time")
	for range 3000 {
		h.Observe(15 * time.Millisecond) // everything 3x slower
	}
	d = h.Delay(p)
	assert.GreaterOrEqual(t, d, 15*time.Millisecond)
	assert.Less(t, d, 18*time.Millisecond, "the delay followed the shift")
	assert.Equal(t, 7*time.Millisecond, (&HedgeState{}).Delay(&Hedge{Fixed: 7 * time.Millisecond}))
}
