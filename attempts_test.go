package retryhttp_test

// Attempts and AttemptNumber give each attempt's number, and keep giving
// it for a response a hook kept.

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// 503 three times, then 200: the failed responses that OnRetry and
// Retryable were given, kept, still read as attempts 1, 2 and 3 once the
// request is over.
func TestAKeptResponseKeepsItsAttemptNumber(t *testing.T) {
	for _, hook := range []string{"OnRetry", "Retryable"} {
		t.Run(hook, func(t *testing.T) {
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				code := http.StatusServiceUnavailable
				if n == 4 {
					code = http.StatusOK
				}
				return testutil.Response(req, code, nil, "answer"), nil
			}}
			var kept []*http.Response
			tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Backoff: retryhttp.Constant(0)}}
			switch hook {
			case "OnRetry":
				tr.OnRetry = func(e *retryhttp.RetryEvent) { kept = append(kept, e.Response) }
			case "Retryable":
				tr.Policy.Retryable = func(a *retryhttp.Attempt) bool {
					if a.Response.StatusCode != http.StatusOK {
						kept = append(kept, a.Response)
					}
					return a.Retry
				}
			}

			resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

			require.NoError(t, err)
			testutil.ReadBody(t, resp)
			assert.Equal(t, 4, retryhttp.Attempts(resp))
			require.Len(t, kept, 3)
			for i, r := range kept {
				assert.Equal(t, i+1, retryhttp.Attempts(r), "Attempts of response %d", i+1)
				assert.Equal(t, i+1, retryhttp.AttemptNumber(r.Request.Context()), "AttemptNumber of response %d", i+1)
			}
		})
	}
}
