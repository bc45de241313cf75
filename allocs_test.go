package retryhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// countedBody is a response body that counts its closes.
type countedBody struct {
	bytes.Reader
	closes int
}

func (b *countedBody) Close() error { b.closes++; return nil }

// failTwiceBase answers 503 twice and then 200, each with a realistic
// header and a body, reusing its responses: it allocates nothing itself.
type failTwiceBase struct {
	n         int
	fail, ok  http.Response
	failBody  countedBody
	okBody    countedBody
	failBytes []byte
	okBytes   []byte
}

func newFailTwiceBase() *failTwiceBase {
	b := &failTwiceBase{
		failBytes: []byte(`{"type":"about:blank","title":"Service Unavailable","status":503}`),
		okBytes:   []byte(`{"id":"ord_8f3a2c71","status":"shipped"}`),
	}
	h := func(ct string, n int) http.Header {
		return http.Header{"Content-Type": {ct}, "Date": {"Tue, 01 Dec 2026 14:00:00 GMT"}, "Server": {"envoy"},
			"X-Request-Id": {"7f3c9a2e"}, "Content-Length": {strconv.Itoa(n)}, "Cache-Control": {"no-store"}}
	}
	b.fail = http.Response{StatusCode: 503, Header: h("application/problem+json", len(b.failBytes)), ContentLength: int64(len(b.failBytes))}
	b.ok = http.Response{StatusCode: 200, Header: h("application/json", len(b.okBytes)), ContentLength: int64(len(b.okBytes))}
	return b
}

func (b *failTwiceBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.n++
	if b.n%3 != 0 {
		b.failBody.Reset(b.failBytes)
		b.fail.Body, b.fail.Request = &b.failBody, req
		return &b.fail, nil
	}
	b.okBody.Reset(b.okBytes)
	b.ok.Body, b.ok.Request = &b.okBody, req
	return &b.ok, nil
}

// A request retried twice at once (503, 503, then 200, realistic answers,
// no deadline, UnlimitedBudget, zero backoff) costs four allocations a
// retry: its request, with the context that carries the attempt's number,
// and the failed answer's drain's cutter. The scans of the failed answers'
// headers and the verdicts allocate nothing. (Not counted under the race
// detector.)
func TestARetryAllocatesItsRequestCopyAndItsDrain(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	base := newFailTwiceBase()
	tr := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{Backoff: Constant(0)}}
	req, err := http.NewRequest(http.MethodGet, "http://api.test/orders/1", nil)
	if err != nil {
		t.Fatal(err)
	}
	get := func() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if Attempts(resp) != 3 {
			t.Fatalf("%d attempts, want 3", Attempts(resp))
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	assert.Equal(t, 8.0, testing.AllocsPerRun(100, get), "allocations per request: four a retry")
	assert.Equal(t, 2*101, base.failBody.closes, "each failed body closed once (101 requests: AllocsPerRun runs one more)")
}

// A request that may be hedged but is answered before the hedge delay
// costs 12 allocations over one that may not: the group and its signal;
// the first attempt's state, which holds the request's copy and the body
// that ends its context; that context and its cancel function
// (context.WithCancel's); the header and URL of its own the attempt needs,
// as it may outlive RoundTrip; its goroutine's function; the hedge's timer
// and its function; the lists of the attempts sent and handed back. A request that may not be hedged (a POST
// without a key) or could not be before its deadline costs nothing more
// with hedging on.
func TestHedgeUnhedgedRequestAllocations(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	allocs := func(p Policy, method string, ctx context.Context) float64 {
		tr := &Transport{Base: newCannedBase(), Policy: p}
		req, err := http.NewRequestWithContext(ctx, method, "http://example.test/", nil)
		require.NoError(t, err)
		n := testing.AllocsPerRun(200, func() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
		assert.Zero(t, tr.Stats().Hedges, "no hedge was sent")
		return n
	}
	on := Policy{Hedge: &Hedge{After: time.Hour}}
	assert.Zero(t, allocs(Policy{}, http.MethodGet, t.Context()), "a GET with hedging off")
	assert.LessOrEqual(t, allocs(on, http.MethodGet, t.Context()), 12.0, "a GET with hedging on")
	assert.Equal(t, allocs(Policy{}, http.MethodPost, t.Context()), allocs(on, http.MethodPost, t.Context()),
		"a POST without a key")
	// A deadline before the hedge delay: no hedge could go, no race is run.
	ctx := testutil.WithTimeout(t, time.Minute)
	assert.Equal(t, allocs(Policy{}, http.MethodGet, ctx), allocs(on, http.MethodGet, ctx),
		"a GET whose deadline comes before the hedge delay")
}

// A timeline costs a request nothing when off; on, a GET answered at once
// costs five allocations: the timeline and its list, the response's copy
// of the request, and the mark that carries the timeline with the context
// that carries the mark.
func TestTimelineAllocations(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	allocs := func(p Policy) float64 {
		tr := &Transport{Base: newCannedBase(), Policy: p}
		req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		require.NoError(t, err)
		return testing.AllocsPerRun(200, func() {
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		})
	}
	assert.Zero(t, allocs(Policy{}), "off")
	assert.Equal(t, 5.0, allocs(Policy{Timeline: true}), "on")
}
