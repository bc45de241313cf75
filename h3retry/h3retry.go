package h3retry

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/quic-go/quic-go/http3"
	"github.com/retryhttp/retryhttp"
)

// NewBase returns an http.RoundTripper that sends each request through t,
// for a retryhttp.Transport's Base. It returns t's responses as they are;
// an error of QUIC or HTTP/3 comes back wrapped in an error that tells the
// Transport what became of the request (see the package doc), other errors
// (the context's, a bad URL's) as they are. A request with method
// http3.MethodGet0RTT or http3.MethodHead0RTT that the server answers 425
// Too Early is sent once more without early data. CloseIdleConnections on
// it closes t's idle connections. The caller keeps t, and closes it when
// done.
func NewBase(t *http3.Transport) http.RoundTripper {
	return &base{t: t}
}

// New returns a retryhttp.Transport with policy p over NewBase(t).
func New(t *http3.Transport, p retryhttp.Policy) *retryhttp.Transport {
	return &retryhttp.Transport{Base: NewBase(t), Policy: p}
}

type base struct{ t *http3.Transport }

func (b *base) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, wrote, err := b.send(req)
	if plain := withoutEarlyData(req.Method); plain != "" && err == nil && resp.StatusCode == http.StatusTooEarly {
		// RFC 8470 section 5.2: the server did not process the request,
		// which may have gone in early data; send it again after the
		// handshake, on the same connection.
		if again, ok := resendable(req, plain); ok {
			drainClose(resp.Body)
			resp, wrote, err = b.send(again)
		}
	}
	if err != nil {
		return nil, classify(err, wrote)
	}
	resp.Request = req
	return resp, nil
}

// send sends req through quic-go, and reports whether quic-go wrote the
// request's HEADERS frame on the connection of its last try.
func (b *base) send(req *http.Request) (*http.Response, bool, error) {
	var w watch
	w.trace = httptrace.ClientTrace{
		GetConn:      func(string) { w.wrote.Store(false) }, // each of quic-go's tries
		WroteHeaders: func() { w.wrote.Store(true) },
	}
	traced := req.WithContext(httptrace.WithClientTrace(req.Context(), &w.trace))
	resp, err := b.t.RoundTrip(traced)
	return resp, w.wrote.Load(), err
}

// watch follows one request through quic-go's tries.
type watch struct {
	trace httptrace.ClientTrace
	wrote atomic.Bool
}

// CloseIdleConnections closes the idle connections of the http3.Transport.
func (b *base) CloseIdleConnections() { b.t.CloseIdleConnections() }

// withoutEarlyData returns the method that sends a request of method m
// after the handshake, when m is one of quic-go's methods that may send it
// in 0-RTT data, and "" otherwise.
func withoutEarlyData(m string) string {
	switch m {
	case http3.MethodGet0RTT:
		return http.MethodGet
	case http3.MethodHead0RTT:
		return http.MethodHead
	}
	return ""
}

// resendable returns a copy of req with method m and a new body, if its
// body can be sent again.
func resendable(req *http.Request, m string) (*http.Request, bool) {
	again := req.Clone(req.Context())
	again.Method = m
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return nil, false
		}
		body, err := req.GetBody()
		if err != nil {
			return nil, false
		}
		again.Body = body
	}
	return again, true
}

// drainClose reads what is left of a small body, so that the stream ends
// cleanly, and closes it.
func drainClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	_ = body.Close()
}
