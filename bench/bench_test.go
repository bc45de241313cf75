package bench

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-cleanhttp"
)

const target = "http://dependency.test/resource"

// roundTrip sends req through rt and closes the response body, as every
// caller must (failsafe-go releases its contexts on that Close).
func roundTrip(b *testing.B, rt http.RoundTripper, req *http.Request, want int) {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != want {
		b.Fatalf("status %d, want %d", resp.StatusCode, want)
	}
	resp.Body.Close()
}

// BenchmarkGET is the success path of a GET: one attempt, answered 200 by an
// in-memory base. The same request is sent on every iteration, so the
// figures are what each library adds to the bare base.
func BenchmarkGET(b *testing.B) {
	for _, lib := range Equal(Comparable, true) {
		b.Run("lib="+lib.Name, func(b *testing.B) {
			rt := lib.Wrap(&Canned{})
			req, _ := http.NewRequest(http.MethodGet, target, nil)
			b.ReportAllocs()
			for b.Loop() {
				roundTrip(b, rt, req, http.StatusOK)
			}
		})
	}
}

// BenchmarkPUT1MiB is the success path of a PUT with a 1 MiB body from a
// bytes.Reader, answered 200 by an in-memory base that reads the body. Each
// iteration makes a fresh request (http.NewRequest, which sets GetBody) at
// the same cost for every library, bare included.
func BenchmarkPUT1MiB(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 1<<20)
	for _, lib := range Equal(Comparable, true) {
		b.Run("lib="+lib.Name, func(b *testing.B) {
			rt := lib.Wrap(&Canned{})
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPut, target, bytes.NewReader(payload))
				roundTrip(b, rt, req, http.StatusOK)
			}
		})
	}
}

// BenchmarkRetry is the retry path: the in-memory base answers 503, 503,
// then 200, and every library retries at once (zero backoff, no budget). The
// bare row is the floor: the three attempts made by hand, each response
// drained and closed.
func BenchmarkRetry(b *testing.B) {
	for _, lib := range Equal(Zero, false) {
		b.Run("lib="+lib.Name, func(b *testing.B) {
			base := &Canned{Script: []int{503, 503, 200}}
			rt := lib.Wrap(base)
			if lib.Name == "bare" {
				rt = byHand{base}
			}
			req, _ := http.NewRequest(http.MethodGet, target, nil)
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				roundTrip(b, rt, req, http.StatusOK)
				n++
			}
			if base.Calls != 3*n {
				b.Fatalf("%d attempts for %d requests, want 3 each", base.Calls, n)
			}
		})
	}
}

// byHand retries a bodiless request until it is answered 200, draining and
// closing each failed response: the least work three attempts can take.
type byHand struct{ base http.RoundTripper }

func (h byHand) RoundTrip(req *http.Request) (*http.Response, error) {
	for {
		resp, err := h.base.RoundTrip(req)
		if err != nil || resp.StatusCode == http.StatusOK {
			return resp, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkLoopback sends GETs from GOMAXPROCS goroutines through each
// library to an httptest server on 127.0.0.1, over a pooled transport of
// its own. It reports requests per second.
func BenchmarkLoopback(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 128)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write(body)
	}))
	defer srv.Close()
	for _, lib := range Equal(Comparable, true) {
		b.Run("lib="+lib.Name, func(b *testing.B) {
			pool := cleanhttp.DefaultPooledTransport()
			defer pool.CloseIdleConnections()
			rt := lib.Wrap(pool)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
				for pb.Next() {
					resp, err := rt.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}
