package retryhttp

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// chain starts three loopback services: the first and second call the next
// through a retryhttp Transport (Policy p, budget b for each) and answer 503
// when that call fails; the third is down (503 always). wrap, if set, wraps
// the handlers of the first two. It returns the first's URL and the count of
// requests the third received.
func chain(t *testing.T, p Policy, budget func() *Budget, wrap func(http.Handler) http.Handler) (string, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	last := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(last.Close)
	next := last.URL
	for range 2 {
		base := testutil.LoopbackBase(t)
		client := &http.Client{Transport: &Transport{Base: base, Policy: p, Budget: budget()}}
		target := next
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode >= 500 {
				http.Error(w, fmt.Sprintf("upstream: %d", resp.StatusCode), http.StatusServiceUnavailable)
				return
			}
			io.Copy(w, resp.Body)
		})
		if wrap != nil {
			h = wrap(h)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		next = srv.URL
	}
	return next, &hits
}

// A chain of three services, each retrying 4 times, the last one down: 16
// attempts reach the last; with VerdictHandler on the others, 4 (the middle
// one's), because the middle one's 503 says not to retry it.
func TestVerdictHandlerKeepsRetriesToOneLayer(t *testing.T) {
	p := Policy{Backoff: Constant(time.Millisecond)}
	for _, tc := range []struct {
		name string
		wrap func(http.Handler) http.Handler
		hits int32
	}{
		{"without", nil, 16},
		{"with VerdictHandler", VerdictHandler, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, hits := chain(t, p, UnlimitedBudget, tc.wrap)
			resp, err := http.Get(url)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			assert.Equal(t, tc.hits, hits.Load(), "requests that reached the last service")
			if tc.wrap != nil {
				assert.Equal(t, "false", resp.Header.Get("X-Should-Retry"))
			}
		})
	}
}

// The verdict goes only on a 5xx that follows a call given up on a failing
// dependency, and never replaces the handler's own.
func TestVerdictHandlerMarksOnlyFailuresAfterRetries(t *testing.T) {
	down := testutil.NewServer(t, testutil.Answers(503)...)
	tr := newTestTransport(t, Policy{MaxAttempts: 2})
	call := func(r *http.Request, p *Policy) {
		ctx := r.Context()
		if p != nil {
			ctx = WithPolicy(ctx, *p)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, down.URL, nil)
		if resp, err := tr.RoundTrip(req); err == nil {
			resp.Body.Close()
		}
	}
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"gave up after 2 attempts, then 503", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "false"},
		{"implicit 200 after a give-up", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			io.WriteString(w, "served from cache")
		}, ""},
		{"one attempt only: the caller may retry", func(w http.ResponseWriter, r *http.Request) {
			call(r, &Policy{MaxAttempts: 1})
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		{"no call at all", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		{"the handler's own verdict stands", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			w.Header().Set("X-Should-Retry", "true")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, "true"},
		{"the handler's own Stripe verdict stands", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			w.Header().Set("Stripe-Should-Retry", "true")
			w.WriteHeader(http.StatusServiceUnavailable)
		}, ""},
		{"flushed before the header", func(w http.ResponseWriter, r *http.Request) {
			call(r, nil)
			http.NewResponseController(w).Flush() // via Unwrap: an implicit 200
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(VerdictHandler(tc.handler))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.want, resp.Header.Get("X-Should-Retry"))
		})
	}
}
