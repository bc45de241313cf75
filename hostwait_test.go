package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// limitedHost answers the path /limited 429 with Retry-After: 2 once, and
// every other request 200, noting when each request's first attempt came.
type limitedHost struct {
	mu     sync.Mutex
	told   bool
	firsts map[string]time.Time // by path
}

func (h *limitedHost) base() http.RoundTripper {
	h.firsts = map[string]time.Time{}
	return testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.firsts[req.URL.Path]; !ok {
			h.firsts[req.URL.Path] = time.Now()
		}
		if req.URL.Path == "/limited" && !h.told {
			h.told = true
			return testutil.Response(req, http.StatusTooManyRequests, http.Header{"Retry-After": {"2"}}, ""), nil
		}
		return testutil.Response(req, http.StatusOK, nil, "ok"), nil
	})
}

func (h *limitedHost) first(path string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.firsts[path]
}

// getIn sends a GET of path to the host under ctx, in the background.
func getIn(t *testing.T, wg *sync.WaitGroup, tr http.RoundTripper, ctx context.Context, path string) *result {
	r := new(result)
	wg.Go(func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test"+path, nil)
		require.NoError(t, err)
		r.resp, r.err = tr.RoundTrip(req)
		if r.resp != nil {
			r.resp.Body.Close()
		}
	})
	return r
}

type result struct {
	resp *http.Response
	err  error
}

// With HostWait on, a host's 429 asking for 2 s holds the new requests to
// it: after 4 requests served, the first held goes when the wait ends, and
// the others one at a time, 2 s / 4 apart. Off, a new request goes at once.
func TestAHostToldToWaitHoldsItsNewRequests(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[on], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := new(limitedHost)
				tr := &Transport{Base: h.base(), rand: func() float64 { return 0 }}
				if on {
					tr.Policy.HostWait = time.Minute
				}
				start := time.Now()
				for range 4 {
					getOK(t, tr) // served: the pace to come
				}
				var wg sync.WaitGroup
				getIn(t, &wg, tr, t.Context(), "/limited")
				synctest.Wait()
				time.Sleep(500 * time.Millisecond)
				for _, path := range []string{"/b", "/c", "/d"} {
					getIn(t, &wg, tr, t.Context(), path)
					synctest.Wait() // held, in this order
				}
				wg.Wait()
				if !on {
					assert.Equal(t, 500*time.Millisecond, h.first("/b").Sub(start), "off: at once")
					return
				}
				assert.Equal(t, 2*time.Second, h.first("/b").Sub(start), "when the wait ends")
				assert.Equal(t, 2500*time.Millisecond, h.first("/c").Sub(start), "a pace of 2 s / 4 served after")
				assert.Equal(t, 3*time.Second, h.first("/d").Sub(start))
			})
		})
	}
}

// A request whose turn would come past its deadline, or past HostWait,
// ends at once, sent to no one, with a reason and an error that say so,
// its body closed. Found by the simulation (seed 201): a body with
// GetBody was left open.
func TestAHeldRequestPastItsDeadlineEndsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hostWait time.Duration
		deadline time.Duration // 0: none
		reason   Reason
	}{
		{"its deadline", time.Minute, time.Second, ReasonDeadline},
		{"HostWait", time.Second, 0, ReasonRetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := new(limitedHost)
				tr := &Transport{Base: h.base(), Policy: Policy{HostWait: tc.hostWait}}
				var wg sync.WaitGroup
				getIn(t, &wg, tr, t.Context(), "/limited")
				synctest.Wait()
				ctx := t.Context()
				if tc.deadline > 0 {
					ctx = testutil.WithTimeout(t, tc.deadline)
				}
				req := testutil.NewRequest(t, http.MethodPut, "http://api.test/", nil)
				body := testutil.NewCloseRecorder(strings.NewReader("thing"))
				req.Body, req.ContentLength = body, 5
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("thing")), nil }
				req.Header.Set("Idempotency-Key", "k-1")
				start := time.Now()
				_, err := tr.RoundTrip(req.WithContext(ctx))
				assert.Zero(t, time.Since(start), "at once")
				assert.Equal(t, 1, body.Closes(), "its body closed, as RoundTrip always does")
				e := gaveUp(t, err, tc.reason, 0)
				assert.Zero(t, e.Attempts, "sent to no one")
				assert.Empty(t, e.Key, "no key went to the host")
				assert.ErrorContains(t, err, "the host asked to wait")
				if tc.reason == ReasonDeadline {
					assert.True(t, errors.Is(err, context.DeadlineExceeded))
				}
				assert.True(t, h.first("/").IsZero(), "the host never saw it")
				wg.Wait()
			})
		})
	}
}

// A wait the host asks for while held requests take their turns holds
// them again: none goes inside it. And a success whose RateLimit says none
// are left holds new requests as a 429 does.
func TestAHeldRequestWaitsOutANewWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var firsts []time.Duration
		start := time.Now()
		base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			firsts = append(firsts, time.Since(start))
			if len(firsts) == 1 || len(firsts) == 2 { // "none left for 1 s", twice
				return testutil.Response(req, http.StatusOK, http.Header{"Ratelimit": {`"q";r=0;t=1`}}, "ok"), nil
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		})
		tr := &Transport{Base: base, Policy: Policy{HostWait: time.Minute}}
		getOK(t, tr) // at 0: none left until 1 s
		var wg sync.WaitGroup
		for range 2 {
			getIn(t, &wg, tr, t.Context(), "/")
		}
		wg.Wait()
		// The first held goes at 1 s and is told none are left until 2 s:
		// the second, whose turn was 2 s (a pace of 1 s), goes then.
		assert.Equal(t, []time.Duration{0, time.Second, 2 * time.Second}, firsts)
	})
}

// secondaryLimit is a GitHub-style API: it serves 20 requests in each
// second, and answers any more 429 with Retry-After: 1, the wait to the
// next second (a fixed window). It counts, for the table of docs/faults.md,
// the 429s it gave, the requests that came inside a wait it had given,
// and its busiest second.
type secondaryLimit struct {
	mu          sync.Mutex
	start       time.Time
	perSecond   map[int]int // requests that came, by second
	served      map[int]int // requests served, by second
	told        int         // 429s given
	inside      int         // requests that came inside a wait given
	waitEnd     time.Time   // the end of the last wait given
	servedTotal int
}

func (s *secondaryLimit) base() http.RoundTripper {
	s.perSecond, s.served = map[int]int{}, map[int]int{}
	return testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		now := time.Now()
		sec := int(now.Sub(s.start) / time.Second)
		s.perSecond[sec]++
		if now.Before(s.waitEnd) {
			s.inside++
		}
		if s.served[sec] < 20 {
			s.served[sec]++
			s.servedTotal++
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}
		s.told++
		s.waitEnd = s.start.Add(time.Duration(sec+1) * time.Second)
		return testutil.Response(req, http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, ""), nil
	})
}

// hostWaitRow is what one setting got against the secondary limit.
type hostWaitRow struct {
	told, inside, served, busiest, attempts int
	share                                   float64
}

// runSecondaryLimit offers 40 GETs a second for 30 s, each with a 10 s
// deadline, through tr over the limit, in fake time.
func runSecondaryLimit(t *testing.T, tr *Transport) hostWaitRow {
	var row hostWaitRow
	synctest.Test(t, func(t *testing.T) {
		s := &secondaryLimit{start: time.Now()}
		tr.Base = s.base()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := range 40 * 30 {
			time.Sleep(time.Until(s.start.Add(time.Duration(i) * 25 * time.Millisecond)))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				mu.Lock()
				defer mu.Unlock()
				if err == nil && resp.StatusCode == http.StatusOK {
					row.served++
				}
			})
		}
		wg.Wait()
		row.told, row.inside = s.told, s.inside
		for _, n := range s.perSecond {
			row.busiest = max(row.busiest, n)
			row.attempts += n
		}
	})
	row.share = float64(row.served) / (40 * 30)
	return row
}

// Against a secondary limit of 20 a second, offered 40 a second for 30 s:
// with HostWait on, at least 5 times fewer 429s than off, no request inside
// a wait the host gave, and no fewer requests served. The table is
// docs/faults.md's (go test -run TestHostWaitAgainstASecondaryLimit -v).
func TestHostWaitAgainstASecondaryLimit(t *testing.T) {
	rows := map[string]hostWaitRow{}
	for _, tc := range []struct {
		name string
		tr   *Transport
	}{
		{"HostWait 10 s", &Transport{Policy: Policy{HostWait: 10 * time.Second}}},
		{"off", &Transport{}},
		{"off, UnlimitedBudget()", &Transport{Budget: UnlimitedBudget()}},
	} {
		r := runSecondaryLimit(t, tc.tr)
		rows[tc.name] = r
		t.Logf("%-24s 429s %5d  inside a wait %5d  served %4d (%5.1f %%)  attempts/served %.2f  busiest second %3d",
			tc.name, r.told, r.inside, r.served, 100*r.share, float64(r.attempts)/float64(max(r.served, 1)), r.busiest)
	}
	on, off := rows["HostWait 10 s"], rows["off"]
	assert.LessOrEqual(t, 5*on.told, off.told, "at least 5 times fewer 429s")
	assert.Zero(t, on.inside, "no request inside a wait the host gave")
	assert.GreaterOrEqual(t, on.served, off.served, "no fewer served")
}
