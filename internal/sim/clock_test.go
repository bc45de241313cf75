package sim

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/clock"
)

// instantBase answers at once on a virtual clock: 503 to the first
// `fail` requests, 200 after.
type instantBase struct {
	v    *clock.Virtual
	n    int
	fail int
}

func (b *instantBase) RetryClock() clock.Clock   { return b.v }
func (b *instantBase) RetryRand() func() float64 { return func() float64 { return 0.5 } }
func (b *instantBase) RoundTrip(r *http.Request) (*http.Response, error) {
	b.n++
	code := http.StatusOK
	if b.n <= b.fail {
		code = http.StatusServiceUnavailable
	}
	return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// throttledAfter runs, on a virtual clock started at start, 20 failing
// requests at start (as many as throttling needs before it rejects any)
// and one more 9.5 µs later, under throttling with a window of 10 µs, and
// reports whether the last was throttled.
func throttledAfter(start time.Time) bool {
	v := clock.NewVirtual(start)
	tr := &retryhttp.Transport{Base: &instantBase{v: v, fail: 20},
		Policy: retryhttp.Policy{MaxAttempts: 1, Throttle: &retryhttp.Throttle{Window: 10 * time.Microsecond}}}
	get := func() error {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://example.test/", nil)
		resp, err := tr.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		return err
	}
	var last error
	v.At(start, func() {
		for range 20 {
			get()
		}
	})
	v.At(start.Add(9500*time.Nanosecond), func() { last = get() })
	v.Run()
	var e *retryhttp.Error
	return errors.As(last, &e) && e.Reason == retryhttp.ReasonThrottled
}

// A run on the virtual clock depends on differences of time only: the same
// run started at another instant ends the same way.
func TestAVirtualRunDependsOnlyOnTimeDifferences(t *testing.T) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	want := throttledAfter(base)
	for shift := 100 * time.Nanosecond; shift < time.Microsecond; shift += 100 * time.Nanosecond {
		if got := throttledAfter(base.Add(shift)); got != want {
			t.Errorf("started %v later: throttled %v, at the base instant %v (the slices of the window are cut by the real clock's origin)", shift, got, want)
		}
	}
}
