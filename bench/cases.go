package bench

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/retryhttp/retryhttp"
)

// The paths measured. Five run on an in-memory base (Canned), one caller at
// a time: the success path of a GET, of a PUT of 1 MiB and of a POST of
// 1 KiB, and the retry path, through every library of Equal, and the
// opt-ins path, through those of OptIns. The loopback paths send GETs to an
// httptest server on 127.0.0.1 from several callers at once, through every
// library of Equal (LoopbackPath). Every path is measured on realistic
// answers and on empty ones (Variant, Response): the names of Paths are the
// variants.
const (
	// PathGET is one GET answered 200; the same request is sent every time.
	PathGET = "GET"
	// PathPUT is one PUT of a 1 MiB body from a bytes.Reader, answered
	// 200 by a base that reads the body to its end; each operation makes
	// a new request.
	PathPUT = "PUT1MiB"
	// PathPOST is one POST of a 1 KiB body from a bytes.Reader (so
	// GetBody is set) without an Idempotency-Key, answered 200 by a base
	// that reads the body to its end: a request that is not retried. As
	// on PathPUT, each operation makes a new request.
	PathPOST = "POST1KiB"
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

// basePaths lists the paths, each of which is measured on every kind of
// answer.
func basePaths() []string {
	return []string{PathGET, PathPUT, PathPOST, PathRetry, PathOptIns,
		LoopbackPath(loopbackFew), LoopbackPath(loopbackSome), LoopbackPath(loopbackMany)}
}

// Paths lists every path on every kind of answer ("GET/resp=realistic",
// "GET/resp=empty"...), in the order BENCHMARKS.md reports them.
func Paths() []string {
	var out []string
	for _, p := range basePaths() {
		for _, r := range Responses() {
			out = append(out, Variant(p, r))
		}
	}
	return out
}

// Expand returns the variants that names name: a name of Paths names
// itself, a path without its kind of answer ("GET") its every variant. It
// returns an error for a name that names none.
func Expand(names ...string) ([]string, error) {
	known := Paths()
	var out []string
	for _, name := range names {
		switch {
		case contains(known, name):
			out = append(out, name)
		case contains(basePaths(), name):
			for _, r := range Responses() {
				out = append(out, Variant(name, r))
			}
		default:
			return nil, fmt.Errorf("no path %q (paths: %s, or one of them without its /resp=)", name, strings.Join(known, ", "))
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// The request every in-memory path sends, and the bodies of the PUT and
// of the POST.
const (
	target    = "http://dependency.test/resource"
	putBytes  = 1 << 20
	postBytes = 1 << 10
)

// A Case is one path through one library, as Cases makes it; Interleave
// runs it, and so do the package's benchmarks.
type Case struct {
	Path    string // a variant: the path and its kind of answer
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

// Cases returns the cases of the paths named (every variant of Paths when
// none is; see Expand), each path through every library of Equal, and a
// function that releases what the cases share (the loopback server and its
// connections), to be called once they are no longer run. It panics on a
// name that names no path.
func Cases(names ...string) ([]Case, func()) {
	if len(names) == 0 {
		names = Paths()
	}
	variants, err := Expand(names...)
	if err != nil {
		panic("bench: " + err.Error())
	}
	var (
		cases []Case
		lo    *loopback
	)
	for _, name := range variants {
		path, resp, _ := pathAndResponse(name)
		switch path {
		case PathGET, PathPUT, PathPOST:
			var body []byte
			method := http.MethodGet
			switch path {
			case PathPUT:
				method, body = http.MethodPut, bytes.Repeat([]byte("x"), putBytes)
			case PathPOST:
				method, body = http.MethodPost, bytes.Repeat([]byte("x"), postBytes)
			}
			for _, lib := range Equal(Comparable, true) {
				cases = append(cases, Case{Path: name, Lib: lib.Name, Callers: 1, Procs: 1, start: func() ([]func() error, func(int) error) {
					base := &Canned{Resp: resp}
					send := lib.Sender(base, method, target, body)
					return []func() error{reader(send, resp)}, base.expect(1)
				}})
			}
		case PathRetry:
			for _, lib := range Equal(Zero, false) {
				if lib.Name == "bare" {
					lib.Wrap = func(base http.RoundTripper) http.RoundTripper { return newByHand(base) }
				}
				cases = append(cases, Case{Path: name, Lib: lib.Name, Callers: 1, Procs: 1, start: func() ([]func() error, func(int) error) {
					base := &Canned{Resp: resp, Script: []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK}}
					send := lib.Sender(base, http.MethodGet, target, nil)
					return []func() error{reader(send, resp)}, base.expect(3)
				}})
			}
		case PathOptIns:
			for _, lib := range OptIns() {
				cases = append(cases, Case{Path: name, Lib: lib.Name, Callers: 1, Procs: 1, start: func() ([]func() error, func(int) error) {
					base := &Canned{Resp: resp}
					rt := lib.Wrap(base)
					send := sendThrough(rt, http.MethodGet, target, nil)
					return []func() error{reader(send, resp)}, func(ops int) error {
						return errors.Join(base.expect(1)(ops), notActed(rt, ops))
					}
				}})
			}
		default: // a loopback path: Expand knows it
			var callers int
			fmt.Sscanf(path, "Loopback/callers=%d", &callers)
			if lo == nil {
				lo = newLoopback()
			}
			url := lo.srv.URL + "/" + resp.String()
			for _, lib := range Equal(Comparable, true) {
				cases = append(cases, Case{Path: name, Lib: lib.Name, Callers: callers, start: func() ([]func() error, func(int) error) {
					senders := make([]func() error, callers)
					for i := range senders {
						senders[i] = reader(lib.Sender(lo.pool, http.MethodGet, url, nil), resp)
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

// reader returns a sender that sends one request through send and reads
// the answer as a caller does: its body to the end, through a buffer of its
// own made once, then closed (which failsafe-go also needs to release its
// contexts, and net/http to reuse the connection). It checks that the
// answer was 200 with a body of the kind resp: empty, or one of the
// realistic answers' bodies, as long as its Content-Length says when it
// has one.
func reader(send func() (*http.Response, error), resp Response) func() error {
	buf := make([]byte, 512)
	return func() error {
		r, err := send()
		if err != nil {
			return err
		}
		n, err := drainBody(r.Body, buf)
		switch {
		case err != nil:
			return err
		case r.StatusCode != http.StatusOK:
			return fmt.Errorf("status %d, want 200", r.StatusCode)
		case r.ContentLength >= 0 && n != r.ContentLength:
			return fmt.Errorf("body of %d bytes, Content-Length %d", n, r.ContentLength)
		case resp == Empty && n != 0:
			return fmt.Errorf("body of %d bytes, want an empty one", n)
		case resp == Realistic && !isRealisticBody(n):
			return fmt.Errorf("body of %d bytes, not one of the realistic answers'", n)
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
// every library sends through. The server answers GET /realistic with the
// realistic answers to a 200 in turn (their fields but Date, which net/http
// writes, the real one; the chunked ones chunked), and GET /empty with no
// body and no field but the Content-Length: 0 net/http writes.
type loopback struct {
	srv  *httptest.Server
	pool *http.Transport
	next atomic.Uint64 // realistic answers given
}

func newLoopback() *loopback {
	l := &loopback{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/"+Empty.String() {
			w.Header()["Date"] = nil // net/http writes none
			return
		}
		takeOK(&l.next).serve(w, http.StatusOK)
	}))
	l.pool = cleanhttp.DefaultPooledTransport()
	l.pool.MaxIdleConnsPerHost = LoopbackMaxCallers // keep-alive for every caller
	return l
}

func (l *loopback) close() {
	l.pool.CloseIdleConnections()
	l.srv.Close()
}

// byHand retries a bodiless request until it is answered 200, draining and
// closing each failed response through a buffer of its own: the least work
// three attempts can take. It is not safe for simultaneous use.
type byHand struct {
	base http.RoundTripper
	buf  []byte
}

func newByHand(base http.RoundTripper) *byHand { return &byHand{base: base, buf: make([]byte, 512)} }

func (h *byHand) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		resp, err := h.base.RoundTrip(req)
		if err != nil || resp.StatusCode == http.StatusOK {
			return resp, err
		}
		drainBody(resp.Body, h.buf)
	}
}
