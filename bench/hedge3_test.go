package bench

import (
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
)

// Over HTTP/3, hedges fire, and each loser that reached the server costs a
// stream the client resets with H3_REQUEST_CANCELLED, not a connection: the
// callers share one QUIC connection throughout, hedges included.
func TestHedgeLoadHTTP3(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about 1 s")
	}
	load := HedgeLoad{
		Workers: 4, Duration: 700 * time.Millisecond, Seed: 1, Proto: HTTP3,
		Tail: Tail{Fast: 2 * time.Millisecond, Slow: 200 * time.Millisecond, SlowShare: 0.05},
	}
	r := load.Run(RetryhttpHedge("retryhttp", retryhttp.Hedge{Delay: 20 * time.Millisecond}))
	requests, hedges := len(r.Calls), len(r.Hedges)
	var arrivals int
	for _, a := range r.Arrivals {
		arrivals += a
	}
	t.Logf("%d requests, %d hedges, %d arrivals, %d canceled, %d reset, %d connections", requests, hedges, arrivals, r.Canceled, r.Resets, r.Conns)
	if r.Errors != 0 || requests < 20 {
		t.Fatalf("%d requests answered, %d failed", requests, r.Errors)
	}
	if hedges == 0 {
		t.Fatal("no hedge fired")
	}
	if r.Conns != 1 {
		t.Errorf("the server accepted %d QUIC connections, want 1 (the transport's, shared by the callers and their hedges)", r.Conns)
	}
	// Every attempt the server received but the winners' is a loser; each
	// is canceled by a reset of its stream, unless it answered before its
	// rival's answer was read (two fast attempts on a loaded machine), so
	// at least half of them here.
	losers := arrivals - requests
	if losers < 1 || losers > hedges {
		t.Errorf("%d losers reached the server (arrivals − requests), want 1 to %d (the hedges)", losers, hedges)
	}
	if r.Resets != r.Canceled || r.Canceled > losers || 2*r.Canceled < losers {
		t.Errorf("%d requests canceled on the server, %d of them by a stream reset with H3_REQUEST_CANCELLED; want all of them reset, and %d losers or at least half",
			r.Canceled, r.Resets, losers)
	}
}

// Over HTTP/1.1, by contrast, a loser costs its connection: the client
// closes it to cancel the request, and the pool dials another.
func TestHedgeLoadHTTP1Conns(t *testing.T) {
	if testing.Short() {
		t.Skip("real time: about 1 s")
	}
	load := HedgeLoad{
		Workers: 4, Duration: 700 * time.Millisecond, Seed: 1,
		Tail: Tail{Fast: 2 * time.Millisecond, Slow: 200 * time.Millisecond, SlowShare: 0.05},
	}
	r := load.Run(RetryhttpHedge("retryhttp", retryhttp.Hedge{Delay: 20 * time.Millisecond}))
	t.Logf("%d requests, %d hedges, %d canceled, %d connections", len(r.Calls), len(r.Hedges), r.Canceled, r.Conns)
	if r.Errors != 0 || len(r.Hedges) == 0 || r.Canceled == 0 {
		t.Fatalf("%d failed, %d hedges, %d canceled on the server", r.Errors, len(r.Hedges), r.Canceled)
	}
	if r.Resets != 0 {
		t.Errorf("%d stream resets over HTTP/1.1", r.Resets)
	}
	// Each canceled loser's connection was closed and another dialed for
	// the next request; the callers' last ones are still open.
	if r.Conns <= r.Canceled {
		t.Errorf("%d connections for %d canceled losers, want more: one closed for each, and the last still open", r.Conns, r.Canceled)
	}
}
