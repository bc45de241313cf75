//go:build unix

package retryhttp

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLoopback measures what a request costs on loopback, where users
// feel it: a GET through a Transport to an httptest server, over HTTP/1.1
// and HTTP/2, with realistic answers (a few header fields, a JSON body of
// 20 to 200 bytes). Paths: "GET", answered 200; "retry", answered 503
// (with a body) then 200, so that every request retries once, its failed
// body drained; "retry2", answered 503 twice, then 200; "hedgeable", a GET with hedging on whose first attempt
// answers before the hedge is due. It reports the process's CPU time per
// request (cpu-ns/op: the server's included), which other processes on a
// shared machine disturb less than the wall-clock ns/op. Judge a change by
// building a test binary before and after it and running them in turns,
// comparing each round's pair:
//
//	git worktree add ../before HEAD~1 && (cd ../before && go test -c -o ../before.test .)
//	go test -c -o ../after.test .
//	for i in $(seq 15); do for v in before after; do ../$v.test -test.run '^$' \
//	  -test.bench 'Loopback/proto=h1/path=retry$' -test.benchtime 2000x | grep -o '[0-9.]* cpu-ns'; done; done
func BenchmarkLoopback(b *testing.B) {
	for _, proto := range []string{"h1", "h2"} {
		for _, path := range []string{"GET", "retry", "retry2", "hedgeable"} {
			b.Run(fmt.Sprintf("proto=%s/path=%s", proto, path), func(b *testing.B) {
				srv := newRealisticServer(proto == "h2")
				defer srv.Close()
				base := srv.Client().Transport.(*http.Transport)
				defer base.CloseIdleConnections()
				p := Policy{Backoff: Constant(0)}
				if path == "hedgeable" {
					p.Hedge = &Hedge{After: time.Second}
				}
				tr := &Transport{Base: base, Policy: p, Budget: UnlimitedBudget()}
				url := srv.URL + "/" + path
				get := func() {
					resp, err := tr.RoundTrip(newBenchGet(url))
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatal(resp.Status)
					}
				}
				get() // the connection
				b.ReportAllocs()
				start := processCPU()
				for b.Loop() {
					get()
				}
				b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// newRealisticServer returns a loopback server answering as an API does: a
// JSON body of 20 to 200 bytes with a few header fields; the path "retry"
// answers every other request 503, with a body of its own, and "retry2"
// two in three.
func newRealisticServer(h2 bool) *httptest.Server {
	var n atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Request-Id", strconv.FormatInt(i, 16))
		if r.URL.Path == "/retry" && i%2 == 1 || r.URL.Path == "/retry2" && i%3 != 0 {
			h.Set("Content-Length", "62")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":"service unavailable","detail":"try again in a bit"}`+"\n")
			return
		}
		body := fmt.Sprintf(`{"id":%d,"name":"item","tags":[%q]}`, i, fmt.Sprint(make([]byte, int(i%60))))
		h.Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	}))
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	return srv
}

func newBenchGet(url string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "retryhttp-bench")
	return req
}

// processCPU returns the CPU time the process has used, in all its threads.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
