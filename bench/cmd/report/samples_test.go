package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Quantiles interpolate between the closest ranks: the median of an even
// number of samples is the mean of the middle two, and the quartiles of
// 1..5 are 2 and 4.
func TestSummarize(t *testing.T) {
	cases := []struct {
		in   []float64
		want summary
	}{
		{nil, summary{}},
		{[]float64{7}, summary{n: 1, min: 7, q1: 7, median: 7, q3: 7, max: 7}},
		{[]float64{5, 1, 4, 2, 3}, summary{n: 5, min: 1, q1: 2, median: 3, q3: 4, max: 5}},
		{[]float64{40, 10, 30, 20}, summary{n: 4, min: 10, q1: 17.5, median: 25, q3: 32.5, max: 40}},
	}
	for _, c := range cases {
		if got := summarize(c.in); got != c.want {
			t.Errorf("summarize(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// The samples of a benchmark and library are kept in the order of their
// lines, which is the order of the rounds, so that ratios pair the samples
// of one round; lines of other kinds are skipped, the GOMAXPROCS suffix is
// dropped, and a value without its unit is an error.
func TestParseSamplesPairsRounds(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "samples.txt")
	lines := "goos: linux\n" +
		"BenchmarkGET/lib=bare\t100\t20 cpu-ns/op\t25 ns/op\n" +
		"BenchmarkGET/lib=retryhttp-2\t100\t100 cpu-ns/op\t110 ns/op\n" +
		"BenchmarkGET/lib=retryhttp\t100\t90 cpu-ns/op\t100 ns/op\n" +
		"BenchmarkGET/lib=bare\t100\t30 cpu-ns/op\t40 ns/op\n" +
		"PASS\n"
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := parseSamples(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.values("GET", "retryhttp", "cpu-ns/op", false); !slices.Equal(got, []float64{100, 90}) {
		t.Errorf("retryhttp's samples %v, want [100 90]", got)
	}
	if got := s.ratios("GET", "retryhttp", "bare", "cpu-ns/op", false); !slices.Equal(got, []float64{5, 3}) {
		t.Errorf("per-round ratios %v, want [5 3]", got)
	}
	if got := s.values("GET", "bare", "ns/op", true); !slices.Equal(got, []float64{4e7, 2.5e7}) {
		t.Errorf("bare's operations per second %v, want [4e7 2.5e7]", got)
	}

	if err := os.WriteFile(path, []byte("BenchmarkGET/lib=bare\t100\t20 cpu-ns/op\t25\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := parseSamples(path); err == nil {
		t.Error("a value without its unit parsed without an error")
	}
}
