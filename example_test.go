package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/retryhttp/retryhttp"
)

// flakyServer starts a local server whose first failures requests are
// answered 503 Service Unavailable, and the rest 200 OK.
func flakyServer(failures int32) *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= failures {
			http.Error(w, "busy, try again", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
}

// Wrap a client's transport: requests that fail transiently are retried
// with the safe defaults (idempotent methods, transient statuses and network
// errors, up to 4 attempts with full-jitter backoff).
func Example() {
	srv := flakyServer(1)
	defer srv.Close()

	client := &http.Client{Transport: &retryhttp.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s %q after %d attempts\n", resp.Status, body, retryhttp.Attempts(resp))
	// Output: 200 OK "hello" after 2 attempts
}

// Wrap the transport of a client that is already configured: Base is where
// each attempt goes.
func ExampleTransport() {
	srv := flakyServer(2)
	defer srv.Close()

	client := &http.Client{Timeout: 10 * time.Second} // nil Transport: http.DefaultTransport
	client.Transport = &retryhttp.Transport{Base: client.Transport}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after", retryhttp.Attempts(resp), "attempts")
	// Output: 200 OK after 3 attempts
}

// Change the policy: three attempts, a fixed wait, only 503 retried, and a
// hook that reports each retry. A request that still fails gets the last
// response back, its body intact.
func ExamplePolicy() {
	srv := flakyServer(10)
	defer srv.Close()

	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{
			MaxAttempts: 3,
			Backoff:     retryhttp.Constant(10 * time.Millisecond),
			Statuses:    []int{http.StatusServiceUnavailable},
		},
		// The backoff alone sets the waits here. The default budget would
		// hold each retry until news of the server: another request's
		// success, or a probe after 100 to 200 ms without news.
		Budget: retryhttp.UnlimitedBudget(),
		OnRetry: func(e *retryhttp.RetryEvent) {
			fmt.Printf("attempt %d: %d, retrying in %v\n", e.Attempt, e.Response.StatusCode, e.Delay)
		},
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("gave up: %s %q after %d attempts\n", resp.Status, body, retryhttp.Attempts(resp))
	// Output:
	// attempt 1: 503, retrying in 10ms
	// attempt 2: 503, retrying in 10ms
	// gave up: 503 Service Unavailable "busy, try again\n" after 3 attempts
}

// NewClient is shorthand for wrapping a client with a policy.
func ExampleNewClient() {
	srv := flakyServer(1)
	defer srv.Close()

	client := retryhttp.NewClient(nil, retryhttp.Policy{Backoff: retryhttp.Constant(0)})
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after", retryhttp.Attempts(resp), "attempts")
	// Output: 200 OK after 2 attempts
}

// Turn retries off for one request through its context.
func ExampleWithoutRetries() {
	srv := flakyServer(1)
	defer srv.Close()

	client := &http.Client{Transport: &retryhttp.Transport{}}
	defer client.CloseIdleConnections()

	ctx := retryhttp.WithoutRetries(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after", retryhttp.Attempts(resp), "attempt")
	// Output: 503 Service Unavailable after 1 attempt
}

// A request that ends with an error says how many attempts were made and
// why the Transport stopped, and the last attempt's error shows through it.
func ExampleError() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	url := "http://" + ln.Addr().String() + "/"
	ln.Close() // nothing listens there now: connections are refused

	client := retryhttp.NewClient(nil, retryhttp.Policy{MaxAttempts: 3, Backoff: retryhttp.Constant(0)})
	defer client.CloseIdleConnections()

	_, err := client.Get(url)
	var e *retryhttp.Error
	if errors.As(err, &e) {
		fmt.Println("attempts:", e.Attempts)
		fmt.Println("reason:", e.Reason)
		fmt.Println("refused:", errors.Is(err, syscall.ECONNREFUSED))
	}
	// Output:
	// attempts: 3
	// reason: attempts exhausted
	// refused: true
}

// Set a policy per host: here the server on one port gets two attempts,
// every other host the default policy's four. Keys may also be a bare host
// ("api.example.com") or a wildcard ("*.example.com").
func ExampleTransport_hosts() {
	strict, lenient := flakyServer(10), flakyServer(10)
	defer strict.Close()
	defer lenient.Close()

	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{Backoff: retryhttp.Constant(0)},
		Hosts: map[string]retryhttp.Policy{
			strict.Listener.Addr().String(): {MaxAttempts: 2, Backoff: retryhttp.Constant(0)},
		},
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	for _, srv := range []*httptest.Server{strict, lenient} {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status, "after", retryhttp.Attempts(resp), "attempts")
	}
	// Output:
	// 503 Service Unavailable after 2 attempts
	// 503 Service Unavailable after 4 attempts
}

// Let POSTs be retried safely: the Transport adds an Idempotency-Key, the
// same on every attempt, so a server that honours keys applies the request
// once. Enable keys only for servers that honour them.
func ExampleIdempotencyKeys() {
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	client := retryhttp.NewClient(nil, retryhttp.Policy{
		Backoff:         retryhttp.Constant(0),
		IdempotencyKeys: &retryhttp.IdempotencyKeys{},
	})
	defer client.CloseIdleConnections()

	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"amount":1000}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after", retryhttp.Attempts(resp), "attempts")
	fmt.Println("a key on each attempt:", len(keys) == 2 && len(keys[0]) == 36)
	fmt.Println("the same key:", keys[0] == keys[1])
	// Output:
	// 201 Created after 2 attempts
	// a key on each attempt: true
	// the same key: true
}

// A Budget bounds the retries of everything that shares it. Ten requests,
// one after another, to a server that always fails make 13 attempts, not
// 40: the first, alone, gets its policy, paid by the budget's credit of 3
// retries; the credit is then spent, and with no other request to the host
// in flight, each later retry is refused at once (ReasonBudget), and its
// request gets the server's answer.
func ExampleBudget() {
	srv := flakyServer(1000)
	defer srv.Close()

	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{Backoff: retryhttp.Constant(0)},
		Budget: retryhttp.NewBudget(0.2, 3), // may be shared by several Transports
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	for range 10 {
		if resp, err := client.Get(srv.URL); err == nil {
			resp.Body.Close()
		}
	}
	s := tr.Stats()
	fmt.Printf("requests %d, attempts %d, retries %d, refused %d\n",
		s.Requests, s.Attempts, s.Retries, s.BudgetDenied)
	// Output: requests 10, attempts 13, retries 3, refused 9
}
