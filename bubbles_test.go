package retryhttp

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A Transport shared by tests, some in testing/synctest bubbles and some
// not (a package's client), does not end the program as it goes in and out
// of them: the timers it keeps from one request to the next (its budget's,
// the drain's cut-offs) are never a bubble's timer reset outside it ("reset
// of synctest timer from outside bubble", a fatal error). Each request ends
// with an answer. Its retries are only right within one bubble, or outside
// any (the bubble's clock reads another year: the budget's notion of a
// host's last news is off), as the Transport's doc says.
func TestATransportUsedInAndOutOfBubbles(t *testing.T) {
	for _, budget := range []*Budget{nil, UnlimitedBudget()} { // the budget's timer, and the drains' alone
		t.Run(fmt.Sprintf("unlimited %v", budget != nil), func(t *testing.T) { usedInAndOutOfBubbles(t, budget) })
	}
}

func usedInAndOutOfBubbles(t *testing.T, budget *Budget) {
	var calls atomic.Int64
	base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if calls.Add(1)%2 == 1 { // every request's first attempt: a 503 with a body
			return &http.Response{StatusCode: 503, Header: http.Header{}, Request: req, ContentLength: 11,
				Body: io.NopCloser(strings.NewReader("unavailabl" + "e"))}, nil
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req, ContentLength: 2,
			Body: io.NopCloser(strings.NewReader("ok"))}, nil
	})
	tr := &Transport{Base: base, Budget: budget} // the default budget: the retry waits in the host's line
	get := func(t *testing.T) {
		resp, b := sendOK(t, tr, testutil.NewRequest(t, http.MethodGet, "http://api.test/", nil).WithContext(t.Context()))
		assert.Contains(t, []string{"200 ok", "503 unavailable"}, fmt.Sprint(resp.StatusCode, " ", b))
	}
	synctest.Test(t, get) // the retry waits in the host's line: the budget's timer, in the bubble
	get(t)                // outside: that timer is not reset here
	synctest.Test(t, get)
	synctest.Test(t, get) // another bubble
	get(t)
	st := tr.Stats()
	assert.EqualValues(t, 5, st.Requests)
	assert.Equal(t, st.Requests+st.Retries, st.Attempts, "every retry counted was sent")
	assert.EqualValues(t, st.Attempts, calls.Load(), "and reached the base")
}

// The same for a Transport that hedges, whose races keep their hedge timers
// from one request to the next outside bubbles (a race no hedge went in
// goes back to the pool): in each bubble the hedge goes at the delay in
// the bubble's time, and no race's timer crosses into or out of a bubble.
// (Fraction 1: the share of a host's requests hedged is judged over a
// window of times, which a bubble's clock does not match.)
func TestAHedgingTransportUsedInAndOutOfBubbles(t *testing.T) {
	base := testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		body := "fast"
		if req.URL.Path == "/slow" && AttemptNumber(req.Context()) == 1 { // its first attempt is slow
			select {
			case <-time.After(time.Second):
				body = "slow"
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Request: req, ContentLength: int64(len(body)),
			Body: io.NopCloser(strings.NewReader(body))}, nil
	})
	tr := &Transport{Base: base, Policy: Policy{Hedge: &Hedge{After: 10 * time.Millisecond, Fraction: 1}}}
	get := func(t *testing.T, path string) time.Duration {
		req := testutil.NewRequest(t, http.MethodGet, "http://api.test"+path, nil).WithContext(t.Context())
		start := time.Now()
		_, b := sendOK(t, tr, req)
		assert.Equal(t, "fast", b)
		return time.Since(start)
	}
	fastOnes := func(t *testing.T) { // no hedge goes: their races go back (a few at once, so that
		var wg sync.WaitGroup // the pool holds several, on every P)
		for range 8 {
			wg.Go(func() { get(t, "/fast") })
		}
		wg.Wait()
	}
	inBubble := func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fastOnes(t)
			assert.Equal(t, 10*time.Millisecond, get(t, "/slow"), "the hedge at its delay, in the bubble's time")
		})
	}
	outside := func(t *testing.T) {
		fastOnes(t) // races from the pool, if any
		get(t, "/slow")
	}
	inBubble(t)
	outside(t)
	outside(t)
	inBubble(t)
	inBubble(t)
	outside(t)
	assert.EqualValues(t, 6, tr.Stats().HedgeWins)
}
