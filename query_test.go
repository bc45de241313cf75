package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// QUERY (RFC 10008) is safe and idempotent, with content: the Transport
// retries it, hedges it and gives it its body again as it does a PUT, with
// no idempotency key. Each test runs against a loopback server that reads
// the whole body of every attempt.

// queryServer answers each QUERY with answer(n), n counting from 1, after
// reading its whole body, and records the bodies and the key fields it got.
type queryServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
	keys   []string
}

func newQueryServer(t *testing.T, answer func(n int, w http.ResponseWriter)) *queryServer {
	s := &queryServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		s.mu.Lock()
		if r.Method != "QUERY" || err != nil {
			t.Errorf("got %s, body error %v", r.Method, err)
		}
		s.bodies = append(s.bodies, string(body))
		s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		n := len(s.bodies)
		s.mu.Unlock()
		answer(n, w)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *queryServer) got() (bodies, keys []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies), slices.Clone(s.keys)
}

// newQuery returns a QUERY of body to url, with GetBody, as
// http.NewRequest makes it for a bytes.Reader.
func newQuery(t *testing.T, url, body string) *http.Request {
	req, err := http.NewRequestWithContext(t.Context(), "QUERY", url, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/sql")
	return req
}

const queryBody = "SELECT name FROM things WHERE size > 3"

func TestAQueryIsRetriedWithItsBody(t *testing.T) {
	srv := newQueryServer(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "rows")
	})
	tr := &Transport{Policy: Policy{Backoff: Constant(0), IdempotencyKeys: &IdempotencyKeys{}}}
	defer tr.CloseIdleConnections()
	resp, body := sendOK(t, tr, newQuery(t, srv.URL, queryBody))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "rows", body)
	assert.Equal(t, 2, Attempts(resp))
	bodies, keys := srv.got()
	assert.Equal(t, []string{queryBody, queryBody}, bodies, "the whole body on each attempt")
	assert.Equal(t, []string{"", ""}, keys, "no idempotency key: QUERY needs none")
}

func TestAQueryWithoutGetBodyIsBufferedAndRetried(t *testing.T) {
	srv := newQueryServer(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		io.WriteString(w, "rows")
	})
	tr := &Transport{Policy: Policy{Backoff: Constant(0)}}
	defer tr.CloseIdleConnections()
	req := newQuery(t, srv.URL, queryBody)
	req.Body, req.GetBody = io.NopCloser(strings.NewReader(queryBody)), nil // a body the Transport must keep
	_, body := sendOK(t, tr, req)
	assert.Equal(t, "rows", body)
	bodies, _ := srv.got()
	assert.Equal(t, []string{queryBody, queryBody}, bodies, "the whole body on each attempt")
}

func TestAQueryIsHedged(t *testing.T) {
	srv := newQueryServer(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			time.Sleep(300 * time.Millisecond) // the hedge answers first
		}
		io.WriteString(w, "rows")
	})
	tr := &Transport{Policy: Policy{Hedge: &Hedge{After: 20 * time.Millisecond, Fraction: 1}}}
	defer tr.CloseIdleConnections()
	resp, body := sendOK(t, tr, newQuery(t, srv.URL, queryBody))
	assert.Equal(t, "rows", body)
	assert.Equal(t, 2, Attempts(resp), "the hedge won")
	assert.EqualValues(t, 1, tr.Stats().Hedges)
	bodies, _ := srv.got() // each read before its answer: both in

	assert.Equal(t, []string{queryBody, queryBody}, bodies, "each copy carries the whole body")
}
