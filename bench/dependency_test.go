package bench

import (
	"testing"
	"time"
)

// A peak is counted in windows that slide from arrival to arrival: a burst
// that straddles two fixed slices is counted whole, only the arrivals of
// the phase asked for count, and the retries in the window are told apart
// from first attempts.
func TestPeakSlidesFromArrivalToArrival(t *testing.T) {
	ms := time.Millisecond
	d := &dependency{arrivals: []arrival{
		{at: 0, attempt: 1}, {at: 50 * ms, attempt: 1}, {at: 90 * ms, attempt: 2}, {at: 120 * ms, attempt: 1},
		{at: 140 * ms, attempt: 3}, {at: 149 * ms, attempt: 1}, {at: 300 * ms, attempt: 2},
	}}
	cases := []struct {
		from, to time.Duration
		want     peak
	}{
		{0, time.Hour, peak{n: 5, at: 50 * ms, retries: 2}},         // 50..149: not 3 and 3 in [0, 100) and [100, 200)
		{0, 100 * ms, peak{n: 3, at: 0, retries: 1}},                // the phase ends at 100 ms
		{100 * ms, time.Hour, peak{n: 3, at: 120 * ms, retries: 1}}, // starts at 100 ms: 120, 140, 149
		{200 * ms, time.Hour, peak{n: 1, at: 300 * ms, retries: 1}},
		{400 * ms, time.Hour, peak{}},
	}
	for _, c := range cases {
		if got := d.peak(c.from, c.to, 100*ms); got != c.want {
			t.Errorf("peak in [%v, %v) = %+v, want %+v", c.from, c.to, got, c.want)
		}
	}
}
