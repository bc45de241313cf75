// Package h3retry lets a retryhttp.Transport retry requests sent over
// HTTP/3 with quic-go, as safely as over HTTP/1 and HTTP/2.
//
// It lives in a module of its own so that the retryhttp core never pulls in
// quic-go. Its package name is not http3, so as not to clash with quic-go's
// package in a program that imports both.
//
//	h3 := &http3.Transport{}
//	defer h3.Close()
//	client := &http.Client{Transport: h3retry.New(h3, retryhttp.Policy{})}
//
// # What it adds
//
// The core's rules know net/http's errors, not QUIC's or HTTP/3's. The base
// that NewBase returns wraps each such error in an error whose
// RetryClass method tells the core what became of the request, so that a
// request the server cannot have processed is retried whatever its method,
// one it may have processed only when it is idempotent or keyed, and one
// that another attempt would meet again (a certificate the client does not
// trust, no common QUIC version, a malformed message) never. The wrapper
// keeps the error's text and unwraps to it: errors.As still finds quic-go's
// and http3's errors. README.md has the table of every verdict, each
// pinned by a test against a real quic-go server.
//
// "Cannot have processed" comes from the server's word (H3_REQUEST_REJECTED,
// RFC 9114 section 8.1; a 0-RTT attempt the server rejected) or from the
// client's: the base watches, through net/http/httptrace, whether quic-go
// wrote the request's HEADERS frame, and a failure before it (a handshake
// that timed out, a connection refused) is one of a request the server never
// saw. quic-go sends a request again by itself once, on a new connection,
// when opening its stream failed or the server rejected it
// (H3_REQUEST_REJECTED, a GOAWAY): the watch restarts with each of its
// tries, so the verdict is that of the try whose error comes back.
//
// # Early data (0-RTT)
//
// A request whose method is http3.MethodGet0RTT or http3.MethodHead0RTT may
// go in 0-RTT data, before the handshake completes. If the server answers
// it 425 Too Early (RFC 8470), the base sends it again at once as a plain
// GET or HEAD, which quic-go sends only after the handshake, on the same
// connection, as RFC 8470 section 5.2 asks of a client; the Transport
// counts the two as one attempt. Early data the server rejects (it cannot
// read the session ticket: it restarted with new keys) fails the request
// with quic.Err0RTTRejected, of any method, since quic-go v0.65 opens no
// stream on such a connection; the error says nothing was processed, and
// the Transport retries after its wait, by when the client holds a ticket
// the server can read. The core takes those two methods for the idempotent
// GET and HEAD: it retries and hedges them as it does those.
package h3retry
