package bench

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The paths measured. Four run on an in-memory base (Canned), one caller at
// a time, through every library of Equal: the success path of a GET, of a
// PUT of 1 MiB and of a POST of 1 KiB, and the retry path. The loopback
// paths send GETs to an httptest server on 127.0.0.1 from several callers
// at once, over HTTP/1.1 and over HTTP/2 (LoopbackPath).
const (
	// PathGET is one GET answered 200; the same request is sent every time.
	PathGET = "GET"
	// PathPUT is one PUT of a 1 MiB body from a bytes.Reader, answered
	// 200 by a base that reads the body to its end; each operation makes
	// a new request.
	PathPUT = "PUT1MiB"
	// PathPOST is one POST of a 1 KiB body from a bytes.Reader (so
	// GetBody is set) without an Idempotency-Key, answered 200: a request
	// that is not retried. As on PathPUT, each operation makes a new
	// request.
	PathPOST = "POST1KiB"
	// PathRetry is one GET answered 503, 503, then 200: three attempts,
	// retried at once (zero backoff, no budget). The bare base's row makes
	// the three attempts by hand (byHand).
	PathRetry = "Retry"
)

// LoopbackPath names the path of GETs sent over loopback with proto ("h1"
// or "h2") by callers goroutines at once.
func LoopbackPath(proto string, callers int) string {
	return fmt.Sprintf("Loopback/proto=%s/callers=%d", proto, callers)
}

// The protocols and the numbers of callers of the loopback paths.
var (
	loopbackProtos  = []string{"h1", "h2"}
	loopbackCallers = []int{1, 16, 64}
)

// Paths lists every path, in the order BENCHMARKS.md reports them.
func Paths() []string {
	out := []string{PathGET, PathPUT, PathPOST, PathRetry}
	for _, proto := range loopbackProtos {
		for _, n := range loopbackCallers {
			out = append(out, LoopbackPath(proto, n))
		}
	}
	return out
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
	Path    string
	Lib     string
	Callers int // goroutines sending at once

	// Procs, if positive, is the GOMAXPROCS the case runs with. The
	// in-memory paths run with 1: an idle second CPU would spend CPU time
	// of its own (the garbage collector's idle mark workers), more or less
	// of it from sample to sample.
	Procs int

	// start gets the case ready: one sender per caller, each sending one
	// request and checking its answer; and a check of what the base saw
	// after ops operations in all, from every sender.
	start func() (senders []func() error, check func(ops int) error)
}

// Name is the name of the case as cmd/measure writes it after "Benchmark":
// "GET/lib=retryhttp".
func (c Case) Name() string { return c.Path + "/lib=" + c.Lib }

// Cases returns the cases of the paths named (every path of Paths when
// none is), each path through every library of Equal, and a function that
// releases what the cases share (the loopback servers and connections).
func Cases(names ...string) ([]Case, func(), error) {
	if len(names) == 0 {
		names = Paths()
	}
	var (
		cases []Case
		los   = map[string]*loopback{}
	)
	done := func() {
		for _, lo := range los {
			lo.close()
		}
	}
	for _, name := range names {
		switch name {
		case PathGET:
			cases = append(cases, inMemory(name, http.MethodGet, nil)...)
		case PathPUT:
			cases = append(cases, inMemory(name, http.MethodPut, bytes.Repeat([]byte("x"), putBytes))...)
		case PathPOST:
			cases = append(cases, inMemory(name, http.MethodPost, bytes.Repeat([]byte("x"), postBytes))...)
		case PathRetry:
			cases = append(cases, retryCases()...)
		default:
			var proto string
			var callers int
			_, err := fmt.Sscanf(strings.ReplaceAll(name, "/", " "), "Loopback proto=%s callers=%d", &proto, &callers)
			if err != nil || !slices.Contains(Paths(), name) {
				done()
				return nil, nil, fmt.Errorf("bench: no path %q (paths: %s)", name, strings.Join(Paths(), ", "))
			}
			if los[proto] == nil {
				los[proto] = newLoopback(proto)
			}
			cases = append(cases, loopbackCases(los[proto], name, callers)...)
		}
	}
	return cases, done, nil
}

// BareAgain names the second bare case of the loopback paths.
const BareAgain = "bare-again"

// inMemory returns the cases of a success path: one request of method with
// body (none if nil) answered 200 by a Canned base, through every library.
func inMemory(path, method string, body []byte) []Case {
	var cases []Case
	for _, lib := range Equal(Comparable, true) {
		cases = append(cases, Case{Path: path, Lib: lib.Name, Callers: 1, Procs: 1, start: func() ([]func() error, func(int) error) {
			base := &Canned{}
			return []func() error{reader(lib.Sender(base, method, target, body))}, base.expect(1)
		}})
	}
	return cases
}

// retryCases returns the cases of the retry path: 503, 503, then 200,
// through every library retrying at once and without a budget, and by hand.
func retryCases() []Case {
	var cases []Case
	for _, lib := range Equal(Zero, false) {
		if lib.Name == "bare" {
			lib.Wrap = func(base http.RoundTripper) http.RoundTripper { return newByHand(base) }
		}
		cases = append(cases, Case{Path: PathRetry, Lib: lib.Name, Callers: 1, Procs: 1, start: func() ([]func() error, func(int) error) {
			base := &Canned{Script: []int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK}}
			return []func() error{reader(lib.Sender(base, http.MethodGet, target, nil))}, base.expect(3)
		}})
	}
	return cases
}

// loopbackCases returns the cases of a loopback path, each library with a
// URL of its own, so that the server counts each case's requests. Beside
// the libraries runs a second bare case, "bare-again": the same sends as
// bare's, so that its ratio to bare is the harness's own error on the path
// (a case's connections, its place among the others), the yardstick for
// the other ratios.
func loopbackCases(lo *loopback, path string, callers int) []Case {
	var cases []Case
	libs := Equal(Comparable, true)
	again := libs[0]
	again.Name = BareAgain
	for _, lib := range append(libs, again) {
		url := lo.srv.URL + "/" + path + "/" + lib.Name
		cases = append(cases, Case{Path: path, Lib: lib.Name, Callers: callers, start: func() ([]func() error, func(int) error) {
			senders := make([]func() error, callers)
			for i := range senders {
				senders[i] = reader(lib.Sender(lo.pool, http.MethodGet, url, nil))
			}
			return senders, lo.expect(url)
		}})
	}
	return cases
}

// reader returns a sender that sends one request through send and reads
// the answer as a caller does: its body to the end, through a buffer of its
// own made once, then closed. It checks that the answer was 200 with one of
// the realistic answers' bodies, as long as its Content-Length says.
func reader(send func() (*http.Response, error)) func() error {
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
		case !isRealisticBody(n):
			return fmt.Errorf("body of %d bytes, not one of the realistic answers'", n)
		}
		return nil
	}
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
