package retryhttp

// Stats and HostStats count what happened: requests, attempts, retries,
// the budget's denials and give-ups by reason, per host as far as
// TrackHosts allows.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// TestStatsCountWhatHappened sends one request of each kind and reads the
// counters: logical requests, attempts, retries, budget denials, and
// give-ups by reason.
func TestStatsCountWhatHappened(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The base's answer to each request is set by the one sent before it.
		const (
			up    = iota // 200 to every attempt
			down         // 503 to every attempt
			blip         // 503 to a request's first attempt, 200 to its retries
			fault        // a non-transient error
		)
		var mode int
		base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
			switch {
			case mode == fault:
				return nil, errors.New("not a transient failure")
			case mode == down, mode == blip && Attempts(&http.Response{Request: req}) == 1:
				return testutil.Response(req, http.StatusServiceUnavailable, nil, ""), nil
			}
			return testutil.Response(req, http.StatusOK, nil, ""), nil
		}}
		tr := &Transport{
			Base:   base,
			Budget: NewBudget(0, 3), // three retries, refilled at 0.3 a second
			Policy: Policy{MaxAttempts: 3, Backoff: Constant(time.Second)},
		}
		send := func(ctx context.Context, method string, m int) {
			t.Helper()
			mode = m
			req, err := http.NewRequestWithContext(ctx, method, "http://stats.test/", nil)
			require.NoError(t, err)
			resp, err := tr.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
		}
		ctx := context.Background()
		assert.Equal(t, Stats{GiveUps: map[Reason]uint64{}}, tr.Stats(), "zero before first use")

		send(ctx, http.MethodGet, up)    // 1 attempt
		send(ctx, http.MethodGet, blip)  // 2 attempts, 1 retry, paid and given back: it succeeded
		send(ctx, http.MethodPost, down) // 1 attempt: not idempotent
		send(ctx, http.MethodGet, fault) // 1 attempt: not transient
		short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		send(short, http.MethodGet, down) // 1 attempt: the wait would pass the deadline
		cancel()
		send(ctx, http.MethodGet, down) // 3 attempts, 2 retries paid (0.6 refilled meanwhile): exhausted
		send(ctx, http.MethodGet, down) // 2 attempts: 1.6 pays a retry, then 0.9 cannot, and no news comes

		assert.Equal(t, Stats{
			Requests:       7,
			Attempts:       11,
			Retries:        4,
			BudgetRefusals: 1,
			GiveUps: map[Reason]uint64{
				ReasonUnsafe:       1,
				ReasonNotTransient: 1,
				ReasonDeadline:     1,
				ReasonExhausted:    1,
				ReasonBudget:       1,
			},
		}, tr.Stats())
		assert.Equal(t, 11, base.Attempts())
	})
}

// Stats read well as JSON: reasons by name.
func TestStatsAsJSON(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(503)}
	tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	sendOK(t, tr, testutil.Get(t, WithPolicy(t.Context(), Policy{MaxAttempts: 1})))
	b, err := json.Marshal(tr.Stats())
	require.NoError(t, err)
	assert.Contains(t, string(b), `"GiveUps":{"retries off":1}`)
}

// Stats per host, for as many hosts as TrackHosts allows.
func TestHostStatsAreBounded(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(503, 200)}
	tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	tr.TrackHosts = 2
	for _, url := range []string{"http://a.test/", "http://B.test/", "http://a.test/x", "http://c.test/"} {
		sendOK(t, tr, testutil.NewRequest(t, http.MethodGet, url, nil))
	}
	hs := tr.HostStats()
	require.Len(t, hs, 2, "c.test is past the bound")
	assert.EqualValues(t, 2, hs["a.test"].Requests)
	assert.EqualValues(t, 3, hs["a.test"].Attempts, "503 then 200, then 200")
	assert.EqualValues(t, 1, hs["a.test"].Retries)
	assert.EqualValues(t, 1, hs["b.test"].Requests)
	assert.EqualValues(t, 4, tr.Stats().Requests, "the Transport counts every host")
}
