package testutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// NewRequest returns a request of method to url with body (may be nil).
func NewRequest(t testing.TB, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	return req
}

// WithTimeout returns t's context, ending in d; it is canceled when the
// test ends.
func WithTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// Get returns a GET of an in-memory URL, http://api.test/things, with
// context ctx.
func Get(t testing.TB, ctx context.Context) *http.Request {
	t.Helper()
	return NewRequest(t, http.MethodGet, "http://api.test/things", nil).WithContext(ctx)
}

// RoundTrip sends req through rt and checks the half of the RoundTripper
// contract that holds on every path: exactly one of resp and err is nil.
// A response's body is closed when the test ends.
func RoundTrip(t testing.TB, rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	if (resp == nil) == (err == nil) {
		t.Fatalf("RoundTrip returned resp %v and err %v: exactly one must be nil", resp, err)
	}
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

// ReadBody reads and closes a response body.
func ReadBody(t testing.TB, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return string(b)
}

// Payload returns n bytes of deterministic noise: a resend that dropped,
// repeated or reordered any part of it would hash differently.
func Payload(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}

// SHA256Hex is the hex SHA-256 of b, as a retryhttptest.Request holds its
// body's.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
