package retryhttp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/retryhttptest"
)

// QUERY (RFC 10008) is safe and idempotent, with content: the Transport
// retries it, hedges it and gives it its body again as it does a PUT, with
// no idempotency key. Each test runs against a loopback server that reads
// the whole body of every attempt and records it.

const queryBody = "SELECT name FROM things WHERE size > 3"

// newQuery returns a QUERY of body to url, with GetBody, as
// http.NewRequest makes it for a bytes.Reader.
func newQuery(t *testing.T, url, body string) *http.Request {
	req, err := http.NewRequestWithContext(t.Context(), "QUERY", url, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/sql")
	return req
}

// sendQuery sends req through a Transport of policy p to a server playing
// steps, and returns the response's body and what the server received.
func sendQuery(t *testing.T, p Policy, req func(url string) *http.Request, steps ...retryhttptest.Step) (
	*http.Response, string, []retryhttptest.Request) {
	srv := retryhttptest.NewServer(retryhttptest.Sequence(steps...))
	defer srv.Close()
	tr := &Transport{Base: srv.Client().Transport, Policy: p}
	defer tr.CloseIdleConnections()
	resp, body := sendOK(t, tr, req(srv.URL))
	return resp, body, srv.Requests()
}

// assertWholeQueries asserts that each request received is a QUERY with the
// whole body and no idempotency key.
func assertWholeQueries(t *testing.T, reqs []retryhttptest.Request, n int) {
	t.Helper()
	require.Len(t, reqs, n)
	sum := sha256.Sum256([]byte(queryBody))
	for i, r := range reqs {
		assert.Equal(t, "QUERY", r.Method)
		assert.Equal(t, hex.EncodeToString(sum[:]), r.BodySHA256, "attempt %d: the whole body", i+1)
		assert.Empty(t, r.Header.Get("Idempotency-Key"), "attempt %d: no key, QUERY needs none", i+1)
	}
}

func TestAQueryIsRetriedWithItsBody(t *testing.T) {
	p := Policy{Backoff: Constant(0), IdempotencyKeys: &IdempotencyKeys{}}
	resp, body, reqs := sendQuery(t, p, func(url string) *http.Request { return newQuery(t, url, queryBody) },
		retryhttptest.Status(http.StatusServiceUnavailable), retryhttptest.Status(200).WithBody("rows"))
	assert.Equal(t, "rows", body)
	assert.Equal(t, 2, Attempts(resp))
	assertWholeQueries(t, reqs, 2)
}

func TestAQueryWithoutGetBodyIsBufferedAndRetried(t *testing.T) {
	query := func(url string) *http.Request {
		req := newQuery(t, url, queryBody)
		req.Body, req.GetBody = io.NopCloser(strings.NewReader(queryBody)), nil // the Transport keeps it
		return req
	}
	_, body, reqs := sendQuery(t, Policy{Backoff: Constant(0)}, query,
		retryhttptest.Status(http.StatusBadGateway), retryhttptest.Status(200).WithBody("rows"))
	assert.Equal(t, "rows", body)
	assertWholeQueries(t, reqs, 2)
}

func TestAQueryIsHedged(t *testing.T) {
	p := Policy{Hedge: &Hedge{After: 20 * time.Millisecond, Fraction: 1}}
	resp, body, reqs := sendQuery(t, p, func(url string) *http.Request { return newQuery(t, url, queryBody) },
		retryhttptest.Status(200).WithBody("rows").After(300*time.Millisecond), // the hedge answers first
		retryhttptest.Status(200).WithBody("rows"))
	assert.Equal(t, "rows", body)
	assert.Equal(t, 2, Attempts(resp), "the hedge won")
	assertWholeQueries(t, reqs, 2) // each read before its answer: both in
}
