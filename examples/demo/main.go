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
	"net/http"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/retryhttp/retryhttp"
	rt "github.com/retryhttp/retryhttp/retryhttptest"
)

func main() {
	demo(os.Stdout)
}

// demo runs every scene and writes the tables to out.
func demo(out io.Writer) {
	srv := newFlakyServer()
	defer srv.Close()

	fmt.Fprintln(out, "retryhttp demo: requests to a local server that fails transiently")
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SCENE\tREQUEST\tATTEMPTS\tCONNS\tWAITS\tOUTCOME")
	fmt.Fprintln(w, "-----\t-------\t--------\t-----\t-----\t-------")

	for _, s := range scenes(srv.URL) {
		before := len(srv.Requests())
		row := s.run()
		conns := map[int]bool{}
		for _, r := range srv.Requests()[before:] {
			conns[r.Conn] = true
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\n", s.name, s.label, row.attempts, len(conns), row.waits, row.outcome)
	}
	w.Flush()

	fmt.Fprintln(out)
	fmt.Fprintln(out, "CONNS counts the connections the server saw: a failed attempt's response is drained")
	fmt.Fprintln(out, "so that the next attempt reuses its connection; a reset or hung attempt needs a new one.")
	fmt.Fprintln(out)
	outage(out, srv)
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
func outage(out io.Writer, srv *rt.Server) {
	const requests = 1000
	fmt.Fprintf(out, "Outage: %d GETs to an endpoint that always answers 503 (MaxAttempts 4, no wait)\n", requests)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "BUDGET\tATTEMPTS AT SERVER\tPER REQUEST\tRETRIES DENIED")
	for _, c := range []struct {
		name   string
		budget *retryhttp.Budget
	}{
		{"none (unlimited)", retryhttp.UnlimitedBudget()},
		{"default (20% + 10/s)", nil},
	} {
		before := len(srv.Requests())
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
				resp, err := client.Get(srv.URL + "/down")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		hits := len(srv.Requests()) - before
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%d\n", c.name, hits, float64(hits)/requests, tr.Stats().BudgetDenied)
	}
	w.Flush()
	fmt.Fprintln(out, "The budget allows retries up to 20% of the requests plus 10 per second of its 10 s window,")
	fmt.Fprintln(out, "so a quiet client can still retry. Here that is 1,000 + 200 + 100 attempts for one burst of")
	fmt.Fprintln(out, "1,000 requests (1.3x); a client sending steadily into an outage gets 1.2x plus the floor")
	fmt.Fprintln(out, "(1.25x at 200 requests per second) instead of 4x.")
}

// newFlakyServer returns a loopback server whose endpoints fail in
// scripted ways (see package retryhttptest), so each scene meets the same
// failures on every run.
func newFlakyServer() *rt.Server {
	ok := rt.Status(200).WithBody("ok\n")
	srv := rt.NewServer(rt.Sequence(rt.Status(404).WithBody("no such endpoint\n")))
	srv.Route("/unavailable-twice", rt.Sequence(rt.Status(503), rt.Status(503), ok))
	srv.Route("/reset-once", rt.Sequence(rt.Reset(), ok))
	srv.Route("/rate-limited", rt.Sequence(rt.Status(429).WithHeader("Retry-After", "1"), ok))
	srv.Route("/hang-once", rt.Sequence(rt.Hang(), ok))
	srv.Route("/charge-503", rt.Sequence(rt.Status(503).WithBody("try later\n")))
	// The payments endpoint honours Idempotency-Key. It charges on the first
	// request and loses that response on the way back; a retry with the same
	// key is answered from its record, without a second charge.
	l := &ledger{charged: map[string]bool{}}
	srv.Route("/charge", rt.Sequence(rt.ApplyThenDrop(l), rt.Respond(l)))
	srv.Route("/down", rt.Sequence(rt.Status(503)))
	return srv
}

type ledger struct {
	mu      sync.Mutex
	charged map[string]bool // idempotency key -> applied
	charges int
}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	if key == "" || !l.charged[key] {
		l.charged[key] = true
		l.charges++
	}
	n := l.charges
	l.mu.Unlock()
	fmt.Fprintf(w, "charged once (key %.8s…, %d charge in all)\n", key, n)
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
