// Command hedging shows what hedged requests do to the tail of a
// dependency's latency. A local server answers most requests in 5 ms, but 2
// of every 100 it receives in 500 ms. Eight callers send GETs to it, one
// after the other, for a few seconds through a retryhttp client without
// hedging, then as long through one with hedging on:
//
//	retryhttp.Policy{Hedge: &retryhttp.Hedge{}}
//
// A request still unanswered after the p95 of the host's recent latencies
// is then sent a second time, and the first answer wins; at most 5 % of a
// host's requests are hedged. The program prints the latency percentiles and
// the extra requests each way.
//
//	go run ./examples/hedging
//
// Everything runs on the loopback interface and ends within about 12 s.
package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

// The server's latency and the load.
const (
	fast    = 5 * time.Millisecond
	slow    = 500 * time.Millisecond
	slowPer = 2 // requests answered slowly, of every 100 the server receives
	callers = 8
)

func main() {
	compare(os.Stdout, 5*time.Second)
}

// result is what one client did: its requests' latencies, sorted, and its
// Transport's counts.
type result struct {
	name      string
	latencies []time.Duration
	stats     retryhttp.Stats
	delay     time.Duration // the median delay of the hedges, 0 if none
}

func (r result) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(r.latencies)))) - 1
	return r.latencies[min(max(i, 0), len(r.latencies)-1)]
}

// extra returns the attempts beyond one per request.
func (r result) extra() float64 {
	if r.stats.Requests == 0 {
		return 0
	}
	return float64(r.stats.Attempts)/float64(r.stats.Requests) - 1
}

// compare runs the callers for d without hedging, then for d with it, and
// writes the table and what it shows to out. It returns both results.
func compare(out io.Writer, d time.Duration) (plain, hedged result) {
	fmt.Fprintf(out, "retryhttp hedging: %d callers for %v each way against a local server answering in %v,\n", callers, d, fast)
	fmt.Fprintf(out, "but in %v for %d of every 100 requests\n\n", slow, slowPer)

	plain = measure("no hedging", retryhttp.Policy{}, d)
	hedged = measure("hedging", retryhttp.Policy{Hedge: &retryhttp.Hedge{}}, d)

	fmt.Fprintf(out, tableRow, "", "REQUESTS", "P50", "P99", "P99.9", "EXTRA REQUESTS", "HEDGES WON")
	for _, r := range []result{plain, hedged} {
		fmt.Fprintf(out, tableRow, r.name, fmt.Sprint(len(r.latencies)), ms(r.quantile(0.5)), ms(r.quantile(0.99)),
			ms(r.quantile(0.999)), fmt.Sprintf("%.1f %%", 100*r.extra()), fmt.Sprint(r.stats.HedgeWins))
	}
	fmt.Fprintf(out, "\nHedging sent a second copy of each request unanswered after %s (the p95 of the host's\n", ms(hedged.delay))
	fmt.Fprintf(out, "latencies) and took the first answer: the p99 went from %s to %s for %.1f %% more requests.\n",
		ms(plain.quantile(0.99)), ms(hedged.quantile(0.99)), 100*hedged.extra())
	return plain, hedged
}

// tableRow lays out a row of the table: a name, then figures aligned
// right.
const tableRow = "%-10s  %8s  %8s  %8s  %8s  %14s  %10s\n"

func ms(d time.Duration) string {
	if d >= 100*time.Millisecond {
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.1f ms", float64(d)/1e6)
}

// measure sends requests from every caller, one after the other, through a
// Transport with policy p, for d, to a fresh server.
func measure(name string, p retryhttp.Policy, d time.Duration) result {
	srv := httptest.NewServer(newTailServer())
	defer srv.Close()
	// Idle connections for every caller and its hedge, so that neither
	// waits for a dial.
	base := &http.Transport{MaxIdleConnsPerHost: 2 * callers}
	defer base.CloseIdleConnections()

	var mu sync.Mutex
	var delays []time.Duration
	tr := &retryhttp.Transport{Base: base, Policy: p, OnRetry: func(e *retryhttp.RetryEvent) {
		if e.Hedge {
			mu.Lock()
			delays = append(delays, e.Delay)
			mu.Unlock()
		}
	}}
	client := &http.Client{Transport: tr}

	r := result{name: name}
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for range callers {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(end) {
				start := time.Now()
				resp, err := client.Get(srv.URL)
				if err != nil {
					fmt.Fprintln(os.Stderr, "hedging:", err)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			r.latencies = append(r.latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(r.latencies)
	slices.Sort(delays)
	if len(delays) > 0 {
		r.delay = delays[len(delays)/2]
	}
	r.stats = tr.Stats()
	return r
}

// tailServer answers 200 after fast, or after slow for slowPer requests of
// each 100 it receives, at places drawn at random in each hundred; a
// canceled request (a hedge's loser) ends at once.
type tailServer struct {
	mu   sync.Mutex
	rng  *rand.Rand
	n    int
	slow map[int]bool // the places of the slow requests in this hundred
}

func newTailServer() *tailServer {
	return &tailServer{rng: rand.New(rand.NewPCG(1, 2))}
}

func (s *tailServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.n%100 == 0 {
		s.slow = map[int]bool{}
		for len(s.slow) < slowPer {
			s.slow[s.rng.IntN(100)] = true
		}
	}
	d := fast
	if s.slow[s.n%100] {
		d = slow
	}
	s.n++
	s.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		io.WriteString(w, "ok")
	case <-r.Context().Done():
	}
}
