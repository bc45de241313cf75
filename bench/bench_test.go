package bench

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The benchmarks run the cases of Cases, one library after the other, for
// go test -bench (and its -cpuprofile, to see where a library's time
// goes). Besides ns/op they report cpu-ns/op, the process's CPU time per
// operation; the loopback paths also report req/s. BENCHMARKS.md comes
// from Interleave instead (cmd/measure), which runs the libraries in
// rounds.

// BenchmarkGET is the success path of a GET (PathGET).
func BenchmarkGET(b *testing.B) { benchmark(b, PathGET) }

// BenchmarkPUT1MiB is the success path of a PUT of 1 MiB (PathPUT).
func BenchmarkPUT1MiB(b *testing.B) { benchmark(b, PathPUT) }

// BenchmarkPOST1KiB is a POST of 1 KiB that is not retried (PathPOST).
func BenchmarkPOST1KiB(b *testing.B) { benchmark(b, PathPOST) }

// BenchmarkRetry is the retry path: 503, 503, then 200 (PathRetry).
func BenchmarkRetry(b *testing.B) { benchmark(b, PathRetry) }

// BenchmarkLoopback sends GETs over loopback, HTTP/1.1 and HTTP/2, from 1,
// 16 and 64 callers at once (LoopbackPath).
func BenchmarkLoopback(b *testing.B) {
	for _, proto := range loopbackProtos {
		for _, n := range loopbackCallers {
			b.Run(fmt.Sprintf("proto=%s/callers=%d", proto, n), func(b *testing.B) { benchmark(b, LoopbackPath(proto, n)) })
		}
	}
}

// benchmark runs each library's case of path as a sub-benchmark:
// BenchmarkGET/lib=bare.
func benchmark(b *testing.B, path string) {
	cases, done, err := Cases(path)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	for _, c := range cases {
		// One run for every call of the function b.Run calls (b.N 1
		// first, then more): its check counts the operations of all of
		// them, as the loopback server counts the requests of all.
		r := c.begin()
		b.Run("lib="+c.Lib, func(b *testing.B) { benchmarkCase(b, r) })
	}
}

func benchmarkCase(b *testing.B, r *run) {
	if r.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(r.Procs))
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, err := cpuTime()
	if err != nil {
		b.Fatal(err)
	}
	if err := r.do(b.N); err != nil {
		b.Fatal(err)
	}
	cpu1, err := cpuTime()
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	if strings.HasPrefix(r.Path, "Loopback/") {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	}
	if err := r.check(r.ops); err != nil {
		b.Fatal(err)
	}
}
