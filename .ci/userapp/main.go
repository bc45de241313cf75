// Command userapp is the program of CI's consumer check (.ci/consumer): a
// user's own module, outside this repository's workspace, that gets retryhttp
// and otelretry by module path from a module proxy, as a user would. It is
// not a package of the retryhttp module: .ci/consumer copies it into a new
// module in a temporary directory.
//
// Against a loopback server it wraps http.DefaultTransport in a
// retryhttp.Transport with a policy for the server's host, sends a POST that
// the Transport gives an Idempotency-Key (the server fails its first attempt
// with a 503), then a GET whose first attempt hangs past the host's attempt
// timeout, under the request's deadline, then a POST /search declared
// idempotent as net/http lets it (an Idempotency-Key field with a nil value),
// which is retried without a key; otelretry records traces and metrics. It
// prints the policy the host's POSTs get (Transport.Explain), what happened,
// and the requests the server saw beside the Transport's attempts, which
// .ci/consumer compares with want.txt, and exits non-zero if anything is not
// as it should be.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/otelretry"
)

const (
	attemptTimeout = 200 * time.Millisecond
	deadline       = 5 * time.Second
)

// server fails the first POST /pay and POST /search with a 503 and lets the
// first GET /slow hang until its client gives up; the next attempts succeed.
type server struct {
	mu    sync.Mutex
	calls map[string]int
	keys  []string // the Idempotency-Key of each POST /pay
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	route := r.Method + " " + r.URL.Path
	s.calls[route]++
	n := s.calls[route]
	if route == "POST /pay" {
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
	}
	s.mu.Unlock()
	switch {
	case route == "POST /pay" && n == 1:
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case route == "POST /pay":
		fmt.Fprintf(w, "paid %s", body)
	case route == "POST /search" && n == 1:
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case route == "POST /search" && r.Header.Get("Idempotency-Key") == "":
		fmt.Fprintf(w, "found %s", body)
	case route == "GET /slow" && n == 1:
		select {
		case <-r.Context().Done():
		case <-time.After(deadline):
		}
	case route == "GET /slow":
		fmt.Fprint(w, "fast")
	default:
		http.NotFound(w, r)
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "userapp:", err)
		os.Exit(1)
	}
}

func run() error {
	s := &server{calls: make(map[string]int)}
	srv := httptest.NewServer(s)
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		return err
	}

	tr := &retryhttp.Transport{
		Base:   http.DefaultTransport,
		Policy: retryhttp.Policy{MaxAttempts: 3, Backoff: retryhttp.Constant(10 * time.Millisecond)},
		Hosts: map[string]retryhttp.Policy{
			// This host honours Idempotency-Key: its POSTs get one and may be retried.
			u.Hostname(): {IdempotencyKeys: &retryhttp.IdempotencyKeys{}, AttemptTimeout: attemptTimeout},
		},
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	client := &http.Client{Transport: otelretry.NewTransport(tr,
		otelretry.WithTracerProvider(tp), otelretry.WithMeterProvider(mp))}

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()

	// The host's policy does not depend on the port: print it without one.
	probe, err := http.NewRequest(http.MethodPost, "http://"+u.Hostname()+"/pay", nil)
	if err != nil {
		return err
	}
	fmt.Print(tr.Explain(probe))

	body, attempts, err := send(ctx, client, http.MethodPost, srv.URL+"/pay", "order-1")
	if err != nil {
		return err
	}
	s.mu.Lock()
	keys := slices.Clone(s.keys)
	s.mu.Unlock()
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		return fmt.Errorf("POST /pay: Idempotency-Keys %q, want one key on both attempts", keys)
	}
	fmt.Printf("POST /pay: %q after %d attempts, the same Idempotency-Key on both\n", body, attempts)

	start := time.Now()
	body, attempts, err = send(ctx, client, http.MethodGet, srv.URL+"/slow", "")
	if err != nil {
		return err
	}
	took := time.Since(start)
	if took < attemptTimeout || took > deadline/2 {
		return fmt.Errorf("GET /slow took %v, want about the attempt timeout (%v)", took, attemptTimeout)
	}
	fmt.Printf("GET /slow: %q after %d attempts, the first cut at the attempt timeout, within the deadline\n", body, attempts)

	body, attempts, err = send(ctx, client, http.MethodPost, srv.URL+"/search", "q=retry", "Idempotency-Key")
	if err != nil {
		return err
	}
	fmt.Printf("POST /search: %q after %d attempts, declared idempotent, no key sent\n", body, attempts)

	st := tr.Stats()
	fmt.Printf("stats: %+v\n", st)
	s.mu.Lock()
	seen := 0
	for _, n := range s.calls {
		seen += n
	}
	s.mu.Unlock()
	fmt.Printf("the server saw %d requests: %d attempts and %d resends counted\n", seen, st.Attempts, st.NetHTTPResends)
	if uint64(seen) != st.Attempts+st.NetHTTPResends {
		return fmt.Errorf("the server saw %d requests, the Transport counts %d", seen, st.Attempts+st.NetHTTPResends)
	}

	if err := tp.ForceFlush(ctx); err != nil {
		return err
	}
	var names []string
	for _, sp := range spans.Ended() {
		names = append(names, fmt.Sprintf("%s (%s)", sp.Name(), sp.SpanKind()))
	}
	slices.Sort(names)
	fmt.Printf("spans: %s\n", strings.Join(names, ", "))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		return err
	}
	sums := make(map[string]int64)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range d.DataPoints {
					sums[m.Name] += dp.Value
				}
			}
		}
	}
	fmt.Printf("metrics: %s %d, %s %d\n",
		otelretry.MetricAttempts, sums[otelretry.MetricAttempts], otelretry.MetricRetries, sums[otelretry.MetricRetries])
	if st.Requests != 3 || st.Attempts != 6 || st.Retries != 3 {
		return fmt.Errorf("stats %+v: want 3 requests, 6 attempts, 3 retries", st)
	}
	return nil
}

// send sends one request and returns the response's body and the attempts it
// took; a status other than 200 is an error. Each of nilFields is set in the
// request's header with a nil value: present, but not sent.
func send(ctx context.Context, client *http.Client, method, url, body string, nilFields ...string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return "", 0, err
	}
	for _, f := range nilFields {
		req.Header[f] = nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", 0, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("%s %s: %s", method, req.URL.Path, resp.Status)
	}
	return string(b), retryhttp.Attempts(resp), nil
}
