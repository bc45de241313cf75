package retryhttptest_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

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

// An upload broken off midway, by a reset or a stall, is sent again whole:
// the server records the bytes each attempt delivered, the first attempt's
// 1,000 and the second's all, the same body.
func TestRetryingClientResendsAnUploadBrokenMidway(t *testing.T) {
	payload := strings.Repeat("part of a large object ", 4096) // 94,208 bytes
	for _, tc := range []struct {
		name   string
		fault  rt.Step
		policy retryhttp.Policy
	}{
		{"reset", rt.Status(200).ResetMidUpload(1000), retryhttp.Policy{}},
		{"stall", rt.Status(200).StallMidUpload(1000), retryhttp.Policy{AttemptTimeout: 200 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, rt.Sequence(tc.fault, rt.Status(200).WithBody("stored")))
			c := retrying(t, srv, tc.policy)
			req, err := http.NewRequest(http.MethodPut, srv.URL+"/bucket/object", strings.NewReader(payload))
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, "stored", string(body))
			assert.Equal(t, 2, retryhttp.Attempts(resp))
			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			assert.EqualValues(t, 1000, reqs[0].BodyLen, "the first attempt's bytes, until the fault")
			assert.EqualValues(t, len(payload), reqs[1].BodyLen, "the retry's: the whole body")
			sum := sha256.Sum256([]byte(payload))
			assert.Equal(t, hex.EncodeToString(sum[:]), reqs[1].BodySHA256, "the same body")
		})
	}
}

func TestUploadFaultsSayWhatTheyDo(t *testing.T) {
	assert.Equal(t, "Status(200).ResetMidUpload(10)", rt.Status(200).ResetMidUpload(10).String())
	assert.Equal(t, "Status(503).StallMidUpload(0)", rt.Status(503).StallMidUpload(-1).String())
}
