package retryhttp

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// WithPolicy(ctx, Policy{MaxAttempts: 1}) puts one request on the wire, with idempotency keys on
// for the host: the Transport adds no key where no retry can follow, so
// net/http does not send the POST again by itself when the reused
// connection it went out on closes under it (it resends a request with an
// Idempotency-Key field). The payments server applies the refund and drops
// the connection: the refund is applied once, and the caller gets the error.
func TestRetriesOffSendsOneRequest(t *testing.T) {
	srv, url, base := startPayments(t)
	tr := &Transport{Base: base, Policy: Policy{IdempotencyKeys: &IdempotencyKeys{}}}
	warm := func() error {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		require.NoError(t, err)
		req.Header.Set("X-Call", "warm-up")
		resp, err := base.RoundTrip(req)
		if err == nil {
			testutil.ReadBody(t, resp) // read whole: the connection goes back to the pool
		}
		return err
	}
	require.Error(t, warm(), "the server drops a call's first arrival")
	require.NoError(t, warm(), "a connection to reuse")

	// A POST without a body, as many a refund or cancel endpoint takes.
	req, err := http.NewRequestWithContext(WithPolicy(t.Context(), Policy{MaxAttempts: 1}), http.MethodPost,
		url+"/refunds/A-17", nil)
	require.NoError(t, err)
	req.Header.Set("X-Call", "refund")
	_, err = tr.RoundTrip(req)
	require.Error(t, err, "the connection dropped: the caller cannot know")
	_, arrivals := srv.snapshot()
	refunds := byCall(arrivals)["refund"]
	require.Len(t, refunds, 1, "one request on the wire")
	assert.Empty(t, refunds[0].key, "no key where no retry can follow")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, ReasonNoRetries, e.Reason)
}
