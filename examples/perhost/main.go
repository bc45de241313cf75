// Command perhost shows one retryhttp client talking to two services that
// need different retry policies, set per host with Transport.Hosts:
//
//   - payments.example keeps the outcome of each Idempotency-Key, so its
//     POSTs may be retried: the Transport adds a key to each charge and
//     makes up to 3 attempts, 50 ms apart.
//   - every host under search.example is read-only and often overloaded:
//     up to 5 attempts, with full jitter from 20 ms, capped at 200 ms.
//   - any other host gets the client's default policy: no retries.
//
// A request can still choose for itself: retryhttp.WithPolicy with MaxAttempts 1
// sends it once whatever its host's policy says.
//
//	go run ./examples/perhost
//
// Both services are local test servers on the loopback interface; the
// client's dialer maps their names to them, so nothing leaves the machine.
// The program ends within a second and exits 1 if anything went other than
// described above.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/retryhttp/retryhttp"
)

func main() {
	payments := newPayments()
	paymentsSrv := httptest.NewServer(payments)
	defer paymentsSrv.Close()
	searchSrv := httptest.NewServer(newSearch())
	defer searchSrv.Close()

	// Names the client may dial, and where they really are.
	routes := map[string]string{
		"payments.example:80":  paymentsSrv.Listener.Addr().String(),
		"eu.search.example:80": searchSrv.Listener.Addr().String(),
		"legacy.example:80":    searchSrv.Listener.Addr().String(),
	}
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		target, ok := routes[addr]
		if !ok {
			return nil, fmt.Errorf("perhost: no route to %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, target)
	}}
	defer base.CloseIdleConnections()

	var waits []time.Duration // the waits of the request in flight
	tr := &retryhttp.Transport{
		Base:   base,
		Policy: retryhttp.Policy{MaxAttempts: 1}, // hosts not listed below: no retries
		Hosts: map[string]retryhttp.Policy{
			"payments.example": {
				MaxAttempts:     3,
				Backoff:         retryhttp.Constant(50 * time.Millisecond),
				IdempotencyKeys: &retryhttp.IdempotencyKeys{},
			},
			"*.search.example": {
				MaxAttempts: 5,
				Backoff:     retryhttp.FullJitter{Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond},
			},
		},
		OnRetry: func(e *retryhttp.RetryEvent) { waits = append(waits, e.Delay) },
	}
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}

	fmt.Println("retryhttp: one client, a policy per host")
	fmt.Println()
	fmt.Println("  payments.example   3 attempts, Idempotency-Key on POST, 50ms apart")
	fmt.Println("  *.search.example   5 attempts, full jitter 20ms..200ms")
	fmt.Println("  any other host     1 attempt (the client's default policy)")
	fmt.Println()

	requests := []struct {
		method, url string
		ctx         context.Context
		note        string
		want        outcome // what the policies above promise
	}{
		{http.MethodPost, "http://payments.example/charge", context.Background(),
			"", outcome{attempts: 2, status: http.StatusOK}},
		{http.MethodGet, "http://eu.search.example/?q=retries", context.Background(),
			"", outcome{attempts: 3, status: http.StatusOK}},
		{http.MethodGet, "http://eu.search.example/?q=budgets", retryhttp.WithPolicy(context.Background(), retryhttp.Policy{MaxAttempts: 1}),
			"MaxAttempts 1", outcome{attempts: 1, status: http.StatusServiceUnavailable}},
		{http.MethodGet, "http://legacy.example/?q=archive", context.Background(),
			"default policy", outcome{attempts: 1, status: http.StatusServiceUnavailable}},
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "REQUEST\tNOTE\tATTEMPTS\tWAITS\tRESULT")
	var unexpected []string
	for _, r := range requests {
		waits = waits[:0]
		got, result := send(client, r.ctx, r.method, r.url)
		fmt.Fprintf(w, "%s %s\t%s\t%d\t%s\t%s\n", r.method, strings.TrimPrefix(r.url, "http://"), r.note,
			got.attempts, formatWaits(waits), result)
		if got != r.want {
			unexpected = append(unexpected, fmt.Sprintf("%s %s: want %d attempts and status %d", r.method, r.url, r.want.attempts, r.want.status))
		}
	}
	w.Flush()

	posts, charges := payments.counts()
	fmt.Println()
	fmt.Printf("payments.example saw %d POST attempts and applied %d charge: the retry carried the same key.\n", posts, charges)
	if posts != 2 || charges != 1 {
		unexpected = append(unexpected, "payments.example: want 2 POST attempts and 1 charge")
	}
	if len(unexpected) > 0 {
		fmt.Println()
		for _, u := range unexpected {
			fmt.Println("UNEXPECTED:", u)
		}
		os.Exit(1)
	}
}

type outcome struct {
	attempts int
	status   int
}

// send makes one request and describes its result.
func send(client *http.Client, ctx context.Context, method, url string) (outcome, string) {
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"amount": 4200, "currency": "EUR"}`)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return outcome{}, err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		var e *retryhttp.Error
		if errors.As(err, &e) {
			return outcome{attempts: e.Attempts}, err.Error()
		}
		return outcome{}, err.Error()
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	result := strconv.Itoa(resp.StatusCode)
	if s := strings.TrimSpace(string(text)); s != "" {
		result += ": " + s
	}
	return outcome{attempts: retryhttp.Attempts(resp), status: resp.StatusCode}, result
}

func formatWaits(waits []time.Duration) string {
	if len(waits) == 0 {
		return "-"
	}
	s := make([]string, len(waits))
	for i, d := range waits {
		s[i] = d.Round(time.Millisecond).String()
	}
	return strings.Join(s, " ")
}

// payments applies each charge once per Idempotency-Key and answers a
// repeated key with the stored outcome. The first attempt of each charge
// meets an overloaded front end: the charge is applied, but the answer
// that reaches the client is a 503.
type payments struct {
	mu      sync.Mutex
	posts   int
	charges map[string]string // key -> stored answer
}

func newPayments() *payments { return &payments{charges: make(map[string]string)} }

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	key := r.Header.Get("Idempotency-Key")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts++
	if key == "" {
		http.Error(w, "Idempotency-Key required", http.StatusBadRequest)
		return
	}
	if answer, ok := p.charges[key]; ok {
		fmt.Fprintln(w, answer+", replayed")
		return
	}
	p.charges[key] = "42.00 EUR"
	http.Error(w, "front end overloaded", http.StatusServiceUnavailable)
}

func (p *payments) counts() (posts, charges int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts, len(p.charges)
}

// newSearch answers 503 to the first two attempts of each query, then the
// results.
func newSearch() http.Handler {
	var (
		mu   sync.Mutex
		seen = make(map[string]int)
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		mu.Lock()
		seen[q]++
		n := seen[q]
		mu.Unlock()
		if n <= 2 {
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "3 results")
	})
}
