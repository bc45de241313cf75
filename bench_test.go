package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// cannedBase answers every request with the same 200 response, after reading
// and closing the request body as a RoundTripper must. It allocates nothing
// itself (bytes.Reader writes itself to io.Discard without a buffer), so a
// benchmark through it measures only what wraps it.
type cannedBase struct{ resp *http.Response }

func newCannedBase() *cannedBase {
	return &cannedBase{resp: &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}}
}

func (b *cannedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	// One response, reset each time: a Transport may wrap its body.
	b.resp.Body, b.resp.Request = http.NoBody, nil
	return b.resp, nil
}

// rewindBody is a request body that a benchmark rewinds before each
// iteration: every iteration sends a fresh, full body at no cost, the same
// in the bare and the wrapped variant.
type rewindBody struct{ *bytes.Reader }

func (rewindBody) Close() error { return nil }

// BenchmarkRoundTrip measures what a Transport adds to a request that
// succeeds at once: "via=bare" calls the base directly, "via=retryhttp" goes
// through a Transport with the default policy. Compare the two with
//
//	go test -run '^$' -bench RoundTrip -benchmem -count 6 . > out.txt
//	benchstat -col /via out.txt
//
// The PUT sends a 1 MiB body with GetBody, as http.NewRequest makes for a
// bytes.Reader: the Transport must not copy it.
func BenchmarkRoundTrip(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1<<20)
	vias := []struct {
		name string
		wrap func(base http.RoundTripper) http.RoundTripper
	}{
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"retryhttp", func(base http.RoundTripper) http.RoundTripper { return &Transport{Base: base} }},
	}
	for _, op := range []struct {
		name, method string
		body         []byte
	}{
		{"GET", http.MethodGet, nil},
		// A POST without a key is sent once (it is not retried after
		// anything was sent), its body from GetBody as NewRequest makes it.
		{"POST1KiB", http.MethodPost, payload[:1<<10]},
		{"PUT1MiB", http.MethodPut, payload},
	} {
		for _, via := range vias {
			b.Run("op="+op.name+"/via="+via.name, func(b *testing.B) {
				rt := via.wrap(newCannedBase())
				if op.body == nil {
					testutil.BenchRoundTrip(b, rt, testutil.NewRequest(b, op.method, "http://example.test/", nil), nil)
					return
				}
				req := testutil.NewRequest(b, op.method, "http://example.test/", bytes.NewReader(op.body))
				body := rewindBody{bytes.NewReader(nil)}
				req.Body = body // GetBody stays http.NewRequest's
				sent := func() {
					if body.Len() != 0 {
						b.Fatal("the body was not sent")
					}
				}
				testutil.BenchRoundTrip(b, rt, req, func() {
					sent() // by the iteration before
					body.Reset(op.body)
				})
				sent()
			})
		}
	}
}

// BenchmarkOptIns measures what throttling and hedging add to a request
// that succeeds at once: throttling allocates nothing; a request that may
// be hedged runs its first attempt as a race, even when no hedge is sent,
// under a context of its own (which a winning hedge cancels), with a timer
// set for the hedge.
func BenchmarkOptIns(b *testing.B) {
	for _, tc := range []struct {
		name string
		p    Policy
	}{
		{"none", Policy{}},
		{"throttle", Policy{Throttle: &Throttle{}}},
		{"hedge", Policy{Hedge: &Hedge{After: time.Hour}}},
		{"timeline", Policy{Timeline: true}},
		{"resume", Policy{ResumeResponse: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rt := &Transport{Base: newCannedBase(), Policy: tc.p}
			testutil.BenchRoundTrip(b, rt, testutil.NewRequest(b, http.MethodGet, "http://example.test/", nil), nil)
		})
	}
}
