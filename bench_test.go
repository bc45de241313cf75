package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// cannedBase answers every request with the same 200 response, closing the
// request body as a RoundTripper must. It allocates nothing itself, so a
// benchmark through it measures only what wraps it.
type cannedBase struct{ resp *http.Response }

func newCannedBase() *cannedBase {
	return &cannedBase{resp: &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}}
}

func (b *cannedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return b.resp, nil
}

func BenchmarkRoundTrip(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1<<20)
	get := func() *http.Request {
		req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		return req
	}
	cases := []struct {
		name string
		rt   func(base http.RoundTripper) http.RoundTripper
	}{
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"retryhttp", func(base http.RoundTripper) http.RoundTripper { return &Transport{Base: base} }},
	}
	for _, tc := range cases {
		b.Run("GET/"+tc.name, func(b *testing.B) {
			rt := tc.rt(newCannedBase())
			req := get()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("PUT1MiB/"+tc.name, func(b *testing.B) {
			rt := tc.rt(newCannedBase())
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				req, _ := http.NewRequest(http.MethodPut, "http://example.test/", bytes.NewReader(payload))
				b.StartTimer()
				if _, err := rt.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
