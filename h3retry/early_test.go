package h3retry

// Early data (0-RTT, RFC 9001 section 4.6; RFC 8470 for HTTP): a request
// that quic-go sent before the handshake completed, which the server
// refuses with 425 Too Early or by rejecting the early data, is sent again
// by the base after the handshake (425), or by the Transport after its
// wait (rejected early data).

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
)

// ticketCache is a client session cache that says when it gets a ticket.
type ticketCache struct {
	tls.ClientSessionCache
	puts chan struct{}
}

func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs != nil {
		select {
		case c.puts <- struct{}{}:
		default:
		}
	}
}

// earlyServer is a server that accepts 0-RTT data, and a client that has a
// session ticket from it and no connection to it: its next request with
// http3.MethodGet0RTT goes in early data. The server's packets take 25 ms
// (its handshake with them too), so that an early request reaches the
// handler before the handshake completes, as it would over a real path.
func earlyServer(t *testing.T, h http.HandlerFunc) (*server, *http3.Transport) {
	t.Helper()
	srv := newServer(t, h, func(c *quic.Config) { c.Allow0RTT = true })
	tickets := &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(4), puts: make(chan struct{}, 1)}
	h3 := newClient(t, func(tr *http3.Transport) { tr.TLSClientConfig.ClientSessionCache = tickets })
	_, _, err := get(t, NewBase(h3), srv.URL+"/ticket")
	require.NoError(t, err)
	select {
	case <-tickets.puts:
	case <-time.After(5 * time.Second):
		t.Fatal("no session ticket")
	}
	h3.CloseIdleConnections()
	srv.pc.delay.Store(int64(25 * time.Millisecond))
	return srv, h3
}

// The server answers a request that came in early data 425 Too Early (RFC
// 8470 section 5.2): the base sends it again as a plain GET, which quic-go
// holds until the handshake completes, on the same connection. The
// Transport sees one attempt; the server, the early request and the
// resend.
func TestTooEarlyIsSentAgainAfterTheHandshake(t *testing.T) {
	srv, h3 := earlyServer(t, func(w http.ResponseWriter, r *http.Request) {
		if !r.TLS.HandshakeComplete {
			w.WriteHeader(http.StatusTooEarly)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	tr := New(h3, retryhttp.Policy{})
	req, err := http.NewRequest(http3.MethodGet0RTT, srv.URL+"/thing", nil)
	require.NoError(t, err)
	resp, body, err := send(tr, req)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "ok", body)
	assert.Equal(t, 1, retryhttp.Attempts(resp))
	assert.Equal(t, http3.MethodGet0RTT, resp.Request.Method, "the caller's request")

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.False(t, reqs[0].Early, "the first connection's request, for the ticket")
	assert.True(t, reqs[1].Early, "the request went in 0-RTT data")
	assert.Equal(t, http.MethodGet, reqs[1].Method)
	assert.False(t, reqs[2].Early, "the resend waited for the handshake")
	assert.Equal(t, reqs[1].Conn, reqs[2].Conn, "on the same connection")
	assert.Equal(t, "/thing", reqs[2].Path)
}

// A plain GET is never sent early, so a 425 to it is the server's answer
// and comes back as it is (425 is no retryable status by default).
func TestTooEarlyToAPlainRequestIsReturned(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTooEarly)
	})
	resp, _, err := get(t, New(newClient(t), retryhttp.Policy{}), srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooEarly, resp.StatusCode)
	assert.Len(t, srv.Requests(), 1)
}

// The server restarted with new ticket keys: it cannot read the client's
// ticket, and rejects the early data offered with it. quic-go v0.65 then
// fails the request, whatever its method, with quic.Err0RTTRejected: the
// request's early data was discarded, or no stream could be opened on the
// connection. Nothing was processed, so even an unkeyed POST is retried,
// and the server sees it once.
func TestRejectedEarlyDataIsNothingSent(t *testing.T) {
	srv, h3 := earlyServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	srv.stop()
	srv.restart() // a new tls.Config: new ticket keys
	req, err := http.NewRequest(http3.MethodGet0RTT, srv.URL+"/early", nil)
	require.NoError(t, err)
	_, _, err = send(NewBase(h3), req)
	require.ErrorIs(t, err, quic.Err0RTTRejected)
	requireVerdict(t, err, true, true)
	h3.CloseIdleConnections()

	srv.stop()
	srv.restart()
	_, _, err = do(t, NewBase(h3), http.MethodPost, srv.URL+"/pay", "charge")
	require.ErrorIs(t, err, quic.Err0RTTRejected, "a plain POST too")
	assert.True(t, isConnUnusable(err), "quic-go's error for a request whose stream it could not open: %v", err)
	requireVerdict(t, err, true, true)
	h3.CloseIdleConnections()

	srv.stop()
	srv.restart()
	resp, body, err := do(t, New(h3, retryhttp.Policy{}), http.MethodPost, srv.URL+"/pay", "charge")
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.GreaterOrEqual(t, retryhttp.Attempts(resp), 2)
	var paths []string
	for _, r := range srv.Requests() {
		paths = append(paths, r.Path)
	}
	assert.Equal(t, []string{"/ticket", "/pay"}, paths, "the server processed the POST once, and nothing rejected")
}
