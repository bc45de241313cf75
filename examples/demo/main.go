// Command demo starts a local server that fails the way real dependencies
// do and sends requests to it through retryhttp, printing what each request
// went through: its attempts, the waits between them, and the outcome.
//
//	go run ./examples/demo
//
// Everything runs on the loopback interface and ends within seconds.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/retryhttp/retryhttp"
)

func main() {
	srv := httptest.NewServer(newFlakyServer())
	defer srv.Close()

	fmt.Println("retryhttp demo: requests to a local server that fails transiently")
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCENE\tREQUEST\tATTEMPTS\tWAITS\tOUTCOME")
	fmt.Fprintln(w, "-----\t-------\t--------\t-----\t-------")

	for _, s := range scenes(srv.URL) {
		row := s.run()
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", s.name, s.label, row.attempts, row.waits, row.outcome)
	}
	w.Flush()

	fmt.Println()
	outage(srv.URL)
}

// scene is one request sent through a Transport with its own policy.
type scene struct {
	name, label string
	policy      retryhttp.Policy
	newRequest  func() *http.Request
}

type row struct {
	attempts int
	waits    string
	outcome  string
}

func scenes(url string) []scene {
	fast := retryhttp.FullJitter{Base: 50 * time.Millisecond, Cap: time.Second}
	get := func(path string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodGet, url+path, nil)
			return req
		}
	}
	post := func(path string) func() *http.Request {
		return func() *http.Request {
			req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(`{"amount":1000}`))
			return req
		}
	}
	return []scene{
		{"503s", "GET /unavailable-twice", retryhttp.Policy{Backoff: fast}, get("/unavailable-twice")},
		{"reset", "GET /reset-once", retryhttp.Policy{Backoff: fast}, get("/reset-once")},
		{"429", "GET /rate-limited", retryhttp.Policy{Backoff: fast}, get("/rate-limited")},
		{"hung", "GET /hang-once", retryhttp.Policy{Backoff: fast, AttemptTimeout: 200 * time.Millisecond}, get("/hang-once")},
		{"not found", "GET /missing", retryhttp.Policy{Backoff: fast}, get("/missing")},
		{"POST, no key", "POST /charge-503", retryhttp.Policy{Backoff: fast}, post("/charge-503")},
		{"POST, key", "POST /charge (lost response)", retryhttp.Policy{
			Backoff: fast, IdempotencyKeys: &retryhttp.IdempotencyKeys{},
		}, post("/charge")},
	}
}

// run sends the scene's request through a new Transport, whose nil Base
// means a pooled transport of its own: no connection is shared between
// scenes, so each scene's first attempt opens a fresh one.
func (s scene) run() row {
	var waits []string
	var gaveUp string
	tr := &retryhttp.Transport{
		Policy: s.policy,
		OnGiveUp: func(e *retryhttp.GiveUpEvent) {
			gaveUp = " [gave up: " + e.Reason.String() + "]"
		},
		OnRetry: func(e *retryhttp.RetryEvent) {
			waits = append(waits, fmt.Sprintf("%s (%s after %s)", round(e.Delay), e.Source, what(e.Response, e.Err)))
		},
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var r row
	defer client.CloseIdleConnections()
	r.waits = "-"
	resp, err := client.Do(s.newRequest())
	if err != nil {
		var e *retryhttp.Error
		if errors.As(err, &e) {
			r.attempts = e.Attempts
		}
		r.outcome = "error: " + err.Error()
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r.attempts = retryhttp.Attempts(resp)
		r.outcome = fmt.Sprintf("%s %s", resp.Status, bytes.TrimSpace(body))
	}
	if len(waits) > 0 {
		r.waits = strings.Join(waits, ", ")
	}
	r.outcome += gaveUp
	return r
}

// outage sends a burst of requests to an endpoint that always fails, with
// and without a retry budget, and counts the attempts the server received.
func outage(url string) {
	const requests = 1000
	fmt.Printf("Outage: %d GETs to an endpoint that always answers 503 (MaxAttempts 4, no wait)\n", requests)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "BUDGET\tATTEMPTS AT SERVER\tPER REQUEST\tRETRIES DENIED")
	for _, c := range []struct {
		name   string
		budget *retryhttp.Budget
	}{
		{"none (unlimited)", retryhttp.UnlimitedBudget()},
		{"default (20% + 10/s)", nil},
	} {
		before := outageHits.Load()
		tr := &retryhttp.Transport{Budget: c.budget, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(0)}}
		client := &http.Client{Transport: tr}
		defer client.CloseIdleConnections()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for range requests {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				resp, err := client.Get(url + "/down")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		hits := outageHits.Load() - before
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%d\n", c.name, hits, float64(hits)/requests, tr.Stats().BudgetDenied)
	}
	w.Flush()
	fmt.Println("The budget allows retries up to 20% of the requests plus 10 per second of its 10 s window:")
	fmt.Println("a quiet client can still retry, and a failing dependency sees about 1.2x its load instead of 4x.")
}

var outageHits atomic.Int64

// newFlakyServer returns a handler whose endpoints fail in scripted ways.
// Counters are per endpoint, so each scene sees the same script.
func newFlakyServer() http.Handler {
	var (
		mu      sync.Mutex
		hits    = map[string]int{}
		charged = map[string]bool{} // idempotency key -> applied
		charges int
	)
	hit := func(r *http.Request) int {
		mu.Lock()
		defer mu.Unlock()
		hits[r.URL.Path]++
		return hits[r.URL.Path]
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/unavailable-twice", func(w http.ResponseWriter, r *http.Request) {
		if hit(r) <= 2 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/reset-once", func(w http.ResponseWriter, r *http.Request) {
		if hit(r) == 1 {
			reset(w)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/rate-limited", func(w http.ResponseWriter, r *http.Request) {
		if hit(r) == 1 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/hang-once", func(w http.ResponseWriter, r *http.Request) {
		if hit(r) == 1 {
			<-r.Context().Done() // never answers; the client's attempt timeout ends it
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/charge-503", func(w http.ResponseWriter, r *http.Request) {
		hit(r)
		http.Error(w, "try later", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("/charge", func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		first := !charged[key]
		if first {
			charged[key] = true
			charges++
		}
		n := charges
		mu.Unlock()
		if first {
			reset(w) // charged, but the response is lost on the way back
			return
		}
		fmt.Fprintf(w, "charged once (key %.8s…, %d charge in all)\n", key, n)
	})
	mux.HandleFunc("/down", func(w http.ResponseWriter, r *http.Request) {
		outageHits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	return mux
}

// reset closes the client's connection abruptly, without a response.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // RST instead of FIN
	}
	conn.Close()
}

func what(resp *http.Response, err error) string {
	if err != nil {
		s := err.Error()
		if i := strings.LastIndex(s, ": "); i >= 0 {
			s = s[i+2:]
		}
		return s
	}
	return resp.Status
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
