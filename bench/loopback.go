package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-cleanhttp"
)

// LoopbackMaxCallers is the most idle connections the loopback paths' pooled
// transport keeps: one per caller, over HTTP/1.1.
const LoopbackMaxCallers = 64

// A loopback is the server of the loopback paths of one protocol and the
// pooled transport every library sends through: go-cleanhttp's, keeping
// LoopbackMaxCallers idle connections. The server answers every GET with
// the realistic answers to a 200 in turn (their fields but Date, which
// net/http writes; the chunked ones chunked). Over HTTP/2 both sides speak
// it without TLS (h2c, with prior knowledge), so that TLS's cost does not
// dilute what the libraries add. The server counts the requests of each
// URL path, and answers 505 to one of another protocol.
type loopback struct {
	srv   *httptest.Server
	pool  *http.Transport
	major int // the protocol's major version

	next  atomic.Uint64 // realistic answers given
	count sync.Map      // URL path to *atomic.Int64
}

// newLoopback starts the server of proto: "h1" (HTTP/1.1) or "h2" (HTTP/2).
func newLoopback(proto string) *loopback {
	l := &loopback{major: 1}
	l.srv = httptest.NewUnstartedServer(http.HandlerFunc(l.serve))
	l.pool = cleanhttp.DefaultPooledTransport()
	l.pool.MaxIdleConnsPerHost = LoopbackMaxCallers
	if proto == "h2" {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		l.srv.Config.Protocols, l.pool.Protocols, l.major = &p, &p, 2
	}
	l.srv.Start()
	return l
}

func (l *loopback) serve(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor != l.major {
		w.WriteHeader(http.StatusHTTPVersionNotSupported)
		return
	}
	l.counter(r.URL.Path).Add(1)
	realisticOK[(l.next.Add(1)-1)%uint64(len(realisticOK))].serve(w, http.StatusOK)
}

func (l *loopback) counter(path string) *atomic.Int64 {
	c, _ := l.count.LoadOrStore(path, new(atomic.Int64))
	return c.(*atomic.Int64)
}

// expect returns a check that the server received one request per
// operation at url.
func (l *loopback) expect(url string) func(ops int) error {
	path := url[len(l.srv.URL):]
	return func(ops int) error {
		if n := l.counter(path).Load(); n != int64(ops) {
			return fmt.Errorf("the server received %d requests for %d operations", n, ops)
		}
		return nil
	}
}

func (l *loopback) close() {
	l.pool.CloseIdleConnections()
	l.srv.Close()
}
