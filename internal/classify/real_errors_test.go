package classify

// TestClassifyRealErrors and the real errors it classifies. The errors
// that the root package's tests also replay through the Transport, and
// the scripted HTTP/2 server, are internal/testutil's.

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// TestClassifyRealErrors classifies the errors a real net/http client
// returns from real servers on loopback, HTTP/1 and HTTP/2, the server
// either net/http's own or testutil's ScriptedH2Server. Where Of
// recognizes an error by its text or its fields, this is what pins the
// match: a Go release that changes them fails here first.
func TestClassifyRealErrors(t *testing.T) {
	transient := Class{Transient: true}
	unprocessed := Class{Transient: true, NothingSent: true}
	cases := []struct {
		name string
		err  func(t testing.TB) error
		want Class
	}{
		// HTTP/1
		{"HTTP/1: server closed the idle connection a PUT took", testutil.ServerClosedIdleErr, transient},
		{"HTTP/1: TLS handshake timed out", errTLSHandshakeTimeout, unprocessed},
		{"HTTP/1: a proxy that refuses the connection", errProxyConnect, unprocessed},
		{"HTTP/1: connection closed under a request body (net.ErrClosed)", testutil.WriteOnClosedConnErr, transient},

		// HTTP/2, net/http's own server
		{"HTTP/2: connection force closed after another stream's write failed", testutil.ForceClosedErr, transient},
		{"HTTP/2: handler aborted, stream reset with INTERNAL_ERROR", errAbortedHandler, transient},

		// HTTP/2, the scripted server: stream resets
		{"HTTP/2: RST_STREAM NO_ERROR before a response", errStreamReset(h2NoError), transient},
		{"HTTP/2: RST_STREAM INTERNAL_ERROR", errStreamReset(h2InternalError), transient},
		{"HTTP/2: RST_STREAM FLOW_CONTROL_ERROR", errStreamReset(h2FlowControlError), transient},
		{"HTTP/2: RST_STREAM STREAM_CLOSED", errStreamReset(h2StreamClosed), transient},
		{"HTTP/2: RST_STREAM ENHANCE_YOUR_CALM", errStreamReset(h2EnhanceYourCalm), transient},
		{"HTTP/2: RST_STREAM CANCEL", errStreamReset(h2Cancel), transient},
		{"HTTP/2: RST_STREAM INADEQUATE_SECURITY", errStreamReset(h2InadequateSecurity), Class{}},
		{"HTTP/2: RST_STREAM HTTP_1_1_REQUIRED", errStreamReset(h2HTTP11Required), Class{}},
		{"HTTP/2: REFUSED_STREAM on a body net/http cannot rewind", errCannotRewind(func(c *testutil.H2Conn, id uint32) error {
			return c.Reset(id, h2RefusedStream)
		}), transient},

		// HTTP/2, the scripted server: GOAWAY
		{"HTTP/2: graceful GOAWAY on a body net/http cannot rewind", errCannotRewind(func(c *testutil.H2Conn, _ uint32) error {
			return c.GoAway(0, h2NoError)
		}), transient},
		{"HTTP/2: graceful GOAWAY above the stream, as net/http words it", errGracefulGoAway, unprocessed},
		{"HTTP/2: GOAWAY PROTOCOL_ERROR above the first stream", errGoAwayFirstStream(h2ProtocolError), unprocessed},
		{"HTTP/2: GOAWAY ENHANCE_YOUR_CALM above the first stream", errGoAwayFirstStream(h2EnhanceYourCalm), unprocessed},
		{"HTTP/2: GOAWAY HTTP_1_1_REQUIRED above the first stream", errGoAwayFirstStream(h2HTTP11Required), Class{NothingSent: true}},
		{"HTTP/2: GOAWAY NO_ERROR, then the connection closed", errGoAwayThenClose(h2NoError), transient},
		{"HTTP/2: GOAWAY INTERNAL_ERROR, then the connection closed", errGoAwayThenClose(h2InternalError), transient},
		{"HTTP/2: GOAWAY INADEQUATE_SECURITY, then the connection closed", errGoAwayThenClose(h2InadequateSecurity), Class{}},

		// HTTP/2, the scripted server: connections
		{"HTTP/2: connection closed without GOAWAY under a stream", errClosedUnderStream, transient},
		{"HTTP/2: client connection lost (no PING answered)", errLostPing, transient},
		{"HTTP/2: connection closed before its first stream", testutil.NotEstablishedErr, unprocessed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			require.Error(t, err)
			assert.Equal(t, tc.want, Of(err), "error %T: %v", err, err)
		})
	}
}

// More HTTP/2 error codes (RFC 9113 section 7), besides those of
// classify.go, that the scripted server's cases send.
const (
	h2NoError          = 0x0
	h2ProtocolError    = 0x1
	h2InternalError    = 0x2
	h2FlowControlError = 0x3
	h2StreamClosed     = 0x5
	h2EnhanceYourCalm  = 0xb
)

// ---- real errors ----

// errTLSHandshakeTimeout is net/http's error for a server that accepts the
// connection and never answers the TLS handshake.
func errTLSHandshakeTimeout(t testing.TB) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	var conns sync.WaitGroup
	t.Cleanup(conns.Wait)
	conns.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(io.Discard, c) // the ClientHello, unanswered, until the client gives up
		c.Close()
	})
	base := testutil.LoopbackBase(t)
	base.TLSHandshakeTimeout = 50 * time.Millisecond
	_, err = base.RoundTrip(testutil.NewRequest(t, "POST", "https://"+ln.Addr().String()+"/", strings.NewReader("x")))
	return err
}

// errProxyConnect is net/http's error for an https request through a proxy
// that refuses the connection: wrapped as an OpError "proxyconnect", under
// which Of finds the dial's.
func errProxyConnect(t testing.TB) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	base := testutil.LoopbackBase(t)
	base.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: addr})
	_, err = base.RoundTrip(testutil.NewRequest(t, "POST", "https://payments.test/", strings.NewReader("x")))
	var op *net.OpError
	require.ErrorAs(t, err, &op)
	require.Equal(t, "proxyconnect", op.Op)
	return err
}

// errAbortedHandler returns the error of a GET whose handler panics with
// http.ErrAbortHandler on net/http's HTTP/2 server.
func errAbortedHandler(t testing.TB) error {
	s, _, base := testutil.NewH2Server(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	err := testutil.RoundTripErr(t, base, testutil.NewRequest(t, "GET", s.URL, nil))
	var se h2StreamError
	require.ErrorAs(t, err, &se)
	require.EqualValues(t, h2InternalError, se.Code)
	return err
}

// errStreamReset returns a case whose server resets the first stream with
// code. (net/http resends a GET itself after REFUSED_STREAM and after a
// PROTOCOL_ERROR reset, so these two are not among the cases.)
func errStreamReset(code uint32) func(t testing.TB) error {
	return func(t testing.TB) error {
		s := testutil.NewScriptedH2Server(t, func(c *testutil.H2Conn) {
			if id, err := c.Request(); err == nil {
				c.Reset(id, code)
			}
		})
		err := testutil.RoundTripErr(t, testutil.H2CTransport(t), testutil.NewRequest(t, "GET", s.URL, nil))
		var se h2StreamError
		require.ErrorAs(t, err, &se)
		require.Equal(t, code, se.Code)
		return err
	}
}

// errCannotRewind returns a case whose server answers the first stream
// with act. The stream carries a PUT body without GetBody: where act makes
// net/http want to resend the request itself, it cannot rewind the body,
// and says so.
func errCannotRewind(act func(c *testutil.H2Conn, id uint32) error) func(t testing.TB) error {
	return func(t testing.TB) error {
		s := testutil.NewScriptedH2Server(t, func(c *testutil.H2Conn) {
			if id, err := c.Request(); err == nil {
				act(c, id)
			}
		})
		req := testutil.NewRequest(t, "PUT", s.URL, io.NopCloser(strings.NewReader("body")))
		req.ContentLength = 4
		return testutil.RoundTripErr(t, testutil.H2CTransport(t), req)
	}
}

// errGracefulGoAway returns net/http's error for a stream above the last
// stream ID of a graceful GOAWAY. net/http resends the request by itself,
// and lets the error out only after its seventh attempt (about a minute
// later), through a Go 1.26 http.ClientConn, or quoted in the error it
// returns when it cannot rewind the body. The text is taken from that last
// one, as net/http wrote it.
func errGracefulGoAway(t testing.TB) error {
	err := errCannotRewind(func(c *testutil.H2Conn, _ uint32) error { return c.GoAway(0, h2NoError) })(t)
	_, quoted, ok := strings.Cut(err.Error(), "cannot retry err [")
	require.True(t, ok, "error %q", err)
	quoted, _, ok = strings.Cut(quoted, "] after Request.Body was written")
	require.True(t, ok, "error %q", err)
	return errors.New(quoted)
}

// errGoAwayFirstStream returns a case whose server answers the first stream
// of a connection with a GOAWAY below it and an error code, which net/http
// does not resend.
func errGoAwayFirstStream(code uint32) func(t testing.TB) error {
	return func(t testing.TB) error {
		s := testutil.NewScriptedH2Server(t, func(c *testutil.H2Conn) {
			if _, err := c.Request(); err == nil {
				c.GoAway(0, code)
			}
		})
		return testutil.RoundTripErr(t, testutil.H2CTransport(t), testutil.NewRequest(t, "GET", s.URL, nil))
	}
}

// errGoAwayThenClose returns a case whose server sends GOAWAY with the
// first stream as the last it processes, and then closes the connection
// without answering it.
func errGoAwayThenClose(code uint32) func(t testing.TB) error {
	return func(t testing.TB) error {
		s := testutil.NewScriptedH2Server(t, func(c *testutil.H2Conn) {
			if id, err := c.Request(); err == nil {
				c.GoAway(id, code)
				c.HangUp()
			}
		})
		return testutil.RoundTripErr(t, testutil.H2CTransport(t), testutil.NewRequest(t, "GET", s.URL, nil))
	}
}

// errClosedUnderStream returns the error of a GET whose connection the
// server closes, without a GOAWAY, before answering.
func errClosedUnderStream(t testing.TB) error {
	s := testutil.NewScriptedH2Server(t, func(c *testutil.H2Conn) {
		if _, err := c.Request(); err == nil {
			c.HangUp()
		}
	})
	return testutil.RoundTripErr(t, testutil.H2CTransport(t), testutil.NewRequest(t, "GET", s.URL, nil))
}

// errLostPing returns the error of a GET on a connection whose server
// falls silent: it answers neither the request nor the client's PINGs.
func errLostPing(t testing.TB) error {
	s := testutil.NewScriptedH2Server(t, func(c *testutil.H2Conn) {
		c.IgnorePings = true
		c.Request()
	})
	tr := testutil.H2CTransport(t)
	tr.HTTP2 = &http.HTTP2Config{SendPingTimeout: 10 * time.Millisecond, PingTimeout: 10 * time.Millisecond}
	return testutil.RoundTripErr(t, tr, testutil.NewRequest(t, "GET", s.URL, nil))
}
