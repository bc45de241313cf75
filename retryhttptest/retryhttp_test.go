package retryhttptest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	rt "github.com/retryhttp/retryhttp/retryhttptest"
)

// retrying returns a client that retries through srv's own transport with
// no wait between attempts, and closes its connections when the test ends.
func retrying(t *testing.T, srv *rt.Server, p retryhttp.Policy) *http.Client {
	t.Helper()
	if p.Backoff == nil {
		p.Backoff = retryhttp.Constant(0)
	}
	c := retryhttp.NewClient(srv.Client(), p)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func TestRetryingClientGetsThrough503sOnOneConnection(t *testing.T) {
	srv := newServer(t, rt.Sequence(rt.Status(503), rt.Status(503), rt.Status(200).WithBody("ok")))
	c := retrying(t, srv, retryhttp.Policy{})

	resp, err := c.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)

	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ok", string(body))
	assert.Equal(t, 3, retryhttp.Attempts(resp))
	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, 1, srv.Conns(), "the failed attempts' bodies were drained, so the connection was reused")
	for _, r := range reqs {
		assert.Equal(t, 1, r.Conn)
	}
}

func TestRetryingClientResendsALostPostWithTheSameKeyAndBody(t *testing.T) {
	applied := make(chan string, 1)
	srv := newServer(t, rt.Sequence(
		rt.ApplyThenDrop(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			applied <- r.Header.Get("Idempotency-Key")
		})),
		rt.Status(201),
	))
	c := retrying(t, srv, retryhttp.Policy{IdempotencyKeys: &retryhttp.IdempotencyKeys{}})

	resp, err := c.Post(srv.URL+"/orders", "application/json", strings.NewReader(`{"item": 7}`))
	require.NoError(t, err)
	resp.Body.Close()

	assert.Equal(t, 201, resp.StatusCode)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	key := reqs[0].Header.Get("Idempotency-Key")
	assert.NotEmpty(t, key)
	assert.Equal(t, key, <-applied, "the applied attempt carried the key")
	assert.Equal(t, key, reqs[1].Header.Get("Idempotency-Key"), "the retry carries the same key")
	assert.Equal(t, reqs[0].BodySHA256, reqs[1].BodySHA256, "and the same body")
	assert.Equal(t, int64(len(`{"item": 7}`)), reqs[1].BodyLen)
	assert.Equal(t, 2, srv.Conns(), "the reset connection was not reused")
}

func TestRetryingClientDoesNotResendALostPostWithoutAKey(t *testing.T) {
	srv := newServer(t, rt.Sequence(rt.ApplyThenDrop(http.NotFoundHandler()), rt.Status(201)))
	c := retrying(t, srv, retryhttp.Policy{})

	_, err := c.Post(srv.URL+"/orders", "application/json", strings.NewReader(`{"item": 7}`))
	var e *retryhttp.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, retryhttp.ReasonUnsafe, e.Reason)
	assert.Len(t, srv.Requests(), 1, "applied once, never twice")
}
