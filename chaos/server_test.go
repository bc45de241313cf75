package chaos

import (
	"context"
	"crypto/tls"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// Headers of the calls and of the server's answers.
const (
	callHeader     = "X-Chaos-Call"        // the call's number, on every attempt
	hashHeader     = "X-Body-Sha256"       // hex SHA-256 of the body the sender sent
	replayedHeader = "Idempotent-Replayed" // "true" on an answer stored for a key
	keyHeader      = "Idempotency-Key"
)

// Bodies of every call, made once: call i sends requestBodies[i] (POSTs)
// and the server answers with responseBodies[i].
var (
	requestBodies  = makeBodies(0x71, requestBodySize)
	responseBodies = makeBodies(0x72, responseBodySize)
	requestHashes  = hashes(requestBodies)
	responseHashes = hashes(responseBodies)
)

func makeBodies(salt byte, size int) [][]byte {
	out := make([][]byte, calls)
	for i := range out {
		r := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), salt})
		out[i] = make([]byte, size)
		r.Read(out[i])
	}
	return out
}

func hashes(bodies [][]byte) []string {
	out := make([]string, len(bodies))
	for i, b := range bodies {
		out[i] = testutil.SHA256Hex(b)
	}
	return out
}

// A ledger is the server's memory, kept as a payments API keeps it: a POST
// is applied once its whole body has arrived; a key already applied is
// answered with the stored result and not applied again, and a key reused
// with another body is refused (422). Every application is counted, so a
// request applied twice shows.
type ledger struct {
	kill     float64 // share of requests after which the connection is closed
	seed     uint64
	handlers sync.WaitGroup // handlers running

	mu        sync.Mutex
	arrivals  map[int]int       // call -> requests that reached the handler
	applied   map[int]int       // call -> times its POST was applied
	keys      map[string]string // key -> hash of the body it was applied with
	badBodies int               // bodies applied that differ from what their sender hashed
	misused   int               // keys reused with another body
}

func newLedger(kill float64, seed uint64) *ledger {
	return &ledger{
		kill:     kill,
		seed:     seed,
		arrivals: make(map[int]int),
		applied:  make(map[int]int),
		keys:     make(map[string]string),
	}
}

type connKey struct{}

func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.handlers.Add(1)
	defer l.handlers.Done()
	id, err := strconv.Atoi(r.Header.Get(callHeader))
	if err != nil || id < 0 || id >= calls {
		http.Error(w, "no call number", http.StatusBadRequest)
		return
	}
	l.mu.Lock()
	l.arrivals[id]++
	n := l.arrivals[id]
	l.mu.Unlock()

	status, replayed := http.StatusOK, false
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // cut off: nothing is applied, and no one is listening
		}
		status, replayed = l.apply(id, r.Header.Get(keyHeader), testutil.SHA256Hex(body), r.Header.Get(hashHeader))
	}
	if draw(l.seed^killSalt, id, n) < l.kill {
		dropConn(r.Context())
		return
	}
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	body := responseBodies[id]
	h := w.Header()
	h.Set(hashHeader, responseHashes[id])
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if replayed {
		h.Set(replayedHeader, "true")
	}
	w.WriteHeader(status)
	w.Write(body)
}

// killSalt separates the server's draws from the router's.
const killSalt = 0x6b696c6c

// apply applies call id's POST with the given key (empty for none) and
// body hash, unless the key was applied before.
func (l *ledger) apply(id int, key, got, sent string) (status int, replayed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if key != "" {
		if h, ok := l.keys[key]; ok {
			if h != got {
				l.misused++
				return http.StatusUnprocessableEntity, false
			}
			return http.StatusOK, true
		}
		l.keys[key] = got
	}
	l.applied[id]++
	if got != sent {
		l.badBodies++
	}
	return http.StatusOK, false
}

// twice returns the number of calls whose POST was applied more than once.
func (l *ledger) twice() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return overOnce(l.applied)
}

// overOnce returns how many of applied's counts are over one.
func overOnce[K comparable](applied map[K]int) int {
	n := 0
	for _, c := range applied {
		if c > 1 {
			n++
		}
	}
	return n
}

// dropConn closes the connection a request came on at once, with a reset:
// every request on it fails.
func dropConn(ctx context.Context) {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if tcp, ok := c.(*net.TCPConn); ok {
		tcp.SetLinger(0)
	}
	if c != nil {
		c.Close()
	}
}

// startServer starts the ledger's server on loopback: HTTP/1.1 in the
// clear, or HTTPS offering HTTP/2.
func startServer(p proto, l *ledger) *httptest.Server {
	s := httptest.NewUnstartedServer(l)
	s.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, c)
	}
	s.Config.ErrorLog = testutil.DiscardLog()
	if p == h2 {
		s.EnableHTTP2 = true
		s.StartTLS()
	} else {
		s.Start()
	}
	return s
}
