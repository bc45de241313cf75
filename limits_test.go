package retryhttp_test

// Huge configuration values cost no more than sensible ones: no spin, no
// lost body, no crash.

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// With MaxAttempts math.MaxInt, a retry that waits for the budget (here it
// has no credit, and another request to its host is in flight) sizes the
// request's backoff schedule with a few Backoff calls, not one for each
// attempt left: the request ends with the caller's context (or just before
// its deadline, when the next wait would pass it), with a deadline or
// without one.
func TestHugeMaxAttemptsWaitsForTheBudgetWithFewBackoffCalls(t *testing.T) {
	for _, deadline := range []bool{true, false} {
		name := map[bool]string{true: "deadline", false: "canceled"}[deadline]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int64
				backoff := retryhttp.BackoffFunc(func(int, time.Duration, float64) time.Duration {
					if n := calls.Add(1); n > 1000 {
						t.Fatalf("the Backoff was asked %d times", n)
					}
					return 100 * time.Millisecond
				})
				answer := func(n int, req *http.Request) (*http.Response, error) {
					if req.URL.Path == "/held" {
						<-req.Context().Done()
						return nil, req.Context().Err()
					}
					return testutil.ResetByPeer(n, req)
				}
				tr := &retryhttp.Transport{Base: &testutil.Base{Answer: answer}, Budget: retryhttp.NewBudget(0, 0),
					Policy: retryhttp.Policy{MaxAttempts: math.MaxInt, Backoff: backoff}}
				held, release := context.WithCancel(t.Context())
				var wg sync.WaitGroup
				wg.Go(func() {
					tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, "http://api.test/held", nil).WithContext(held))
				})
				defer wg.Wait()
				defer release()
				synctest.Wait() // the other request is in flight
				ctx, cancel := context.WithCancel(t.Context())
				if deadline {
					ctx, cancel = context.WithTimeout(t.Context(), time.Second)
				} else {
					time.AfterFunc(time.Second, cancel)
				}
				defer cancel()
				start := time.Now()

				resp, err := tr.RoundTrip(testutil.Get(t, ctx))

				assert.Nil(t, resp)
				require.Error(t, err)
				if deadline {
					assert.LessOrEqual(t, time.Since(start), time.Second)
					assert.Greater(t, time.Since(start), 800*time.Millisecond)
				} else {
					assert.Equal(t, time.Second, time.Since(start))
				}
				assert.Less(t, calls.Load(), int64(100), "Backoff calls")
				assert.Positive(t, tr.Stats().BudgetWaits)
			})
		})
	}
}

// BufferResponse math.MaxInt64, "always whole", reads a body of unknown
// length (chunked) whole: none of it is lost.
func TestBufferResponseMaxInt64ReadsAChunkedBodyWhole(t *testing.T) {
	text := strings.Repeat("chunk ", 10000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, text[:100])
		w.(http.Flusher).Flush() // chunked: no Content-Length
		io.WriteString(w, text[100:])
	}))
	defer srv.Close()
	base := srv.Client().Transport.(*http.Transport)
	defer base.CloseIdleConnections()
	tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{BufferResponse: math.MaxInt64}}

	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil).WithContext(t.Context()))

	require.NoError(t, err)
	assert.EqualValues(t, -1, resp.ContentLength)
	got := testutil.ReadBody(t, resp)
	assert.Equal(t, len(text), len(got), "bytes")
	assert.True(t, got == text, "the body, whole")
}

// A Content-Length near 2^63 that the body does not keep (3 bytes come)
// allocates by the bytes read, not by the promise: the attempt fails as
// cut short, and the retry's honest answer is returned.
func TestBufferResponseReadsAHugeContentLengthByTheBytesThatCome(t *testing.T) {
	for _, cl := range []int64{math.MaxInt64, math.MaxInt64 - 1, 1 << 62, 1 << 40} {
		t.Run(fmt.Sprint(cl), func(t *testing.T) {
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				if n == 1 {
					resp := testutil.Response(req, http.StatusOK, nil, "abc")
					resp.ContentLength = cl
					return resp, nil
				}
				return testutil.Response(req, http.StatusOK, nil, "ok"), nil
			}}
			tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{BufferResponse: math.MaxInt64, Backoff: retryhttp.Constant(0)}}

			resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

			require.NoError(t, err)
			assert.Equal(t, "ok", testutil.ReadBody(t, resp))
			assert.Equal(t, 2, base.Attempts())
		})
	}
}

// A huge MaxHedges neither crashes nor allocates by its size: hedges are
// bounded by MaxAttempts too, and the race holds room for those that can
// actually be sent.
func TestHugeMaxHedgesSendsWhatMaxAttemptsAllows(t *testing.T) {
	for _, maxHedges := range []int{math.MaxInt, 1 << 24} {
		t.Run(fmt.Sprint(maxHedges), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
					if n > 1 {
						<-req.Context().Done() // the hedges lose
						return nil, context.Cause(req.Context())
					}
					time.Sleep(time.Second)
					return testutil.Response(req, http.StatusOK, nil, "first"), nil
				}}
				tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: 3,
					Hedge: &retryhttp.Hedge{Delay: 10 * time.Millisecond, MaxHedges: maxHedges, Fraction: 1}}}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)

				resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

				require.NoError(t, err)
				assert.Equal(t, "first", testutil.ReadBody(t, resp))
				runtime.ReadMemStats(&after)
				assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "bytes allocated")
				synctest.Wait()
				assert.Equal(t, 3, base.Attempts(), "the first attempt and 2 hedges")
				assert.EqualValues(t, 2, tr.Stats().Hedges)
			})
		})
	}
}
