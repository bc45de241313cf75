// Package retryhttptest provides a scriptable, faulty HTTP server for
// testing clients that retry, in the manner of net/http/httptest, on which
// it is built.
//
// Every client that retries needs the same checks: does it survive a 503, a
// 429 with Retry-After, a reset connection, a response lost after the
// request was applied, slow headers, a body cut short, a server that never
// answers? And did it send what it should: the same body and the same
// idempotency key on every attempt, over a reused connection? A Server
// answers each request with the next Step of a Script and records every
// request it received, so a test states the faults in a few values and
// asserts on what the server saw:
//
//	srv := retryhttptest.NewServer(retryhttptest.Sequence(
//		retryhttptest.Status(503),
//		retryhttptest.Status(429).WithHeader("Retry-After", "1"),
//		retryhttptest.Status(200).WithBody("ok"),
//	))
//	defer srv.Close()
//	// ... call srv.URL with the client under test ...
//	reqs := srv.Requests() // method, path, headers, body hash, connection of each attempt
//
// A Script is a sequence of steps (step i answers the i-th request; the
// last repeats) or a cycle of them. The server's script answers every
// request unless a route set with Server.Route matches it, in which case
// the route's own script does. Scripts are deterministic: the only
// ordering they depend on is the order in which requests arrive.
//
// The server listens on the loopback interface only. NewServer serves
// HTTP/1.1 in the clear; NewTLSServer serves HTTPS with HTTP/2 for clients
// that offer it (as the client of Server.Client does), which makes the
// GOAWAY of Step.GoAway possible. All methods of a Server are safe for
// simultaneous use, and Close leaves no goroutine of the server running.
//
// The server reads each request body to its end before it plays a step,
// so it can record the body's length and SHA-256 digest; a Respond or
// ApplyThenDrop handler reads the same bytes again from the request.
package retryhttptest
