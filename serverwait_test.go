package retryhttp

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// one instant: each retry waits its own draw of the default backoff, full
// jitter over [0, 100 ms), exactly as the Backoff computes it.
func TestCrowdToldNowIsSpreadByTheBackoff(t *testing.T) {
	const crowd = 20
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]bool{}
		base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			if !seen[req.URL.Path] {
				seen[req.URL.Path] = true
				return testutil.Response(req, http.StatusServiceUnavailable, http.Header{"Retry-After": {"0"}}, ""), nil
			}
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}}
		rng := rand.New(rand.NewPCG(3, 4))
		var draws []float64
		tr := &Transport{Base: base, Budget: UnlimitedBudget(), rand: func() float64 {
			mu.Lock()
			defer mu.Unlock()
			u := rng.Float64()
			draws = append(draws, u)
			return u
		}}
		ev := new(hookLog).watch(tr)
		start := time.Now()
		waited := make([]time.Duration, crowd)
		var wg sync.WaitGroup
		for i := range crowd {
			wg.Go(func() {
				req := testutil.NewRequest(t, http.MethodGet, fmt.Sprintf("http://api.test/c/%d", i), nil)
				resp, err := tr.RoundTrip(req)
				if assert.NoError(t, err) {
					assert.Equal(t, "ok", testutil.ReadBody(t, resp))
					assert.Equal(t, 2, Attempts(resp))
				}
				waited[i] = time.Since(start)
			})
		}
		wg.Wait()

		require.Len(t, draws, crowd, "one random draw per retry")
		var want []time.Duration
		for _, u := range draws {
			want = append(want, FullJitter{}.Delay(0, 0, u))
		}
		assert.ElementsMatch(t, want, waited, "each retry waited its own draw of the backoff")
		slices.Sort(waited)
		assert.Less(t, waited[crowd-1], defaultBase, "within the first retry's window")
		assert.Len(t, slices.Compact(waited), crowd, "no two retries at the same instant")
		require.Len(t, ev.retries, crowd)
		for _, e := range ev.retries {
			assert.Equal(t, DelayBackoff, e.Source)
		}
	})
}
