package testutil

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/stretchr/testify/require"
)

// Two everyday faults on real loopback, in real time, for any client: the
// core's tests run them through its Transport, the chaos module's through
// the peers as well.

// A Send sends call id, req, through the client under test and returns
// once the call has ended, its answer's body read and closed. The request
// carries id in CallHeader, and no context: Send gives it its deadline.
type Send func(id int, req *http.Request)

// NewCall returns call id's request: a GET of url when body is empty, else
// a POST of body (GetBody set: every client may send it again).
func NewCall(id int, method, url, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		panic(err) // the runners' own URLs
	}
	req.Header.Set(CallHeader, strconv.Itoa(id))
	return req
}

// MixedCall returns call id of a mix of calls to url, its number in
// header callHeader: calls 0 and 1 of every 4 are GETs, 2 a POST of body
// with the caller's Idempotency-Key, "call-<id>", and 3 a POST of body
// with none.
func MixedCall(ctx context.Context, callHeader, url string, id int, body []byte) (*http.Request, error) {
	var rd io.Reader
	method := http.MethodGet
	if id%4 >= 2 {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set(callHeader, strconv.Itoa(id))
	if id%4 == 2 {
		req.Header.Set("Idempotency-Key", "call-"+strconv.Itoa(id))
	}
	return req, nil
}

// RestartFigures is what RunProxyRestart measured, besides what its Send
// recorded.
type RestartFigures struct {
	GETs, POSTs int // calls sent
	Ledger      LedgerCounts
	Lag         time.Duration // the scheduler's worst lag during the run
}

// RunProxyRestart runs a backend's restart behind a reverse proxy once
// through the client that client makes over a base transport: a Ledger
// backend behind httputil.ReverseProxy, a GET every 2 ms (calls 0, 2, 4...)
// and a POST every 5 ms (calls 1, 3, 5...) for 1.5 s, the backend closed at
// 600 ms while a POST is being applied (its answer is lost: the proxy
// answers 502), and listening again on the same address 300 ms later.
// Meanwhile the proxy's dials are refused and it answers 502.
func RunProxyRestart(t testing.TB, client func(base *http.Transport) Send) RestartFigures {
	const (
		load, restartAt, down = 1500 * time.Millisecond, 600 * time.Millisecond, 300 * time.Millisecond
		getGap, postGap       = 2 * time.Millisecond, 5 * time.Millisecond
	)
	ledger := NewLedger(time.Millisecond)
	backend, err := StartBackend(ledger)
	require.NoError(t, err)
	// Pools sized for the load, as a service sending 700 requests a second
	// to one host sizes them: with go-cleanhttp's GOMAXPROCS+1 idle
	// connections a host, most requests would dial a connection of their
	// own, and a slow machine (-race) fell behind the load for seconds. On
	// time, a few calls are in flight at once; the cap on connections binds
	// only when the machine stalls, and keeps the calls piling up then
	// from opening thousands of connections.
	base, proxyBase := cleanhttp.DefaultPooledTransport(), cleanhttp.DefaultPooledTransport()
	base.MaxIdleConnsPerHost, proxyBase.MaxIdleConnsPerHost = 100, 100
	base.MaxConnsPerHost, proxyBase.MaxConnsPerHost = 256, 256
	proxy := httptest.NewUnstartedServer(&httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(backend.URL()) },
		Transport: proxyBase,
		ErrorLog:  DiscardLog(),
	})
	proxy.Config.ErrorLog = DiscardLog()
	proxy.Start()

	send := client(base)
	var f RestartFigures
	var calls sync.WaitGroup
	var restarted error
	probe := StartLagProbe()
	begin := time.Now()
	calls.Go(func() {
		time.Sleep(time.Until(begin.Add(restartAt)))
		restarted = backend.RestartUnder(ledger, down)
	})
	calls.Go(func() {
		f.GETs = Every(&calls, begin, getGap, load, func(i int) {
			send(2*i, NewCall(2*i, http.MethodGet, fmt.Sprintf("%s/things/%d", proxy.URL, i), ""))
		})
	})
	f.POSTs = Every(&calls, begin, postGap, load, func(i int) {
		send(2*i+1, NewCall(2*i+1, http.MethodPost, proxy.URL+"/payments", fmt.Sprintf(`{"amount":%d}`, i)))
	})
	calls.Wait()
	f.Lag = probe.Stop()

	base.CloseIdleConnections()
	proxy.Close()
	proxyBase.CloseIdleConnections()
	backend.Stop()
	backend.Wait()
	require.NoError(t, restarted, "the backend listens again")
	f.Ledger = ledger.Counts()
	return f
}

// H2ClosesGETs is how many GETs RunH2Closes sends.
const H2ClosesGETs = 200

// H2Figures is what RunH2Closes measured, besides what its Send recorded.
type H2Figures struct {
	Conns int           // connections the server accepted, the warm one included
	Lag   time.Duration // the scheduler's worst lag during the run
}

// RunH2Closes runs an HTTP/2 server's connection closes once through the
// client that client makes over a base transport: H2ClosesGETs GETs at once
// (calls 0 to 199), on a warm HTTP/2 connection, to net/http's HTTP/2
// server over TLS answering in 50 ms, which resets every connection it has
// (a TCP RST: no TLS close_notify, no GOAWAY, as when a server process dies
// or a load balancer drops its connections) at 25, 85, 145, 205 and 265 ms:
// the first close comes while every GET of the burst waits for its answer
// (a close at 60 ms would race with the burst's answers, and hit all of
// them or none). Streams in flight fail with what net/http makes of it:
// "connection reset by peer" on read or write, or "client connection force
// closed".
func RunH2Closes(t testing.TB, client func(base *http.Transport) Send) H2Figures {
	const (
		closes        = 5
		answerIn, gap = 50 * time.Millisecond, 60 * time.Millisecond
		firstClose    = 25 * time.Millisecond
	)
	s, ln, base := NewH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timer := time.NewTimer(answerIn)
		defer timer.Stop()
		select {
		case <-timer.C:
			io.WriteString(w, "ok")
		case <-r.Context().Done():
		}
	}))
	defer s.Close() // every handler done before the figures are read
	defer base.CloseIdleConnections()
	warm, err := base.RoundTrip(NewRequest(t, http.MethodGet, s.URL, nil)) // the connection the GETs start on
	require.NoError(t, err)
	io.Copy(io.Discard, warm.Body)
	warm.Body.Close()
	require.Equal(t, "HTTP/2.0", warm.Proto)

	send := client(base)
	var calls sync.WaitGroup
	probe := StartLagProbe()
	begin := time.Now()
	calls.Go(func() {
		for i := range closes {
			time.Sleep(time.Until(begin.Add(firstClose + time.Duration(i)*gap)))
			ln.Abort()
		}
	})
	for id := range H2ClosesGETs {
		calls.Go(func() { send(id, NewCall(id, http.MethodGet, s.URL+"/things/"+strconv.Itoa(id), "")) })
	}
	calls.Wait()
	return H2Figures{Conns: ln.Count(), Lag: probe.Stop()}
}
