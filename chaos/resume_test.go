package chaos

// A download cut by toxiproxy continues where it broke (Policy.
// ResumeResponse): an 8 MiB body from a file server (testutil.Download,
// http.ServeContent) comes through proxies whose limit_data toxic closes
// each connection after a set number of bytes, over HTTP/1.1 and HTTP/2 on
// loopback.
// The core's resume_test.go cuts the body in the server's handler; here the
// network does, so the client sees what a proxy's cut looks like (a clean
// close mid-body, or a reset) and the server keeps writing into the socket
// after the cut until it notices.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

const (
	// resumeSize is the download's size.
	resumeSize = 8 << 20

	// maxHeaderBytes bounds the bytes of a 200's or 206's status line and
	// header from testutil.Download (about 200): the cuts fall after them,
	// in the body.
	maxHeaderBytes = 1024

	// resumeDeadline bounds the whole download: a hang fails the test
	// rather than the test binary's timeout. Nothing is timed against it.
	resumeDeadline = time.Minute
)

// resumeCuts are the bytes toxiproxy lets through on the connections it
// cuts, status line and header included: the connection of attempt i (from
// 0) closes after resumeCuts[i] bytes. They differ, so that each Range
// shows it counts what came through rather than some fixed step; the last
// cuts a 206 a little after its header.
var resumeCuts = []int64{1<<20 + 1234, 2<<20 + 4321, 70_000}

// A resumeRig is a Download served on loopback behind toxiproxy: one proxy
// per cut, each with a limit_data toxic downstream (toxiproxy counts its
// limit per connection, and every attempt opens a connection of its own,
// the one before having been cut), and a clean proxy for what comes after.
// The base transport under retryhttp sends attempt i to proxy i.
type resumeRig struct {
	d      *testutil.Download
	srv    *httptest.Server
	conns  *connCounter
	px     []*toxiproxy.Proxy // one per cut, then the clean one
	base   *http.Transport
	router *cutRouter
	url    string
}

func newResumeRig(t *testing.T, p proto, body []byte, cuts []int64) *resumeRig {
	t.Helper()
	r := &resumeRig{d: &testutil.Download{Body: body}, conns: new(connCounter)}
	r.srv = httptest.NewUnstartedServer(r.d)
	r.srv.Config.ErrorLog = testutil.DiscardLog()
	r.srv.Config.ConnState = r.conns.track
	t.Cleanup(r.close) // should the test stop early; the tests close it before reading Written
	if p == h2 {
		r.srv.EnableHTTP2 = true
		r.srv.StartTLS()
	} else {
		r.srv.Start()
	}

	tp := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	hosts := make([]string, 0, len(cuts)+1)
	for i := range len(cuts) + 1 {
		px := toxiproxy.NewProxy(tp, fmt.Sprintf("resume_%d", i), "127.0.0.1:0", r.srv.Listener.Addr().String())
		if err := px.Start(); err != nil {
			r.close()
			t.Fatal(err)
		}
		r.px = append(r.px, px)
		hosts = append(hosts, px.Listen)
		if i == len(cuts) {
			break // the clean proxy
		}
		b, err := json.Marshal(map[string]any{
			"name": "limit_data_downstream", "type": "limit_data", "stream": "downstream", "toxicity": 1,
			"attributes": map[string]any{"bytes": cuts[i]},
		})
		if err == nil {
			_, err = px.Toxics.AddToxicJson(bytes.NewReader(b))
		}
		if err != nil {
			r.close()
			t.Fatal(err)
		}
	}

	r.base = newBase(p, r.srv)
	r.router = &cutRouter{next: r.base, hosts: hosts, received: make(map[string]int64), dials: make(map[string]int)}
	r.base.DialContext = r.router.dial
	r.url = "http://" + hosts[0] + "/file.bin"
	if p == h2 {
		r.url = "https://" + hosts[0] + "/file.bin"
	}
	return r
}

// close ends every connection, then the server, and waits for its
// handlers: Download.Written is final when it returns. It may be called
// again.
func (r *resumeRig) close() {
	if r.base != nil {
		r.base.CloseIdleConnections()
	}
	for _, p := range r.px {
		p.Stop()
	}
	r.srv.Close()
}

// connCounter counts the connections a server accepted.
type connCounter struct {
	mu sync.Mutex
	n  int
}

func (c *connCounter) track(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
}

func (c *connCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// cutRouter is the base transport under retryhttp: it sends attempt i to
// hosts[i] (the last host for every attempt after), and measures what came
// back: the body bytes each attempt's response gave retryhttp, and the
// bytes each proxy's connections delivered, header included.
type cutRouter struct {
	next   http.RoundTripper
	hosts  []string
	dialer net.Dialer

	mu       sync.Mutex
	attempts int
	bodies   []*countedBody   // each attempt's response body, in order
	received map[string]int64 // host:port -> bytes read from its connections
	dials    map[string]int   // host:port -> connections opened
}

func (r *cutRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	i := min(r.attempts, len(r.hosts)-1)
	r.attempts++
	r.mu.Unlock()
	out := req.Clone(req.Context())
	out.URL.Host, out.Host = r.hosts[i], ""
	resp, err := r.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	b := &countedBody{ReadCloser: resp.Body}
	resp.Body = b
	r.mu.Lock()
	r.bodies = append(r.bodies, b)
	r.mu.Unlock()
	return resp, nil
}

// bodyBytes returns the body bytes each attempt's response gave.
func (r *cutRouter) bodyBytes() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]int64, len(r.bodies))
	for i, b := range r.bodies {
		out[i] = b.n
	}
	return out
}

// receivedFrom returns the bytes read from host's connections, and how
// many there were.
func (r *cutRouter) receivedFrom(host string) (int64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.received[host], r.dials[host]
}

// dial is the base transport's DialContext: it counts each connection and
// the bytes read from it, by the address dialed.
func (r *cutRouter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := r.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.dials[addr]++
	r.mu.Unlock()
	return &countedConn{Conn: c, r: r, addr: addr}, nil
}

type countedConn struct {
	net.Conn
	r    *cutRouter
	addr string
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.r.mu.Lock()
	c.r.received[c.addr] += int64(n)
	c.r.mu.Unlock()
	return n, err
}

// countedBody counts the bytes read from a response body. Only the caller's
// goroutine reads it (retryhttp's resumable body reads inside the caller's
// Read), and the counts are read after.
type countedBody struct {
	io.ReadCloser
	n int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// downloadThrough reads rg's file through retryhttp with policy p (unlimited
// budget: this measures resuming, not budgeting), within resumeDeadline.
func downloadThrough(t *testing.T, rg *resumeRig, p retryhttp.Policy) ([]byte, *retryhttp.Transport, error) {
	t.Helper()
	tr := &retryhttp.Transport{Base: rg.router, Policy: p, Budget: retryhttp.UnlimitedBudget()}
	ctx, cancel := context.WithTimeout(context.Background(), resumeDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rg.url, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err, "the first attempt's header arrives whole: the cut is in its body")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	return got, tr, err
}

// With ResumeResponse, the download survives three cuts by toxiproxy: each
// resume asks for the rest from the first byte retryhttp had not read, if
// the ETag still holds, and the body comes whole and in order.
func TestResumeThroughToxiproxyCuts(t *testing.T) {
	for _, p := range both {
		t.Run(p.name(), func(t *testing.T) { resumeThroughCuts(t, p) })
	}
}

func resumeThroughCuts(t *testing.T, p proto) {
	body := testutil.Payload(resumeSize)
	cuts := resumeCuts
	rg := newResumeRig(t, p, body, cuts)
	got, tr, err := downloadThrough(t, rg, retryhttp.Policy{
		ResumeResponse: true,
		// Exactly the attempts the cuts call for: one cut more than
		// planned fails the download.
		MaxAttempts: len(cuts) + 1,
		Backoff:     retryhttp.FullJitter{Base: time.Millisecond, Cap: 10 * time.Millisecond},
	})
	rg.close()
	require.NoError(t, err)
	assert.Equal(t, len(body), len(got))
	assert.Equal(t, testutil.SHA256Hex(body), testutil.SHA256Hex(got), "the body, whole and in order")

	// One connection per proxy, so one per attempt; each cut proxy
	// delivered its limit (over HTTP/1.1 exactly), in the body.
	read := rg.router.bodyBytes()
	require.Len(t, read, len(cuts)+1, "an attempt per connection")
	for i, cut := range cuts {
		through, dials := rg.router.receivedFrom(rg.px[i].Listen)
		assert.Equal(t, 1, dials, "connections through cut proxy %d", i)
		assert.Positive(t, read[i], "attempt %d's body bytes: the cut fell in the body", i)
		if p == h2 {
			// The bytes also carry TLS (the handshake, each record's
			// overhead) and HTTP/2's frames, and a record cut short is not
			// read. The close may come as a reset, when a WINDOW_UPDATE of
			// the client's is in toxiproxy's socket unread, and a reset
			// drops what that socket had not sent yet: at most the limit
			// came through.
			assert.LessOrEqual(t, through, cut, "bytes through cut proxy %d", i)
			continue
		}
		// toxiproxy cut where told, and the client sent nothing after its
		// request, so the close is a clean one: every byte arrived. What
		// is not body is the answer's status line and header.
		assert.Equal(t, cut, through, "bytes through cut proxy %d: toxiproxy cut where told", i)
		assert.Greater(t, read[i], cut-maxHeaderBytes, "attempt %d's body bytes", i)
		assert.Less(t, read[i], cut, "attempt %d's body bytes", i)
	}
	_, dials := rg.router.receivedFrom(rg.px[len(cuts)].Listen)
	assert.Equal(t, 1, dials, "connections through the clean proxy")
	assert.Equal(t, len(cuts)+1, rg.conns.count(), "connections the server accepted")

	// The first request asked for the whole body; each later one for the
	// rest from the bytes read so far, if "v1" still holds.
	asked := rg.d.Asked()
	require.Len(t, asked, len(cuts)+1)
	assert.Empty(t, asked[0].Values("Range"))
	assert.Empty(t, asked[0].Values("If-Range"))
	at, rests := int64(0), int64(0)
	for i := range cuts {
		at += read[i]
		rests += int64(len(body)) - at
		assert.Equal(t, fmt.Sprintf("bytes=%d-", at), asked[i+1].Get("Range"), "request %d", i+1)
		assert.Equal(t, `"v1"`, asked[i+1].Get("If-Range"), "request %d", i+1)
	}
	assert.Equal(t, int64(len(body))-at, read[len(cuts)], "the last answer carried the rest")

	s := tr.Stats()
	assert.Equal(t, uint64(len(cuts)), s.Resumes, "each cut resumed once")
	assert.Equal(t, uint64(len(cuts)), s.Retries)
	assert.Equal(t, uint64(len(cuts)+1), s.Attempts)

	// The server sends each byte once, but for what was on its way when a
	// cut came: bytes it had written past the cut into its buffers, its
	// socket's send buffer, toxiproxy's socket's receive buffer and
	// toxiproxy's pipeline (a few 32 KiB chunks), and over HTTP/2 up to
	// the stream's flow-control window (4 MiB for net/http's client).
	// Linux grows loopback socket buffers to MiBs (up to tcp_wmem's and
	// tcp_rmem's maximums, 4 MiB and 6 MiB by default), and toxiproxy, a
	// few goroutine hops per chunk, is slower than the server, so they
	// fill: a cut wastes from a few hundred KiB to all of the body left
	// after it, depending on the machine and its load (the server wrote
	// 1.1x to 2.1x the body over these three cuts in runs under -race). So
	// no bound of a MiB or two per cut is safe, and the one asserted is
	// what cannot be exceeded: each answer no longer than the rest asked
	// for. That the resumes asked for no byte twice is the Range checks'.
	written := rg.d.Written()
	t.Logf("%s: server wrote %d body bytes for %d (%.3fx), %d of them lost in %d cuts",
		p, written, len(body), float64(written)/float64(len(body)), written-int64(len(body)), len(cuts))
	assert.GreaterOrEqual(t, written, int64(len(body)))
	assert.LessOrEqual(t, written, int64(len(body))+rests)
}

// Without ResumeResponse, the body toxiproxy cuts ends with an error after
// the bytes that came through: never a short body read as complete, nor a
// second request.
func TestToxiproxyCutEndsTheBodyUnlessResumed(t *testing.T) {
	for _, p := range both {
		t.Run(p.name(), func(t *testing.T) {
			body := testutil.Payload(resumeSize)
			cuts := resumeCuts[:1]
			rg := newResumeRig(t, p, body, cuts)
			got, tr, err := downloadThrough(t, rg, retryhttp.Policy{})
			rg.close()

			require.Error(t, err, "a short body is not read as complete")
			// A clean close before Content-Length's end, or a reset when
			// the proxy closes with bytes of the client's unread (over
			// HTTP/2, a WINDOW_UPDATE).
			assert.Contains(t, []string{"unexpected EOF", "connection reset by peer"}, errKind(err))
			assert.Positive(t, len(got))
			assert.Less(t, len(got), len(body))
			assert.True(t, bytes.Equal(body[:len(got)], got), "what was read is the body's start")
			assert.Equal(t, []int64{int64(len(got))}, rg.router.bodyBytes())

			assert.Len(t, rg.d.Asked(), 1, "no second request")
			s := tr.Stats()
			assert.Zero(t, s.Resumes)
			assert.Zero(t, s.Retries)
			assert.Equal(t, uint64(1), s.Attempts)
		})
	}
}
