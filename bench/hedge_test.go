package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// Quantile is the nearest rank: the smallest value at least q of the values
// do not exceed.
func TestQuantile(t *testing.T) {
	var ls []time.Duration
	for i := 1; i <= 100; i++ {
		ls = append(ls, ms(float64(i)))
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, ms(50)}, {0.95, ms(95)}, {0.99, ms(99)}, {0.999, ms(100)}, {1, ms(100)}, {0, ms(1)}} {
		if got := Quantile(ls, c.q); got != c.want {
			t.Errorf("Quantile(1..100 ms, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := Quantile(nil, 0.99); got != 0 {
		t.Errorf("Quantile of nothing = %v, want 0", got)
	}
}

// DelayFor is the latency the given share of unhedged requests exceeded.
func TestDelayFor(t *testing.T) {
	var r HedgeResult
	for i := 1; i <= 100; i++ {
		r.Calls = append(r.Calls, Call{Start: ms(float64(i)), Latency: ms(float64(i) + 0.04)})
	}
	if got, want := DelayFor(r, 0.05), ms(95); got != want {
		t.Errorf("DelayFor(1.04..100.04 ms, 5 %%) = %v, want %v (95.04 ms to a tenth)", got, want)
	}
}

// Seconds sums up each second: the requests that began in it, the attempts
// they sent, their p99, and the median delay of the hedges sent in it.
func TestSeconds(t *testing.T) {
	r := HedgeResult{
		Calls: []Call{
			{Start: ms(100), Latency: ms(5)}, {Start: ms(200), Latency: ms(7)}, {Start: ms(900), Latency: ms(500)},
			{Start: ms(1500), Latency: ms(15)},
		},
		Attempts: []int{4, 1},
		Hedges:   []HedgeMark{{At: ms(120), Delay: ms(6)}, {At: ms(950), Delay: ms(9)}, {At: ms(999), Delay: ms(8)}},
	}
	got := r.Seconds(3)
	want := []Second{
		{Requests: 3, Attempts: 4, Hedges: 3, P99: ms(500), Delay: ms(8)},
		{Requests: 1, Attempts: 1, P99: ms(15)},
		{},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("second %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if e := got[0].Extra(); e < 0.333 || e > 0.334 {
		t.Errorf("second 0: extra %v, want 1/3", e)
	}
	if r.Extra() != 0.25 {
		t.Errorf("extra %v, want 5 attempts for 4 requests", r.Extra())
	}
}

// Merge puts runs together: calls and hedges in order of their times,
// counts added second by second.
func TestMerge(t *testing.T) {
	a := HedgeResult{Name: "x", Delay: ms(3), Calls: []Call{{Start: ms(10)}, {Start: ms(1200)}}, Errors: 1,
		Attempts: []int{2, 1}, Arrivals: []int{1}, Hedges: []HedgeMark{{At: ms(500)}}, Conns: 1, Canceled: 2, Resets: 2}
	b := HedgeResult{Name: "x", Delay: ms(3), Calls: []Call{{Start: ms(5)}}, Attempts: []int{1, 0, 4},
		Arrivals: []int{1, 2}, Hedges: []HedgeMark{{At: ms(20)}}, Conns: 1, Canceled: 3, Resets: 1}
	m := Merge(a, b)
	if m.Name != "x" || m.Delay != ms(3) || m.Errors != 1 {
		t.Errorf("merged %q, delay %v, errors %d", m.Name, m.Delay, m.Errors)
	}
	if m.Conns != 2 || m.Canceled != 5 || m.Resets != 3 {
		t.Errorf("merged %d connections, %d canceled, %d resets; want the sums 2, 5, 3", m.Conns, m.Canceled, m.Resets)
	}
	if len(m.Calls) != 3 || m.Calls[0].Start != ms(5) || m.Calls[2].Start != ms(1200) {
		t.Errorf("calls %v, want the three in order of start", m.Calls)
	}
	if len(m.Hedges) != 2 || m.Hedges[0].At != ms(20) {
		t.Errorf("hedges %v, want the two in order", m.Hedges)
	}
	if want := []int{3, 1, 4}; !equalInts(m.Attempts, want) {
		t.Errorf("attempts %v, want %v", m.Attempts, want)
	}
	if want := []int{2, 2}; !equalInts(m.Arrivals, want) {
		t.Errorf("arrivals %v, want %v", m.Arrivals, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The server answers each request after Fast or Slow, as its seeded draws
// say, in the order it receives them.
func TestTailServerDraws(t *testing.T) {
	tail := Tail{Fast: time.Millisecond, Slow: 80 * time.Millisecond, SlowShare: 0.1}
	const seed, n = 7, 30
	srv := NewTailServer(tail, seed)
	defer srv.Close()
	draws := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var slow int
	for i := range n {
		want := tail.Fast
		if draws.Float64() < tail.SlowShare {
			want = tail.Slow
			slow++
		}
		start := time.Now()
		if !get(http.DefaultClient, srv.URL, start) {
			t.Fatalf("request %d failed", i)
		}
		got := time.Since(start)
		if got < want || (want == tail.Fast && got >= tail.Slow) {
			t.Errorf("request %d took %v, want %v", i, got, want)
		}
	}
	if slow == 0 {
		t.Fatalf("no slow draw among %d: choose another seed", n)
	}
	if a := srv.Arrivals(); len(a) != 1 || a[0] != n {
		t.Errorf("arrivals %v, want %d in the first second", a, n)
	}
}

// A canceled request (a hedge's loser) ends at once on the server.
func TestTailServerCanceled(t *testing.T) {
	srv := NewTailServer(Tail{Fast: time.Minute}, 1)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	done := make(chan error)
	go func() {
		_, err := http.DefaultClient.Do(req)
		done <- err
	}()
	for arrived := time.Now().Add(5 * time.Second); srv.active.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(arrived) {
			t.Fatal("the request did not arrive within 5 s")
		}
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the canceled request succeeded")
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.active.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := srv.active.Load(); n != 0 {
		t.Errorf("%d requests still answered 5 s after their cancellation", n)
	}
	if srv.Canceled() != 1 || srv.Conns() != 1 || srv.Resets() != 0 {
		t.Errorf("%d canceled, %d connections, %d resets; want 1, 1, 0", srv.Canceled(), srv.Conns(), srv.Resets())
	}
}

// Against a server slower than the hedge delay for every request,
// failsafe-go hedges them all and retryhttp at most its Fraction of them;
// the run counts each attempt, and each hedge is one attempt more.
func TestHedgeLoadCountsHedges(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: 1 s")
	}
	load := HedgeLoad{Workers: 4, Duration: 500 * time.Millisecond, Tail: Tail{Fast: 30 * time.Millisecond}, Seed: 1}
	for _, c := range []struct {
		h     Hedger
		check func(t *testing.T, r HedgeResult, requests, hedges int)
	}{
		{FailsafeHedge("failsafe-go", time.Millisecond), func(t *testing.T, r HedgeResult, requests, hedges int) {
			if hedges < requests*9/10 {
				t.Errorf("failsafe-go hedged %d of %d requests, want every one (bar a stalled timer)", hedges, requests)
			}
		}},
		{RetryhttpHedge("retryhttp", retryhttp.Hedge{Delay: time.Millisecond}), func(t *testing.T, r HedgeResult, requests, hedges int) {
			if limit := float64(requests)*0.05 + 1; float64(hedges) > limit || hedges == 0 {
				t.Errorf("retryhttp hedged %d of %d requests, want 1 to %.1f (its Fraction)", hedges, requests, limit)
			}
			// A hedge reports the time since the first attempt began, in
			// fixed delays: one, and one more for each time its Fraction
			// or the budget refused it and it looked again a delay later.
			for _, h := range r.Hedges {
				if h.Delay < time.Millisecond || h.Delay%time.Millisecond != 0 {
					t.Errorf("hedge at %v reports a delay of %v, want a whole number of the fixed 1ms", h.At, h.Delay)
				}
			}
		}},
	} {
		t.Run(c.h.Name, func(t *testing.T) {
			r := load.Run(c.h)
			requests, hedges := len(r.Calls), len(r.Hedges)
			if r.Errors != 0 || requests < 20 {
				t.Fatalf("%d requests answered, %d failed", requests, r.Errors)
			}
			var attempts int
			for _, a := range r.Attempts {
				attempts += a
			}
			if attempts != requests+hedges {
				t.Errorf("%d attempts for %d requests and %d hedges", attempts, requests, hedges)
			}
			if want := float64(hedges) / float64(requests); math.Abs(r.Extra()-want) > 1e-12 {
				t.Errorf("extra %v, want hedges ÷ requests = %v", r.Extra(), want)
			}
			for _, call := range r.Calls {
				if call.Latency < load.Tail.Fast {
					t.Errorf("a request took %v, less than the server's %v", call.Latency, load.Tail.Fast)
				}
			}
			c.check(t, r, requests, hedges)
		})
	}
}
