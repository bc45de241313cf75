package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/retryhttp/retryhttp"
)

// The paths measured. Four run on an in-memory base (Canned), one caller at
// a time: the success path of a GET and of a PUT of 1 MiB and the retry
// path, through every library of Equal, and the opt-ins path, through
// those of OptIns. The loopback paths send GETs to an httptest server on
// 127.0.0.1 from several callers at once, through every library of Equal
// (LoopbackPath).
const (
	// PathGET is one GET answered 200; the same request is sent every time.
	PathGET = "GET"
	// PathPUT is one PUT of a 1 MiB body from a bytes.Reader, answered
	// 200 by a base that reads the body to its end; each operation makes
	// a new request.
	PathPUT = "PUT1MiB"
	// PathRetry is one GET answered 503, 503, then 200: three attempts,
	// retried at once (zero backoff, no budget). The bare base's row makes
	// the three attempts by hand (byHand), each failed response drained and
	// closed.
	PathRetry = "Retry"
	// PathOptIns is PathGET through the libraries of OptIns: retryhttp
	// with hedging or adaptive throttling on, and the peer's policies that
	// do the same, none of which acts on a request answered 200 at once.
	// Each case checks that the base saw one attempt per request, and for
	// retryhttp that no hedge was sent and no attempt throttled.
	PathOptIns = "OptIns"
)

// LoopbackPath names the path of GETs sent over loopback by callers
// goroutines at once, through keep-alive connections of one pooled
// transport that keeps up to LoopbackMaxCallers idle connections.
func LoopbackPath(callers int) string { return fmt.Sprintf("Loopback/callers=%d", callers) }

// The numbers of callers of the loopback paths that Paths lists, and the
// most the pooled transport of the loopback paths keeps connections for.
const (
	loopbackFew, loopbackSome, loopbackMany = 1, 16, 64
	LoopbackMaxCallers                      = 64
)

// Paths lists every path, in the order BENCHMARKS.md reports them.
func Paths() []string {
	return []string{PathGET, PathPUT, PathRetry, PathOptIns,
		LoopbackPath(loopbackFew), LoopbackPath(loopbackSome), LoopbackPath(loopbackMany)}
}

// The request every in-memory path sends, and the body of the PUT.
const (
	target   = "http://dependency.test/resource"
	putBytes = 1 << 20
)

// loopbackBody is the size of the loopback server's answers.
const loopbackBody = 128

// A Case is one path through one library, as Cases makes it; Interleave
// runs it, and so do the package's benchmarks.
type Case struct {
	Path    string
	Lib     string
	Callers int // goroutines sending at once

	// Procs, if positive, is the GOMAXPROCS the case runs with. The
	// in-memory paths run with 1: one caller needs one CPU, and an idle
	// second one would spend CPU time of its own (the garbage collector
	// runs idle mark workers there, and threads spin looking for work),
	// more or less of it from sample to sample.
	Procs int

	// start gets the case ready: one sender per caller, each sending one
	// request and checking its answer; and a check of what the base saw
	// after ops operations in all, from every sender.
	start func() (senders []func() error, check func(ops int) error)
}

// Cases returns the cases of the paths named (every path of Paths when
// none is), each path through every library of Equal, and a function that
// releases what the cases share (the loopback server and its connections),
// to be called once they are no longer run.
func Cases(paths ...string) ([]Case, func()) {
	if len(paths) == 0 {
		paths = Paths()
	}
	var (
		cases []Case
		lo    *loopback
	)
	for _, path := range paths {
		switch path {
		case PathGET, PathPUT:
			var body []byte
			method := http.MethodGet
			if path == PathPUT {
				method, body = http.MethodPut, bytes.Repeat([]byte("x"), putBytes)
			}
			for _, lib := range Equal(Comparable, true) {
				cases = append(cases, Case{Path: path, Lib: lib.Name, Callers: 1, Procs: 1, start: func() ([]func() error, func(int) error) {
					base := &Canned{}
					send := lib.Sender(base, method, target, body)
					return []func() error{func() error { return closeOK(send) }}, base.expect(1)
				}})
			}
		case PathRetry:
			for _, lib := range Equal(Zero, false) {
				if lib.Name == "bare" {
					lib.Wrap = func(base http.RoundTripper) http.RoundTripper { return byHand{base} }
				}
				cases = append(cases, Case{Path: path, Lib: lib.Name, Callers: 1, Procs: 1, start: func() ([]func() error, func(int) error) {
					base := &Canned{Script: []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK}}
					send := lib.Sender(base, http.MethodGet, target, nil)
					return []func() error{func() error { return closeOK(send) }}, base.expect(3)
				}})
			}
		case PathOptIns:
			for _, lib := range OptIns() {
				cases = append(cases, Case{Path: path, Lib: lib.Name, Callers: 1, Procs: 1, start: func() ([]func() error, func(int) error) {
					base := &Canned{}
					rt := lib.Wrap(base)
					send := sendThrough(rt, http.MethodGet, target, nil)
					return []func() error{func() error { return closeOK(send) }}, func(ops int) error {
						return errors.Join(base.expect(1)(ops), notActed(rt, ops))
					}
				}})
			}
		default:
			var callers int
			if _, err := fmt.Sscanf(path, "Loopback/callers=%d", &callers); err != nil || callers < 1 || LoopbackPath(callers) != path {
				panic(fmt.Sprintf("bench: no path %q", path))
			}
			if lo == nil {
				lo = newLoopback()
			}
			for _, lib := range Equal(Comparable, true) {
				cases = append(cases, Case{Path: path, Lib: lib.Name, Callers: callers, start: func() ([]func() error, func(int) error) {
					senders := make([]func() error, callers)
					for i := range senders {
						send := lib.Sender(lo.pool, http.MethodGet, lo.srv.URL, nil)
						senders[i] = func() error { return readOK(send) }
					}
					return senders, func(int) error { return nil }
				}})
			}
		}
	}
	return cases, func() {
		if lo != nil {
			lo.close()
		}
	}
}

// closeOK sends one request and checks that it was answered 200, closing
// the response's body, as every caller must (failsafe-go releases its
// contexts on that Close).
func closeOK(send func() (*http.Response, error)) error {
	resp, err := send()
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d, want 200", resp.StatusCode)
	}
	return nil
}

// readOK is closeOK that reads the body to its end first, so that the
// connection goes back to the pool.
func readOK(send func() (*http.Response, error)) error {
	resp, err := send()
	if err != nil {
		return err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case err != nil:
		return err
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("status %d, want 200", resp.StatusCode)
	case n != loopbackBody:
		return fmt.Errorf("body of %d bytes, want %d", n, loopbackBody)
	}
	return nil
}

// expect returns a check that the base received attempts attempts per
// operation.
func (c *Canned) expect(attempts int) func(ops int) error {
	return func(ops int) error {
		if c.Calls != attempts*ops {
			return fmt.Errorf("%d attempts for %d requests, want %d each", c.Calls, ops, attempts)
		}
		return nil
	}
}

// notActed checks, when rt is a retryhttp Transport, that its ops requests
// were sent once each: no hedge, no retry, no attempt throttled.
func notActed(rt http.RoundTripper, ops int) error {
	t, ok := rt.(*retryhttp.Transport)
	if !ok {
		return nil
	}
	s := t.Stats()
	if s.Requests != uint64(ops) || s.Attempts != uint64(ops) || s.Hedges != 0 || s.Throttled != 0 {
		return fmt.Errorf("%d requests, %d attempts, %d hedges, %d throttled; want %d requests sent once each", s.Requests, s.Attempts, s.Hedges, s.Throttled, ops)
	}
	return nil
}

// loopback is the server of the loopback paths and the pooled transport
// every library sends through.
type loopback struct {
	srv  *httptest.Server
	pool *http.Transport
}

func newLoopback() *loopback {
	body := strings.Repeat("x", loopbackBody)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	}))
	pool := cleanhttp.DefaultPooledTransport()
	pool.MaxIdleConnsPerHost = LoopbackMaxCallers // keep-alive for every caller
	return &loopback{srv: srv, pool: pool}
}

func (l *loopback) close() {
	l.pool.CloseIdleConnections()
	l.srv.Close()
}

// byHand retries a bodiless request until it is answered 200, draining and
// closing each failed response: the least work three attempts can take.
type byHand struct{ base http.RoundTripper }

func (h byHand) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		resp, err := h.base.RoundTrip(req)
		if err != nil || resp.StatusCode == http.StatusOK {
			return resp, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
