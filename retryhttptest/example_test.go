package retryhttptest_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// A retrying client meets a server that fails twice before it answers.
func Example() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.Status(503),
		retryhttptest.Status(503),
		retryhttptest.Status(200).WithBody("ok"),
	))
	defer srv.Close()

	client := retryhttp.NewClient(srv.Client(), retryhttp.Policy{Backoff: retryhttp.Constant(0)})
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()

	fmt.Println(resp.StatusCode, string(body), "after", retryhttp.Attempts(resp), "attempts")
	fmt.Println("server saw", len(srv.Requests()), "requests on", srv.Conns(), "connection")
	// Output:
	// 200 ok after 3 attempts
	// server saw 3 requests on 1 connection
}

// The server of the README: a script of failures, and the record of what
// the client sent. Here the client is a retrying one, and the caller's POST
// carries its own idempotency key, so it may be retried: after the 503, the
// retry meets the reset, which net/http answers by itself by sending the
// request again on a new connection (see Reset), where it gets the 429. Its
// Retry-After of a second is longer than the client will wait, so the 429
// comes back; the caller tries the order again later, with the same key.
func ExampleNewServer() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.Status(503),
		retryhttptest.Reset(), // TCP RST instead of a response
		retryhttptest.Status(429).WithHeader("Retry-After", "1"),
		retryhttptest.Status(200).WithBody("ok"),
	))
	defer srv.Close()
	// ... exercise your client against srv.URL, then:
	client := retryhttp.NewClient(srv.Client(), retryhttp.Policy{
		Backoff:       retryhttp.Constant(0),
		MaxRetryAfter: 100 * time.Millisecond,
	})
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"item": 7}`))
		req.Header.Set("Idempotency-Key", "order-7")
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status, "attempts:", retryhttp.Attempts(resp))
	}
	for _, r := range srv.Requests() {
		fmt.Println(r.Method, r.Path, r.Header.Get("Idempotency-Key"), r.BodySHA256, r.Conn)
	}
	// The server saw 4 requests, the Transport made 3 attempts: after the
	// reset, net/http sent the keyed POST again by itself, within the
	// second attempt. A request with the caller's own key is not watched,
	// so Stats.NetHTTPResends does not count that resend (see Stats).
	st := client.Transport.(*retryhttp.Transport).Stats()
	fmt.Println("requests at the server:", len(srv.Requests()), "attempts:", st.Attempts, "resends counted:", st.NetHTTPResends)
	// Output:
	// 429 Too Many Requests attempts: 2
	// 200 OK attempts: 1
	// POST /orders order-7 29d77365e0b45b3e0a5af5543acb1874e68b4a13bf7df891503391a0268a6a02 1
	// POST /orders order-7 29d77365e0b45b3e0a5af5543acb1874e68b4a13bf7df891503391a0268a6a02 1
	// POST /orders order-7 29d77365e0b45b3e0a5af5543acb1874e68b4a13bf7df891503391a0268a6a02 2
	// POST /orders order-7 29d77365e0b45b3e0a5af5543acb1874e68b4a13bf7df891503391a0268a6a02 2
	// requests at the server: 4 attempts: 3 resends counted: 0
}

// Sequence plays one step per request and then repeats its last step.
func ExampleSequence() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.Status(429).WithHeader("Retry-After", "1"),
		retryhttptest.Status(200),
	))
	defer srv.Close()

	for range 3 {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Printf("%d Retry-After=%q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Output:
	// 429 Retry-After="1"
	// 200 Retry-After=""
	// 200 Retry-After=""
}

// Cycle plays its steps over and over: here every other request fails.
func ExampleCycle() {
	srv := retryhttptest.NewServer(retryhttptest.Cycle(retryhttptest.Status(500), retryhttptest.Status(200)))
	defer srv.Close()

	var codes []int
	for range 4 {
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	fmt.Println(codes)
	// Output: [500 200 500 200]
}

// Routes give paths their own scripts; other paths get the server's.
func ExampleServer_Route() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(404)))
	defer srv.Close()
	srv.Route("POST /pay", retryhttptest.Sequence(retryhttptest.Status(503), retryhttptest.Status(201)))
	srv.Route("/health", retryhttptest.Sequence(retryhttptest.Status(204)))

	for _, path := range []string{"/pay", "/pay", "/health", "/missing"} {
		resp, err := srv.Client().Post(srv.URL+path, "text/plain", nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode)
	}
	// Output:
	// /pay 503
	// /pay 201
	// /health 204
	// /missing 404
}

// The record shows what each attempt carried: here, that a retried POST
// kept its idempotency key and its body.
func ExampleServer_Requests() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Status(503), retryhttptest.Status(201)))
	defer srv.Close()

	client := retryhttp.NewClient(srv.Client(), retryhttp.Policy{
		Backoff:         retryhttp.Constant(0),
		IdempotencyKeys: &retryhttp.IdempotencyKeys{},
	})
	resp, err := client.Post(srv.URL+"/orders", "application/json", strings.NewReader(`{"item": 7}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	reqs := srv.Requests()
	for _, r := range reqs {
		fmt.Println(r.Method, r.Path, r.BodyLen, "bytes on connection", r.Conn)
	}
	fmt.Println("same key:", reqs[0].Header.Get("Idempotency-Key") == reqs[1].Header.Get("Idempotency-Key"))
	fmt.Println("same body:", reqs[0].BodySHA256 == reqs[1].BodySHA256)
	// Output:
	// POST /orders 11 bytes on connection 1
	// POST /orders 11 bytes on connection 1
	// same key: true
	// same body: true
}

// Reset makes the client read a TCP reset instead of a response.
func ExampleReset() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Reset()))
	defer srv.Close()

	_, err := srv.Client().Get(srv.URL)
	fmt.Println("connection reset:", errors.Is(err, syscall.ECONNRESET))
	// Output: connection reset: true
}

// ApplyThenDrop applies a request and loses its response: a retrying
// client must not send a POST again unless it carries an idempotency key.
func ExampleApplyThenDrop() {
	orders := make(chan string, 2)
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.ApplyThenDrop(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			orders <- string(body)
		})),
		retryhttptest.Status(201),
	))
	defer srv.Close()

	client := retryhttp.NewClient(srv.Client(), retryhttp.Policy{Backoff: retryhttp.Constant(0)})
	_, err := client.Post(srv.URL, "text/plain", strings.NewReader("one coffee"))
	var e *retryhttp.Error
	if errors.As(err, &e) {
		fmt.Println("gave up:", e.Reason)
	}
	fmt.Println("applied:", <-orders, "; requests:", len(srv.Requests()))
	// Output:
	// gave up: unsafe to send again
	// applied: one coffee ; requests: 1
}

// CloseMidBody sends part of the body its Content-Length announces.
func ExampleCloseMidBody() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.CloseMidBody(4)))
	defer srv.Close()

	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	fmt.Println(resp.ContentLength, "announced,", len(body), "read:", err)
	// Output: 9 announced, 4 read: unexpected EOF
}

// Hang never answers; the client's timeout ends the request.
func ExampleHang() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(retryhttptest.Hang()))
	defer srv.Close()

	client := srv.Client()
	client.Timeout = 20 * time.Millisecond
	_, err := client.Get(srv.URL)
	var ne net.Error
	fmt.Println("timed out:", errors.As(err, &ne) && ne.Timeout())
	// Output: timed out: true
}

// After delays a step: here the response headers come late, and a
// per-attempt timeout turns the slow attempt into a retry.
func ExampleStep_After() {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(
		retryhttptest.Status(200).WithBody("late").After(time.Hour),
		retryhttptest.Status(200).WithBody("on time"),
	))
	defer srv.Close()

	client := retryhttp.NewClient(srv.Client(), retryhttp.Policy{
		Backoff:        retryhttp.Constant(0),
		AttemptTimeout: 50 * time.Millisecond,
	})
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body), "after a retry:", retryhttp.Attempts(resp) > 1)
	// Output: on time after a retry: true
}
