package retryhttp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

// orderServices starts the two services the order service of README.md
// calls, as TLS servers on loopback: a payments service that answers its
// first POST 503 and the next 201 Created, and notes each POST's
// Idempotency-Key; a catalog whose first request gets stuck until the
// client gives up on it, and the next answers at once. base dials them
// for payments.example.com and catalog.example.com.
func orderServices() (payments, catalog *httptest.Server, keys func() []string, base *http.Transport) {
	var mu sync.Mutex
	var seen []string
	payments = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Idempotency-Key"))
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			http.Error(w, "busy, try again", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	var stuck sync.Once
	catalog = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		stuck.Do(func() { first = true })
		if first {
			select {
			case <-r.Context().Done(): // the client gave up on the attempt
			case <-time.After(10 * time.Second):
			}
			return
		}
		fmt.Fprint(w, `{"id":42,"name":"teapot"}`)
	}))
	keys = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}

	addrs := map[string]string{
		"payments.example.com:443": payments.Listener.Addr().String(),
		"catalog.example.com:443":  catalog.Listener.Addr().String(),
	}
	base = payments.Client().Transport.(*http.Transport).Clone() // trusts the servers' certificate
	var d net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addrs[addr])
	}
	base.TLSClientConfig = base.TLSClientConfig.Clone()
	base.TLSClientConfig.ServerName = "example.com" // the name in httptest's certificate
	return payments, catalog, keys, base
}

// The example of README.md: an order service that charges through a
// payments host, which honours Idempotency-Key, and reads a catalog host
// that sometimes gets stuck, within its caller's 5 s deadline.
func Example_orderService() {
	payments, catalog, keys, base := orderServices()
	defer payments.Close()
	defer catalog.Close()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)) // Info; a retry logs at Debug
	// A charge's key is its order's: a retry, or the same order charged again, carries the same.
	orderKey := func(r *http.Request) (string, error) { return "order-" + r.Header.Get("X-Order"), nil }
	tr := &retryhttp.Transport{
		Hosts: map[string]retryhttp.Policy{
			// Payments stores each key's outcome: its POSTs get a key and can be retried.
			"payments.example.com": {IdempotencyKeys: &retryhttp.IdempotencyKeys{Generate: orderKey}},
			// The catalog answers in milliseconds or gets stuck: try again after 300 ms.
			"catalog.example.com": {AttemptTimeout: 300 * time.Millisecond},
		},
		Logger: logger,
	}
	// ... Base: nil means a pooled transport; the example's sends the hosts to test servers.
	tr.Base = base
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // retries included
	defer cancel()
	charge, _ := http.NewRequestWithContext(ctx, http.MethodPost,
		"https://payments.example.com/v1/charges", strings.NewReader(`{"order":"A-17"}`))
	charge.Header.Set("X-Order", "A-17")
	resp, err := client.Do(charge)
	if err != nil {
		fmt.Println(err) // wraps a *retryhttp.Error: its Attempts, Reason, Key and last error
		return
	}
	resp.Body.Close() // the key sent, and why retrying stopped if resp is a failure given up on
	fmt.Println("charge:", resp.Status, "after", retryhttp.Attempts(resp), "attempts, key",
		resp.Request.Header.Get("Idempotency-Key")+",", "gave up:", retryhttp.StopReason(resp))

	item, _ := http.NewRequestWithContext(ctx, http.MethodGet,
		"https://catalog.example.com/v1/items/42", nil)
	resp, err = client.Do(item)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("item:", resp.Status, "after", retryhttp.Attempts(resp), "attempts")

	s := tr.Stats()
	fmt.Printf("requests %d, attempts %d, retries %d\n", s.Requests, s.Attempts, s.Retries)
	// Explain returns the policy a request gets, each setting with the layer that sets it.
	for line := range strings.Lines(tr.Explain(charge)) {
		if !strings.HasSuffix(line, "default\n") { // print what this Transport sets
			fmt.Print(line)
		}
	}

	k := keys()
	fmt.Println("payments saw", len(k), "POSTs, one key:", k[0] != "" && k[0] == k[1])
	// Output:
	// charge: 201 Created after 2 attempts, key order-A-17, gave up: none
	// item: 200 OK after 2 attempts
	// requests 2, attempts 4, retries 2
	// POST https://payments.example.com/v1/charges
	// setting          value                                     from
	// IdempotencyKeys  Idempotency-Key on POST, PATCH            Hosts["payments.example.com"]
	// payments saw 2 POSTs, one key: true
}
