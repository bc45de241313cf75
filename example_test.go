package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
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
func ExampleWithPolicy_noRetries() {
	srv := flakyServer(1)
	defer srv.Close()

	client := &http.Client{Transport: &retryhttp.Transport{}}
	defer client.CloseIdleConnections()

	ctx := retryhttp.WithPolicy(context.Background(), retryhttp.Policy{MaxAttempts: 1})
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
		s.Requests, s.Attempts, s.Retries, s.BudgetRefusals)
	// Output: requests 10, attempts 13, retries 3, refused 9
}

// Give one request a policy of its own under a deadline: up to 10
// attempts, 50 ms apart, within the half second its caller allows. The
// first retry fits in it. The server then asks for a wait of a second
// (Retry-After), which would end past the deadline: rather than wait for
// the deadline to pass, the Transport returns that response at once, and
// the caller has the time left to do something else with.
func ExampleWithPolicy_deadline() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.Status(503),
		retryhttptest.Status(503).WithHeader("Retry-After", "1"),
	))
	defer srv.Close()

	tr := &retryhttp.Transport{
		// The backoff alone sets the waits here. The default budget would
		// hold the retry until news of the server: another request's
		// success, or a probe after 100 to 200 ms without news.
		Budget: retryhttp.UnlimitedBudget(),
		OnRetry: func(e *retryhttp.RetryEvent) {
			fmt.Printf("attempt %d: %d, next in %v\n", e.Attempt, e.Response.StatusCode, e.Delay)
		},
		OnGiveUp: func(e *retryhttp.GiveUpEvent) {
			fmt.Printf("gave up after %d attempts: %v\n", e.Attempts, e.Reason)
		},
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	ctx = retryhttp.WithPolicy(ctx, retryhttp.Policy{
		MaxAttempts: 10,
		Backoff:     retryhttp.Constant(50 * time.Millisecond),
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "after", retryhttp.Attempts(resp), "attempts, Retry-After:", resp.Header.Get("Retry-After"))
	fmt.Println("deadline passed:", ctx.Err() != nil)
	// Output:
	// attempt 1: 503, next in 50ms
	// gave up after 2 attempts: deadline
	// 503 Service Unavailable after 2 attempts, Retry-After: 1
	// deadline passed: false
}

// Stats counts what a Transport did since its first use: here one request
// that a retry rescued, and one that ran out of attempts.
func ExampleTransport_Stats() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(404)))
	defer srv.Close()
	srv.Route("/flaky", retryhttptest.Sequence(retryhttptest.Status(503), retryhttptest.Status(200)))
	srv.Route("/down", retryhttptest.Sequence(retryhttptest.Status(503)))

	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{MaxAttempts: 3, Backoff: retryhttp.Constant(0)},
		Budget: retryhttp.UnlimitedBudget(), // no wait in the budget's line: see ExampleBudget
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	for _, path := range []string{"/flaky", "/down"} {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(path, resp.Status, "after", retryhttp.Attempts(resp), "attempts")
	}
	s := tr.Stats()
	fmt.Printf("requests %d, attempts %d, retries %d\n", s.Requests, s.Attempts, s.Retries)
	fmt.Println("gave up:", s.GiveUps)
	// Output:
	// /flaky 200 OK after 2 attempts
	// /down 503 Service Unavailable after 3 attempts
	// requests 2, attempts 5, retries 3
	// gave up: map[attempts exhausted:1]
}

// With TrackHosts set, a Transport keeps the counters of Stats for each
// host (the URL's host, port included), for the first hosts it sees. Here
// the retry to the host that failed waited in the budget's line for news of
// it (a probe, 100 to 200 ms later); the other host's requests went at once.
func ExampleTransport_HostStats() {
	api := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503), retryhttptest.Status(200)))
	defer api.Close()
	auth := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(200)))
	defer auth.Close()

	tr := &retryhttp.Transport{
		Policy:     retryhttp.Policy{Backoff: retryhttp.Constant(0)},
		TrackHosts: 100,
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	for _, url := range []string{auth.URL, api.URL, auth.URL} {
		resp, err := client.Get(url)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	hosts := tr.HostStats() // keyed by "127.0.0.1:port"
	fmt.Println(len(hosts), "hosts")
	for _, h := range []struct {
		name string
		srv  *retryhttptest.Server
	}{{"api", api}, {"auth", auth}} {
		s := hosts[strings.TrimPrefix(h.srv.URL, "http://")]
		fmt.Printf("%s: requests %d, attempts %d, retries %d, waited in line %d\n",
			h.name, s.Requests, s.Attempts, s.Retries, s.BudgetWaits)
	}
	// Output:
	// 2 hosts
	// api: requests 1, attempts 2, retries 1, waited in line 0
	// auth: requests 2, attempts 2, retries 0, waited in line 0
}

// Hedge a slow request: when its first attempt has not answered after the
// hedge delay (here a fixed 50 ms; by default the p95 of the host's recent
// latencies), a copy is sent, and the first good answer wins. The server
// answers the first request it gets after a second, the next one at once;
// the losing attempt is canceled.
func ExampleHedge() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.Status(200).WithBody("slow").After(time.Second),
		retryhttptest.Status(200).WithBody("fast"),
	))
	defer srv.Close()

	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{Hedge: &retryhttp.Hedge{After: 50 * time.Millisecond}},
		OnRetry: func(e *retryhttp.RetryEvent) {
			if e.Hedge {
				fmt.Printf("attempt %d has not answered after %v: hedge\n", e.Attempt, e.Delay)
			}
		},
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	start := time.Now()
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%q from attempt %d\n", body, retryhttp.Attempts(resp))
	fmt.Println("sooner than the first attempt's answer:", time.Since(start) < time.Second)
	s := tr.Stats()
	fmt.Printf("attempts %d, hedges %d, hedge wins %d\n", s.Attempts, s.Hedges, s.HedgeWins)
	// Output:
	// attempt 1 has not answered after 50ms: hedge
	// "fast" from attempt 2
	// sooner than the first attempt's answer: true
	// attempts 2, hedges 1, hedge wins 1
}

// Throttle a host that rejects most requests. Against a host answering
// every request 503, the Transport sends the first 20 (fewer answers do not
// tell a host's state from chance), then rejects nearly every new request
// in the client, each with probability requests/(requests+1) here, the host
// having accepted none: an *Error of ReasonThrottled, and the host never
// sees the request. Retries are off in this example, so that each request
// is one attempt. Which requests are rejected is random; the output states
// what is certain.
func ExampleThrottle() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503)))
	defer srv.Close()

	tr := &retryhttp.Transport{Policy: retryhttp.Policy{
		MaxAttempts: 1,
		Throttle:    &retryhttp.Throttle{}, // K = 2, over the last 10 s
	}}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	const n = 100
	var throttled, firstThrottled int
	var throttledErr error
	for i := 1; i <= n; i++ {
		resp, err := client.Get(srv.URL)
		var e *retryhttp.Error
		if errors.As(err, &e) && e.Reason == retryhttp.ReasonThrottled {
			throttled++
			if throttledErr == nil {
				firstThrottled, throttledErr = i, err
			}
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	var e *retryhttp.Error
	if errors.As(throttledErr, &e) {
		fmt.Println(e)
		fmt.Println("attempts:", e.Attempts, "reason:", e.Reason)
	}
	fmt.Println("the first 20 were sent:", firstThrottled > 20)
	// The rest are each sent with probability at most 1/21: about 2 of 80.
	fmt.Println("more than 70 of the other 80 throttled:", throttled > 70)
	fmt.Println("the host saw only those not throttled:", len(srv.Requests()) == n-throttled)
	fmt.Println("counted in Stats:", tr.Stats().Throttled == uint64(throttled))
	// Output:
	// retryhttp: gave up after 0 attempts (throttled in the client)
	// attempts: 0 reason: throttled in the client
	// the first 20 were sent: true
	// more than 70 of the other 80 throttled: true
	// the host saw only those not throttled: true
	// counted in Stats: true
}

// A Logger gets a debug record for each retry and an info record for each
// request given up on, with OpenTelemetry's attribute names, and URLs
// without their query values. Here the handler leaves out the time, and the
// server's address, which changes from run to run, from the URL.
func ExampleTransport_logger() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503)))
	defer srv.Close()

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey:
				return slog.Attr{}
			case "url.full":
				a.Value = slog.StringValue(strings.TrimPrefix(a.Value.String(), srv.URL))
			}
			return a
		},
	}))
	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{MaxAttempts: 2, Backoff: retryhttp.Constant(10 * time.Millisecond)},
		Budget: retryhttp.UnlimitedBudget(), // else a retry record tells how long it waited in line
		Logger: logger,
	}
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	resp, err := client.Get(srv.URL + "/things?token=secret")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	// Output:
	// level=DEBUG msg="retryhttp: retrying" http.request.method=GET url.full="/things?token=REDACTED" server.address=127.0.0.1 http.request.resend_count=1 retryhttp.delay=10ms retryhttp.delay_source=backoff http.response.status_code=503
	// level=INFO msg="retryhttp: giving up" http.request.method=GET url.full="/things?token=REDACTED" server.address=127.0.0.1 http.request.resend_count=1 retryhttp.attempts=2 retryhttp.reason="attempts exhausted" http.response.status_code=503 error.type=503
}

// A service that calls another through retryhttp wraps its handler in
// AdviceHandler. When its upstream is down, the service's own retries
// give up, and the 503 it then answers carries X-Should-Retry: false: its
// callers, this one through retryhttp, do not retry what was retried one
// layer down, so the upstream gets 3 attempts rather than 4 times 3.
func ExampleAdviceHandler() {
	upstream := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503)))
	defer upstream.Close()

	toUpstream := &http.Client{Transport: &retryhttp.Transport{
		Policy: retryhttp.Policy{MaxAttempts: 3, Backoff: retryhttp.Constant(0)},
		Budget: retryhttp.UnlimitedBudget(), // no wait in the budget's line: see ExampleBudget
	}}
	defer toUpstream.CloseIdleConnections()
	service := httptest.NewServer(retryhttp.AdviceHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The call carries the request's context: that is how the
		// AdviceHandler learns that it gave up.
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, upstream.URL, nil)
		resp, err := toUpstream.Do(req)
		if err != nil {
			http.Error(w, "upstream failed", http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			http.Error(w, "upstream unavailable", http.StatusServiceUnavailable)
			return
		}
		io.Copy(w, resp.Body)
	})))
	defer service.Close()

	caller := &http.Client{Transport: &retryhttp.Transport{
		OnGiveUp: func(e *retryhttp.GiveUpEvent) { fmt.Println("the caller gave up:", e.Reason) },
	}}
	defer caller.CloseIdleConnections()
	resp, err := caller.Get(service.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status, "X-Should-Retry:", resp.Header.Get("X-Should-Retry"))
	fmt.Println("the caller's attempts:", retryhttp.Attempts(resp))
	fmt.Println("the upstream's requests:", len(upstream.Requests()))
	// Output:
	// the caller gave up: server said not to retry
	// 503 Service Unavailable X-Should-Retry: false
	// the caller's attempts: 1
	// the upstream's requests: 3
}

// Wrap the transport of any client. (The host
// is made up: this example is compiled, not run.)
func ExampleTransport_base() {
	client := &http.Client{
		Transport: &retryhttp.Transport{Base: http.DefaultTransport},
		Timeout:   10 * time.Second, // the deadline every retry stays inside
	}
	resp, err := client.Get("https://api.example.com/v1/things")
	if err != nil {
		log.Print(err)
		return
	}
	defer resp.Body.Close()
}

// A policy per client, per host and per
// request. The payments host keeps the 5 attempts and the 2 s attempt
// timeout of the Transport's policy: its entry leaves them zero. (The hosts
// are made up: this example is compiled, not run.)
func ExampleTransport_policies() {
	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{
			MaxAttempts:    5,
			Backoff:        retryhttp.DecorrelatedJitter{Base: 50 * time.Millisecond, Cap: 5 * time.Second},
			AttemptTimeout: 2 * time.Second, // per attempt, until the response headers
		},
		Hosts: map[string]retryhttp.Policy{
			// Payments honours Idempotency-Key: let POSTs carry one and be retried.
			"payments.example.com": {IdempotencyKeys: &retryhttp.IdempotencyKeys{}},
			"*.internal.example":   {MaxAttempts: 2},
		},
		OnRetry: func(e *retryhttp.RetryEvent) {
			log.Printf("retry after attempt %d in %v (%v)", e.Attempt, e.Delay, e.Source)
		},
	}
	client := &http.Client{Transport: tr}
	ctx := retryhttp.WithPolicy(context.Background(), retryhttp.Policy{MaxAttempts: 1}) // this request: one attempt
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://api.example.com/v1/things", nil)
	resp, err := client.Do(req)
	if err != nil {
		log.Print(err)
		return
	}
	defer resp.Body.Close()
}

// ExampleTransport_Explain prints the policy a host's requests get, and
// one request's under WithPolicy, with where each setting comes from.
func ExampleTransport_Explain() {
	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{AttemptTimeout: 2 * time.Second},
		Hosts: map[string]retryhttp.Policy{
			"api.example.com": {
				MaxAttempts:     3,
				IdempotencyKeys: &retryhttp.IdempotencyKeys{},
				Statuses:        []int{}, // off: no status is retried, only errors
			},
		},
	}
	ctx := retryhttp.WithPolicy(context.Background(), retryhttp.Policy{
		AttemptTimeout: -1, // off for this request
		Hedge:          &retryhttp.Hedge{},
	})
	req, _ := http.NewRequestWithContext(ctx, "POST", "https://api.example.com/v1/charges", nil)
	fmt.Print(tr.Explain(req))
	// Output:
	// POST https://api.example.com/v1/charges
	// setting          value                                                    from
	// MaxAttempts      3                                                        Hosts["api.example.com"]
	// Backoff          full jitter, 100ms to 10s                                default
	// Statuses         off (no status retried)                                  Hosts["api.example.com"]
	// Retryable        none (the default verdict)                               default
	// AttemptTimeout   off (the caller's deadline only)                         WithPolicy
	// MaxRetryAfter    30s                                                      default
	// HostWait         off                                                      default
	// MaxBufferedBody  64 KiB                                                   default
	// BufferResponse   off                                                      default
	// IdempotencyKeys  Idempotency-Key on POST, PATCH                           Hosts["api.example.com"]
	// Idempotent       not declared                                             default
	// Throttle         off                                                      default
	// Hedge            1 after p95 latency (2ms to 1s); 5% of requests at most  WithPolicy
	// ResumeResponse   off                                                      default
	// Timeline         off                                                      default
	// Budget           10 retries held, 0.55 earned per success                 default
}

// Timeline tells what a request went through, attempt by attempt, from what
// the client returned: here a 503 that asks for a second's wait, then a
// 200. (Its times vary from run to run, so the example shows no output; it
// prints two lines such as "attempt 1: 1ms, 503" and "attempt 2 after
// 1.04s of Retry-After: 1ms, 200".)
func ExampleTimeline() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.Status(503).WithHeader("Retry-After", "1"),
		retryhttptest.Status(200),
	))
	defer srv.Close()
	url := srv.URL

	tr := &retryhttp.Transport{Policy: retryhttp.Policy{Timeline: true}}
	resp, err := (&http.Client{Transport: tr}).Get(url)
	for _, a := range retryhttp.Timeline(resp, err) {
		fmt.Println(a) // attempt 2 after 1.04s of Retry-After: 1ms, 200
	}
	if err == nil {
		resp.Body.Close()
	}
}
