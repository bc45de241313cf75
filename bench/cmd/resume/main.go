// Command resume measures a large download whose connection breaks
// mid-way, through three clients: retryhttp resuming the body where it
// broke (Policy.ResumeResponse), retryhttp reading each attempt's whole
// body into memory and retrying it whole (Policy.BufferResponse), and a
// bare restart (the caller sends the GET again and reads from the start).
// The server is http.ServeContent on 127.0.0.1 (Range, If-Range, an ETag),
// serving -size MiB of deterministic noise and breaking the connection at
// -cuts offsets of the body spread evenly over it. Each client meets the
// same cuts: the resumed body breaks at each offset once, on its way
// through; the whole-body clients' attempt k breaks at offset k, so each
// attempt gets one cut further than the last and the one after the last
// cut reads the body whole. Every client may make -cuts+1 attempts (or
// GETs), with no wait between them and the default budget. The server runs
// in this process and generates the payload as it sends it, so that the
// heap holds no copy of the body but one a client makes.
//
// For each client it reports the bytes the client read off its connections
// (headers included) over the body's size, the peak of the heap's objects (runtime/metrics, sampled every 2 ms)
// above the heap after a collection before the download, the wall time, the
// requests the server saw, and whether the bytes read hash (SHA-256) as the
// payload does. The caller reads with io.Copy into the hash. The clients run
// -rounds times, interleaved; the table gives medians with their range.
//
//	cd bench && go run ./cmd/resume   # about 15 s on 2 cores
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

const mib = 1 << 20

// A client is one way of reading the download.
type client struct {
	name    string
	policy  retryhttp.Policy
	tries   int  // the GETs the caller sends, each from the start, until one reads the body whole
	resumes bool // the body breaks at each cut once, on its way through (else each attempt one cut further)
}

// A sample is one download through one client.
type sample struct {
	wire     float64       // bytes the client read off its connections over the body's size
	heap     int64         // peak heap objects above the baseline, bytes
	wall     time.Duration // from the first request to the body's end
	requests int           // requests the server saw
	ok       bool          // the bytes read hash as the payload
	note     string        // what went wrong, or the Transport's counts
}

func main() {
	sizeMiB := flag.Int64("size", 256, "the body's size, MiB")
	ncuts := flag.Int("cuts", 5, "the cuts, spread evenly over the body")
	bufMiB := flag.Int64("buffer", 300, "BufferResponse of the whole-body client, MiB")
	rounds := flag.Int("rounds", 3, "rounds, each client once a round")
	flag.Parse()
	size := *sizeMiB * mib
	step := size / int64(*ncuts+1)
	clients := clientsFor(*ncuts, *bufMiB*mib)

	h := sha256.New()
	if _, err := io.Copy(h, &payload{size: size}); err != nil {
		log.Fatal(err)
	}
	want := h.Sum(nil)

	fmt.Printf("A %d MiB body (ETag, Accept-Ranges: bytes) from http.ServeContent on 127.0.0.1,\n", *sizeMiB)
	fmt.Printf("its connection cut at %d offsets of the body: %s MiB.\n", *ncuts, offsets(step, *ncuts))
	fmt.Printf("Each client: MaxAttempts %d, Constant(0) backoff, default budget; BufferResponse %d MiB;\n",
		*ncuts+1, *bufMiB)
	fmt.Printf("restart: ResumeResponse off, the GET sent again from the start, up to %d times in all.\n", *ncuts+1)
	fmt.Printf("%s %s/%s, %d CPUs, GOMAXPROCS %d; %d rounds, interleaved.\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), *rounds)

	samples := make([][]sample, len(clients))
	failed := false
	for r := range *rounds {
		for i, c := range clients {
			s := run(c, size, step, *ncuts, want)
			samples[i] = append(samples[i], s)
			failed = failed || !s.ok
			fmt.Fprintf(os.Stderr, "round %d %-24s %.3fx  heap %+8.1f MiB  %6.2f s  %d requests  sha256 %v  %s\n",
				r+1, c.name, s.wire, float64(s.heap)/mib, s.wall.Seconds(), s.requests, s.ok, s.note)
		}
	}
	printTable(os.Stdout, clients, samples)
	if failed {
		os.Exit(1)
	}
}

// clientsFor returns the three clients, each allowed ncuts+1 attempts or
// GETs, with no wait between them and the default budget.
func clientsFor(ncuts int, buffer int64) []client {
	p := retryhttp.Policy{MaxAttempts: ncuts + 1, Backoff: retryhttp.Constant(0)}
	resume, whole := p, p
	resume.ResumeResponse = true
	whole.BufferResponse = buffer
	return []client{
		{name: "ResumeResponse", policy: resume, tries: 1, resumes: true},
		{name: "BufferResponse", policy: whole, tries: 1},
		{name: "restart", policy: p, tries: ncuts + 1},
	}
}

// offsets lists the cuts' offsets, in MiB.
func offsets(step int64, ncuts int) string {
	var at []string
	for k := 1; k <= ncuts; k++ {
		at = append(at, fmt.Sprintf("%.1f", float64(int64(k)*step)/mib))
	}
	return strings.Join(at, ", ")
}

// run downloads the body once through c, the server breaking it at the
// multiples of step below ncuts+1.
func run(c client, size, step int64, ncuts int, want []byte) sample {
	d := &download{size: size}
	wantRanges := []string{""}
	var steps []retryhttptest.Step
	for k := 1; k <= ncuts; k++ {
		if c.resumes {
			steps = append(steps, retryhttptest.Respond(d).CloseMidBody(int(step))) // each answer starts where the last broke
			wantRanges = append(wantRanges, fmt.Sprintf("bytes=%d-", int64(k)*step))
		} else {
			steps = append(steps, retryhttptest.Respond(d).CloseMidBody(k*int(step))) // each answer starts at 0
			wantRanges = append(wantRanges, "")
		}
	}
	srv := retryhttptest.NewServer(retryhttptest.Sequence(append(steps, retryhttptest.Respond(d))...))
	defer srv.Close()
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	var wire atomic.Int64 // what the client read off its connections, headers included
	var dialer net.Dialer
	base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, n: &wire}, nil
	}
	tr := &retryhttp.Transport{Base: base, Policy: c.policy}
	hc := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	runtime.GC()
	runtime.GC()
	heap := startHeap()
	start := time.Now()
	sum, err := fetch(ctx, hc, srv.URL+"/file", c.tries)
	wall := time.Since(start)
	peak := heap.stop()

	s := sample{
		wire:     float64(wire.Load()) / float64(size),
		heap:     peak,
		wall:     wall,
		requests: len(d.Ranges()),
		ok:       err == nil && bytes.Equal(sum, want),
	}
	st := tr.Stats()
	s.note = fmt.Sprintf("attempts %d, retries %d, resumes %d", st.Attempts, st.Retries, st.Resumes)
	switch {
	case err != nil:
		s.note += "; " + err.Error()
	case !slices.Equal(d.Ranges(), wantRanges):
		s.ok = false
		s.note += fmt.Sprintf("; ranges asked %q, not %q", d.Ranges(), wantRanges)
	}
	return s
}

// fetch sends GETs to url, each read from the start into a hash, until
// one reads the body whole or tries of them have failed; it returns the
// hash of the last.
func fetch(ctx context.Context, hc *http.Client, url string, tries int) ([]byte, error) {
	var err error
	for range tries {
		var sum []byte
		if sum, err = get(ctx, hc, url); err == nil {
			return sum, nil
		}
	}
	return nil, err
}

func get(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// A heapWatch samples the bytes of the heap's objects (live or not yet
// swept) every 2 ms, and keeps the peak.
type heapWatch struct {
	base int64
	done chan struct{}
	peak chan int64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func readHeap() int64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func startHeap() *heapWatch {
	w := &heapWatch{base: readHeap(), done: make(chan struct{}), peak: make(chan int64)}
	go func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		peak := w.base
		for {
			peak = max(peak, readHeap())
			select {
			case <-t.C:
			case <-w.done:
				w.peak <- max(peak, readHeap())
				return
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the peak above the baseline.
func (w *heapWatch) stop() int64 {
	close(w.done)
	return <-w.peak - w.base
}
