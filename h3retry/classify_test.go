package h3retry

// Each verdict of classify, pinned against the error a real quic-go client
// gets from a real quic-go server on loopback (or from a UDP port where
// nothing answers): the test produces the fault, checks that quic-go
// returns the error README.md's table names, and checks the verdict the
// base's error carries. Where the core's behaviour is the point (an
// unkeyed POST retried only when nothing was processed), the request goes
// through a retryhttp.Transport too.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	h3qlog "github.com/quic-go/quic-go/http3/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// retryClass returns the verdict err carries, and whether it carries one.
func retryClass(err error) (transient, nothingSent, ok bool) {
	var rc interface{ RetryClass() (bool, bool) }
	if !errors.As(err, &rc) {
		return false, false, false
	}
	transient, nothingSent = rc.RetryClass()
	return transient, nothingSent, true
}

// requireVerdict fails the test unless err carries the verdict.
func requireVerdict(t *testing.T, err error, transient, nothingSent bool) {
	t.Helper()
	require.Error(t, err)
	gotT, gotN, ok := retryClass(err)
	require.True(t, ok, "no RetryClass on %T: %v", err, err)
	assert.Equal(t, transient, gotT, "transient, for %v", err)
	assert.Equal(t, nothingSent, gotN, "nothing sent, for %v", err)
}

// h3Code returns the HTTP/3 error in err: its code, and whether the peer
// sent it.
func h3Code(t *testing.T, err error) (http3.ErrCode, bool) {
	t.Helper()
	var e *http3.Error
	require.ErrorAs(t, err, &e)
	return e.ErrorCode, e.Remote
}

// fastRetries is a policy whose waits are too short to slow a test.
func fastRetries(attempts int) retryhttp.Policy {
	return retryhttp.Policy{MaxAttempts: attempts, Backoff: retryhttp.Constant(time.Millisecond)}
}

// H3_REQUEST_REJECTED (RFC 9114 section 8.1): the server says it did not
// process the request. quic-go itself sends such a request again once, on
// a new connection; the base's error is the second rejection's, and says
// nothing was processed, so the Transport retries even an unkeyed POST.
func TestRequestRejectedIsNothingSent(t *testing.T) {
	var n atomic.Int32
	srv := newServer(t, resetsThenOK(t, &n, 2, http3.ErrCodeRequestRejected))
	h3 := newClient(t)

	_, _, err := do(t, NewBase(h3), http.MethodPost, srv.URL+"/pay", "charge")
	code, remote := h3Code(t, err)
	assert.Equal(t, http3.ErrCodeRequestRejected, code)
	assert.True(t, remote)
	requireVerdict(t, err, true, true)
	reqs := srv.Requests()
	require.Len(t, reqs, 2, "quic-go sent the rejected request again itself, once")
	assert.NotEqual(t, reqs[0].Conn, reqs[1].Conn, "on a new connection")

	n.Store(1) // one more rejection (and quic-go's resend gets the 200)
	resp, body, err := do(t, New(h3, fastRetries(2)), http.MethodPost, srv.URL+"/pay", "charge")
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 1, retryhttp.Attempts(resp))

	n.Store(0) // two rejections: the Transport's retry gets the 200
	resp, body, err = do(t, New(h3, fastRetries(2)), http.MethodPost, srv.URL+"/pay", "charge")
	require.NoError(t, err, "an unkeyed POST the server rejected is retried")
	assert.Equal(t, "ok", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	for _, r := range srv.Requests() {
		assert.Equal(t, testutil.SHA256Hex([]byte("charge")), r.BodySHA256, "every send carried the whole body")
	}
}

// A handshake that never completes: nothing answers on the port, and
// quic-go gives up after HandshakeIdleTimeout with the same error as for a
// connection idle too long (*quic.IdleTimeoutError), or, when it looks at
// its timers late, with *quic.HandshakeTimeoutError (see
// timedOutInHandshake). The request was never written, so nothing was
// sent.
func TestHandshakeIdleTimeoutIsNothingSent(t *testing.T) {
	silent := listenUDP(t, 0) // reads nothing, answers nothing
	t.Cleanup(func() { _ = silent.Close() })
	url := "https://" + silent.LocalAddr().String() + "/pay"
	h3 := newClient(t, func(tr *http3.Transport) { tr.QUICConfig.HandshakeIdleTimeout = 50 * time.Millisecond })

	_, _, err := do(t, NewBase(h3), http.MethodPost, url, "charge")
	require.True(t, timedOutInHandshake(err), "%v", err)
	requireVerdict(t, err, true, true)
	var netErr net.Error
	require.ErrorAs(t, err, &netErr)
	assert.True(t, netErr.Timeout(), "still reads as a timeout")

	_, _, err = do(t, New(h3, fastRetries(2)), http.MethodPost, url, "charge")
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonExhausted, e.Reason, "the unkeyed POST was retried: %v", err)
	assert.Equal(t, 2, e.Attempts)
}

// timedOutInHandshake reports whether err is quic-go's error for a
// handshake that nothing answered: *quic.IdleTimeoutError, after
// HandshakeIdleTimeout of silence, as a rule; *quic.HandshakeTimeoutError
// when quic-go's connection checks its timers more than
// HandshakeIdleTimeout late, or sends its first packet that late (a loaded
// machine: it checks the limit of the whole handshake, twice
// HandshakeIdleTimeout from the connection's creation, first). Which of
// the two comes is the scheduler's doing; their verdict is the same.
func timedOutInHandshake(err error) bool {
	var (
		idle      *quic.IdleTimeoutError
		handshake *quic.HandshakeTimeoutError
	)
	return errors.As(err, &idle) || errors.As(err, &handshake)
}

// A server that sheds new connections (quic.Config.GetConfigForClient
// returning an error) closes them in the handshake with CONNECTION_REFUSED
// (RFC 9000 section 20.1): nothing was processed.
func TestConnectionRefusedIsNothingSent(t *testing.T) {
	var refusing atomic.Bool
	refusing.Store(true)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) },
		func(c *quic.Config) {
			conf := c.Clone()
			c.GetConfigForClient = func(*quic.ClientInfo) (*quic.Config, error) {
				if refusing.Load() {
					return nil, errors.New("busy")
				}
				return conf, nil
			}
		})
	h3 := newClient(t)

	_, _, err := do(t, NewBase(h3), http.MethodPost, srv.URL+"/pay", "charge")
	var refused *quic.TransportError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, quic.ConnectionRefused, refused.ErrorCode)
	assert.True(t, refused.Remote)
	requireVerdict(t, err, true, true)

	tr := New(h3, fastRetries(2))
	tr.OnRetry = func(e *retryhttp.RetryEvent) {
		if errors.As(e.Err, &refused) {
			refusing.Store(false)
		}
	}
	resp, body, err := do(t, tr, http.MethodPost, srv.URL+"/pay", "charge")
	require.NoError(t, err, "the unkeyed POST is retried")
	assert.Equal(t, "ok", body)
	assert.Equal(t, 2, retryhttp.Attempts(resp))
	assert.Len(t, srv.Requests(), 1)
}

// H3_REQUEST_CANCELLED from the server: it gave up on a request it may have
// begun. Transient, but a GET only is retried, not an unkeyed POST.
func TestRequestCancelledIsTransient(t *testing.T) {
	var n atomic.Int32
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			assert.NoError(t, resetStream(w, http3.ErrCodeRequestCanceled))
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	h3 := newClient(t)

	_, _, err := get(t, NewBase(h3), srv.URL)
	code, remote := h3Code(t, err)
	assert.Equal(t, http3.ErrCodeRequestCanceled, code)
	assert.True(t, remote)
	requireVerdict(t, err, true, false)
	require.Len(t, srv.Requests(), 1, "quic-go does not send it again")

	n.Store(0)
	resp, _, err := get(t, New(h3, fastRetries(2)), srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 2, retryhttp.Attempts(resp), "a GET is retried")

	n.Store(0)
	_, _, err = do(t, New(h3, fastRetries(2)), http.MethodPost, srv.URL, "charge")
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonUnsafe, e.Reason, "an unkeyed POST is not")
}

// The server vanishes mid-request (everything it sends is lost): the
// client's connection times out idle. The request was written.
func TestIdleTimeoutIsTransient(t *testing.T) {
	var vanish atomic.Pointer[faultConn]
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		vanish.Load().drop.Store(true)
		<-r.Context().Done()
	}, func(c *quic.Config) { c.MaxIdleTimeout = 100 * time.Millisecond })
	vanish.Store(srv.pc)
	h3 := newClient(t, func(tr *http3.Transport) { tr.QUICConfig.MaxIdleTimeout = 100 * time.Millisecond })

	_, _, err := get(t, NewBase(h3), srv.URL)
	var idle *quic.IdleTimeoutError
	require.ErrorAs(t, err, &idle)
	requireVerdict(t, err, true, false)
}

// The server restarts and loses its connections' state: a request written
// on the old connection meets a stateless reset (RFC 9000 section 10.3).
//
// Any datagram of the old connection that reaches the restarted server
// draws a reset: the request's, or one the client sent before it (an ACK
// of the last answer, sent up to max_ack_delay later). A reset drawn by an
// earlier datagram can reach the client before the request's headers are
// written (nothing sent, rightly), or before its stream is opened, and
// quic-go then sends the request on a new connection by itself, which
// succeeds. So the restarted server's datagrams are held back until the
// request's headers are written: whichever datagram drew it, the reset
// meets the request written.
func TestStatelessResetIsTransient(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	h3 := newClient(t)
	_, _, err := get(t, NewBase(h3), srv.URL)
	require.NoError(t, err)

	srv.stop()
	release := srv.pc.hold()
	srv.restart()
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{WroteHeaders: release})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, _, err = send(NewBase(h3), req)
	var reset *quic.StatelessResetError
	require.ErrorAs(t, err, &reset)
	requireVerdict(t, err, true, false)

	_, body, err := get(t, NewBase(h3), srv.URL)
	require.NoError(t, err, "a new connection reaches the restarted server")
	assert.Equal(t, "ok", body)
}

// The server closes at once (http3.Server.Close) with a request in flight:
// the connection is closed with H3_NO_ERROR, and the request may have been
// processed.
func TestServerCloseWithNoErrorIsTransient(t *testing.T) {
	arrived := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	h3 := newClient(t)
	go func() {
		<-arrived
		_ = srv.srv.Close()
	}()
	_, _, err := get(t, NewBase(h3), srv.URL)
	code, remote := h3Code(t, err)
	assert.Equal(t, http3.ErrCodeNoError, code)
	assert.True(t, remote)
	var app *quic.ApplicationError
	require.ErrorAs(t, err, &app, "a connection close, not a stream reset")
	requireVerdict(t, err, true, false)
}

// A certificate the client does not trust: every connection meets it.
func TestUntrustedCertificateIsNeverRetried(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	h3 := newClient(t, func(tr *http3.Transport) { tr.TLSClientConfig = &tls.Config{} })

	_, _, err := get(t, NewBase(h3), srv.URL)
	var certErr *tls.CertificateVerificationError
	require.ErrorAs(t, err, &certErr)
	var transportErr *quic.TransportError
	require.ErrorAs(t, err, &transportErr)
	assert.True(t, transportErr.ErrorCode.IsCryptoError())
	requireVerdict(t, err, false, false)

	_, _, err = get(t, New(h3, fastRetries(3)), srv.URL)
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonNotTransient, e.Reason)
	assert.Equal(t, 1, e.Attempts)
}

// A client that speaks only a QUIC version the server lacks: the server's
// Version Negotiation packet ends the dial.
func TestVersionNegotiationFailureIsNeverRetried(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {},
		func(c *quic.Config) { c.Versions = []quic.Version{quic.Version1} })
	h3 := newClient(t, func(tr *http3.Transport) { tr.QUICConfig.Versions = []quic.Version{quic.Version2} })

	_, _, err := get(t, NewBase(h3), srv.URL)
	var vn *quic.VersionNegotiationError
	require.ErrorAs(t, err, &vn)
	requireVerdict(t, err, false, false)

	_, _, err = get(t, New(h3, fastRetries(3)), srv.URL)
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonNotTransient, e.Reason)
}

// A request the server finds malformed: quic-go's server resets its stream
// with H3_MESSAGE_ERROR. Here, a TE field other than "trailers" (RFC 9114
// section 4.2), which quic-go's client sends as it is.
func TestMessageErrorIsNeverRetried(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {})
	h3 := newClient(t)
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("TE", "gzip")

	_, _, err = send(NewBase(h3), req)
	code, remote := h3Code(t, err)
	assert.Equal(t, http3.ErrCodeMessageError, code)
	assert.True(t, remote)
	requireVerdict(t, err, false, false)
	assert.Empty(t, srv.Requests(), "no handler saw it")

	_, _, err = send(New(h3, fastRetries(3)), req)
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonNotTransient, e.Reason)
}

// The caller's cancellation reaches the core as the context's error,
// unclassified: the core decides it is the caller's, and stops.
func TestCallersCancellationIsNotRetried(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	h3 := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = NewBase(h3).RoundTrip(req)
	require.ErrorIs(t, err, context.Canceled)
	_, _, ok := retryClass(err)
	assert.False(t, ok, "a context's error carries no verdict")

	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	req, err = http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = New(h3, fastRetries(3)).RoundTrip(req)
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonCanceled, e.Reason)
	assert.Equal(t, 1, e.Attempts)
	assert.Len(t, srv.Requests(), 2)
}

// A server's graceful shutdown (http3.Server.Shutdown) with a request in
// flight sends GOAWAY with the next stream's ID: the requests sent after it
// are not processed on that connection. quic-go sends such a request again
// by itself, once, on a new connection; here none can be made (the
// listener is closed, as a server process's would be), so the base's error
// is that dial's, a handshake that timed out (see timedOutInHandshake), of
// a request never written, and the Transport retries the unkeyed POST until
// the server is back on its port.
//
// Each step waits for an event, not a time: the POST goes once the server
// has begun its shutdown (after which it rejects every new stream), as its
// qlog trace tells; the client's first connection has the usual handshake
// time (50 ms for it failed on a loaded machine, and the slow request
// never came); the one dial made while the server is down gives up after
// 50 ms of silence (nothing answers it), and the next waits until the
// server is back.
func TestGracefulShutdownSendsTheQueuedPostOnce(t *testing.T) {
	slowIn, slow := make(chan struct{}), make(chan struct{})
	goAway, goAwayOpt := goAwaySent()
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(slowIn)
			select {
			case <-slow:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = w.Write([]byte("ok " + r.URL.Path))
	}, goAwayOpt)
	var down atomic.Bool        // the server is shutting down, or down
	back := make(chan struct{}) // closed when the server is back on its port
	var downDials atomic.Int32
	h3 := newClient(t, func(tr *http3.Transport) {
		tr.Dial = func(ctx context.Context, addr string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			if down.Load() {
				if downDials.Add(1) == 1 {
					cfg = cfg.Clone()
					cfg.HandshakeIdleTimeout = 50 * time.Millisecond
				} else {
					select {
					case <-back:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
			}
			return quic.DialAddrEarly(ctx, addr, tlsCfg, cfg)
		}
	})
	slowDone := make(chan error, 1)
	go func() {
		_, _, err := get(t, NewBase(h3), srv.URL+"/slow")
		slowDone <- err
	}()
	select {
	case <-slowIn:
	case err := <-slowDone:
		t.Fatalf("the slow request ended before it reached the server: %v", err)
	}

	shutdownDone := make(chan error, 1)
	go func() { shutdownDone <- srv.srv.Shutdown(context.Background()) }()
	// http3.Server leaves a listener it did not make open: close it, as a
	// server of its own would, so that no new connection is served.
	require.NoError(t, srv.ln.Close())
	select {
	case <-goAway:
	case <-time.After(backstop):
		t.Fatal("the server did not begin its shutdown")
	}
	down.Store(true)

	var retried atomic.Bool
	tr := New(h3, retryhttp.Policy{MaxAttempts: 20, Backoff: retryhttp.Constant(20 * time.Millisecond)})
	tr.OnRetry = func(e *retryhttp.RetryEvent) {
		t.Logf("attempt %d: %v (after %v in line)", e.Attempt, e.Err, e.BudgetWait)
		if timedOutInHandshake(e.Err) && retried.CompareAndSwap(false, true) {
			close(slow) // let the old server finish, and come back
		}
	}
	reopened := make(chan error, 1)
	slowErr := make(chan error, 1)
	go func() {
		defer close(back)
		<-shutdownDone
		slowErr <- <-slowDone // before the socket closes under it
		reopened <- srv.reopen()
	}()
	resp, body, err := do(t, tr, http.MethodPost, srv.URL+"/pay", "charge")
	require.NoError(t, err)
	assert.Equal(t, "ok /pay", body)
	assert.True(t, retried.Load(), "the first attempt's error was the handshake's timeout")
	assert.Equal(t, 2, retryhttp.Attempts(resp), "sent again once the server was back")
	var pays int
	for _, r := range srv.Requests() {
		if r.Path == "/pay" {
			pays++
		}
	}
	assert.Equal(t, 1, pays, "the server processed the POST once")
	require.NoError(t, <-reopened)
	assert.NoError(t, <-slowErr, "the request in flight during the shutdown was served")
}

// goAwaySent returns a channel closed once a connection of the server has
// begun its graceful shutdown, from which it rejects every new request
// stream, and the server option that makes it so: quic-go's http3.Server
// records the GOAWAY frame it makes then in the connection's qlog trace.
func goAwaySent() (<-chan struct{}, serverOption) {
	tr := &goAwayTrace{sent: make(chan struct{})}
	return tr.sent, func(c *quic.Config) {
		c.Tracer = func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace { return tr }
	}
}

// goAwayTrace is a qlog trace that records nothing but the first GOAWAY
// frame made, by closing sent.
type goAwayTrace struct {
	once sync.Once
	sent chan struct{}
}

func (tr *goAwayTrace) AddProducer() qlogwriter.Recorder { return tr }
func (tr *goAwayTrace) Close() error                     { return nil }

func (tr *goAwayTrace) RecordEvent(ev qlogwriter.Event) {
	if f, ok := ev.(h3qlog.FrameCreated); ok {
		if _, ok := f.Frame.Frame.(h3qlog.GoAwayFrame); ok {
			tr.once.Do(func() { close(tr.sent) })
		}
	}
}

// The rules for the errors no test above produces, on errors made up with
// quic-go's types (and the text of quic-go's unexported error for a stream
// it could not open): README.md's table says why each is not produced.
func TestVerdictsOfErrorsNotProduced(t *testing.T) {
	goAway := fmt.Errorf("http3: conn unusable: %w", errors.New("connection in graceful shutdown"))
	for _, c := range []struct {
		name                   string
		err                    error
		wrote                  bool
		transient, nothingSent bool
	}{
		{"handshake timeout", &quic.HandshakeTimeoutError{}, false, true, true},
		{"handshake timeout of a request sent early", &quic.HandshakeTimeoutError{}, true, true, false},
		{"GOAWAY met by quic-go's resend too", goAway, false, true, true},
		{"H3_INTERNAL_ERROR", &http3.Error{ErrorCode: http3.ErrCodeInternalError, Remote: true}, true, true, false},
		{"H3_EXCESSIVE_LOAD", &http3.Error{ErrorCode: http3.ErrCodeExcessiveLoad, Remote: true}, true, true, false},
		{"QPACK_DECOMPRESSION_FAILED", &http3.Error{ErrorCode: http3.ErrCodeQPACKDecompressionFailed}, true, true, false},
		{"H3_REQUEST_REJECTED closing a connection", &quic.ApplicationError{ErrorCode: quic.ApplicationErrorCode(http3.ErrCodeRequestRejected), Remote: true}, true, true, false},
		{"H3_VERSION_FALLBACK", &http3.Error{ErrorCode: http3.ErrCodeVersionFallback, Remote: true}, true, false, false},
		{"H3_CONNECT_ERROR", &http3.Error{ErrorCode: http3.ErrCodeConnectError, Remote: true}, true, false, false},
		{"a QUIC protocol violation", &quic.TransportError{ErrorCode: quic.ProtocolViolation, Remote: true}, true, true, false},
		{"the same before the request was written", &quic.TransportError{ErrorCode: quic.ProtocolViolation, Remote: true}, false, true, true},
		{"a TLS alert before the request was written", &quic.TransportError{ErrorCode: 0x100 + 40, Remote: true}, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireVerdict(t, classify(c.err, c.wrote), c.transient, c.nothingSent)
		})
	}
	for _, err := range []error{errors.New("http3: invalid method"), context.DeadlineExceeded} {
		_, _, ok := retryClass(classify(err, false))
		assert.False(t, ok, "%v: left to the core", err)
	}
}
