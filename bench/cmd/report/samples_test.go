package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// writeSamples writes lines of cmd/measure's format to a file and parses
// them.
func writeSamples(t *testing.T, lines string) samples {
	t.Helper()
	path := filepath.Join(t.TempDir(), "samples.txt")
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := parseSamples(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sample is a sample line of path (without its kind of answer) on answers
// of kind resp.
func sample(path, resp, lib string, cpuNs, bytes, allocs float64) string {
	return fmt.Sprintf("Benchmark%s/lib=%s\t1000\t%g cpu-ns/op\t%g ns/op\t%g B/op\t%g allocs/op\n", variant(path, resp), lib, cpuNs, cpuNs, bytes, allocs)
}

// optInSample is a sample line of the opt-ins path on each kind of answer,
// the same figures on both.
func optInSample(lib string, cpuNs, bytes, allocs float64) string {
	return sample(optInsPath, realistic, lib, cpuNs, bytes, allocs) + sample(optInsPath, empty, lib, cpuNs, bytes, allocs)
}

// targetRow returns the row of the targets table that starts with target,
// and its status.
func targetRow(t *testing.T, table, target string) (row, status string) {
	t.Helper()
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "| "+target+" |") {
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			return line, cells[len(cells)-1]
		}
	}
	t.Fatalf("no row %q in\n%s", target, table)
	return "", ""
}

const (
	throttleTarget = "throttling on: no allocation over throttling off for a request not throttled"
	hedgeTarget    = "hedging on: no allocation over hedging off for a request not hedged"
	peerTarget     = "hedging on, not hedged: at most 0.4× failsafe-go's hedge policy in CPU time, fewer allocations"
)

// The opt-ins targets: throttling is met when it allocates as often as
// retryhttp without it; hedging only when it does too, else the row gives
// both counts and bytes and says why; against failsafe-go's hedge policy,
// met when CPU time (paired by round) is at most 0.4 times its, and
// allocations are fewer.
func TestOptInTargets(t *testing.T) {
	var lines string
	for range 3 {
		lines += optInSample("bare", 20, 0, 0) +
			optInSample("retryhttp", 60, 0, 0) +
			optInSample("retryhttp-hedge", 1200, 608, 5.0004) +
			optInSample("retryhttp-throttle", 300, 0, 0.0001) +
			optInSample("failsafe-go-hedge", 3000, 1728, 30) +
			optInSample("failsafe-go-throttle", 1100, 688, 19)
	}
	r := report{cpu: writeSamples(t, lines)}
	r.optInTargets()
	table := r.buf.String()

	if _, status := targetRow(t, table, throttleTarget); status != "**met**" {
		t.Errorf("throttling's status %q, want met:\n%s", status, table)
	}
	row, status := targetRow(t, table, hedgeTarget)
	if status != "**not met**" {
		t.Errorf("hedging's status %q, want not met", status)
	}
	for _, want := range []string{"retryhttp-hedge 5 allocs, 608 B", "retryhttp 0 allocs, 0 B", "race"} {
		if !strings.Contains(row, want) {
			t.Errorf("hedging's row lacks %q: %s", want, row)
		}
	}
	row, status = targetRow(t, table, peerTarget)
	if status != "**met**" {
		t.Errorf("the row against failsafe-go's hedge policy: status %q, want met", status)
	}
	for _, want := range []string{"0.40×", "retryhttp-hedge 5 allocs", "failsafe-go-hedge 30 allocs, 1728 B"} {
		if !strings.Contains(row, want) {
			t.Errorf("the row against failsafe-go's hedge policy lacks %q: %s", want, row)
		}
	}

	// The section has a row per library, retryhttp's first.
	r.buf.Reset()
	r.optInSection()
	var libs []string
	for _, line := range strings.Split(r.buf.String(), "\n") {
		cells := strings.Split(line, " | ")
		if strings.HasPrefix(line, "| ") && len(cells) == 13 && cells[0] != "| library" {
			libs = append(libs, strings.TrimPrefix(cells[0], "| "))
		}
	}
	if !slices.Equal(libs, optInLibs) {
		t.Errorf("the section's rows %v, want %v:\n%s", libs, optInLibs, r.buf.String())
	}

	// Hedging that allocated nothing more would meet its target, with no
	// reason given; more CPU time than the peer's fails the last row.
	lines = optInSample("retryhttp", 60, 0, 0) +
		optInSample("retryhttp-hedge", 4000, 0, 0) +
		optInSample("failsafe-go-hedge", 3000, 1728, 30)
	r = report{cpu: writeSamples(t, lines)}
	r.optInTargets()
	table = r.buf.String()
	if row, status := targetRow(t, table, hedgeTarget); status != "**met**" || strings.Contains(row, "race") {
		t.Errorf("hedging with no allocation over retryhttp's: %s", row)
	}
	if row, status := targetRow(t, table, peerTarget); status != "**not met**" {
		t.Errorf("hedging slower than failsafe-go's: %s", row)
	}
}

// Samples from before the opt-ins path was measured still make a report:
// its targets say so, with no figures, and it has no section.
func TestOptInsNotMeasured(t *testing.T) {
	r := report{cpu: writeSamples(t, sample("GET", realistic, "retryhttp", 90, 0, 0))}
	r.optInTargets()
	table := r.buf.String()
	for _, target := range []string{throttleTarget, hedgeTarget, peerTarget} {
		row, status := targetRow(t, table, target)
		if status != "–" || !strings.Contains(row, "not measured") {
			t.Errorf("row %s, want it not measured", row)
		}
	}
	if strings.Contains(table, "NaN") {
		t.Errorf("figures of nothing:\n%s", table)
	}
	r.buf.Reset()
	r.optInSection()
	if r.buf.Len() != 0 {
		t.Errorf("a section for a path not measured:\n%s", r.buf.String())
	}
}

// A target is evaluated on each kind of answer: its row gives the figures
// of both, and says met or not met when both agree, else which is which;
// one measured on one kind only says the other was not measured.
func TestTargetsOnBothAnswers(t *testing.T) {
	var lines string
	for range 3 {
		for _, resp := range responses {
			allocs := map[string]float64{realistic: 8, empty: 2}[resp]
			lines += sample("Retry", resp, "retryhttp", 800, 344, allocs) +
				sample("Retry", resp, "rehttp", 1000, 520, 7) +
				sample("Retry", resp, "bare", 60, 0, 0)
		}
	}
	r := report{cpu: writeSamples(t, lines)}
	r.perfTargets()
	table := r.buf.String()
	row, status := targetRow(t, table, "retry path: at most rehttp's allocations")
	if status != "realistic: **not met**; empty: **met**" {
		t.Errorf("status %q, want each kind's", status)
	}
	if !strings.Contains(row, "realistic: retryhttp 8, rehttp 7<br>empty: retryhttp 2, rehttp 7") {
		t.Errorf("figures of both kinds missing: %s", row)
	}
	if _, status := targetRow(t, table, "retry path: at most rehttp's bytes"); status != "**met**" {
		t.Errorf("status %q, want met on both", status)
	}
	if row, status := targetRow(t, table, "GET success path: no allocation"); status != "–" || !strings.Contains(row, "not measured") {
		t.Errorf("a path not measured: %s", row)
	}
	if strings.Contains(table, "NaN") {
		t.Errorf("figures of nothing:\n%s", table)
	}

	r = report{cpu: writeSamples(t, sample("GET", empty, "retryhttp", 40, 0, 0)+sample("GET", empty, "bare", 14, 0, 0))}
	r.perfTargets()
	if _, status := targetRow(t, r.buf.String(), "GET success path: no allocation"); status != "realistic: –; empty: **met**" {
		t.Errorf("a target measured on empty answers only: status %q", status)
	}
}

// A path's table has a row per library, with the realistic answers'
// figures first and the empty answers' in the columns headed empty.
func TestPathTableShowsBothAnswers(t *testing.T) {
	lines := sample("GET", realistic, "retryhttp", 90, 48, 1) + sample("GET", empty, "retryhttp", 40, 0, 0) +
		sample("GET", realistic, "bare", 30, 0, 0) + sample("GET", empty, "bare", 14, 0, 0)
	r := report{cpu: writeSamples(t, lines)}
	r.pathTable("GET", perfLibs)
	got := strings.Split(strings.TrimSpace(r.buf.String()), "\n")
	if len(got) != 4 {
		t.Fatalf("%d lines, want a header, its rule and 2 rows:\n%s", len(got), r.buf.String())
	}
	for _, want := range []string{"| library | CPU time/op |", "| empty: CPU time/op | empty: CPU ÷ bare | empty: B/op | empty: allocs/op |"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("header %s lacks %q", got[0], want)
		}
	}
	if want := "| retryhttp | 90 ns |"; !strings.HasPrefix(got[2], want) || !strings.HasSuffix(got[2], "| 48 B | 1 | 40 ns | 2.86× | 0 B | 0 |") {
		t.Errorf("retryhttp's row %s", got[2])
	}
}

const (
	postAllocsTarget = "1 KiB POST, not retried: at most 2 allocations over bare"
	postCPUTarget    = "1 KiB POST, not retried: CPU time at most go-retryablehttp's client's and rehttp's"
)

// The POST targets: met with at most 2 allocations over bare, and with CPU
// time (paired by round) at most both go-retryablehttp's client's and
// rehttp's; each row gives the figures of both kinds of answer. The path
// has its table, a row per library measured.
func TestPOSTTargets(t *testing.T) {
	post := func(cpu map[string]float64, allocs map[string]float64) string {
		var lines string
		for range 3 {
			for _, resp := range responses {
				for _, lib := range perfLibs {
					lines += sample("POST1KiB", resp, lib, cpu[lib], 100*allocs[lib], allocs[lib])
				}
			}
		}
		return lines
	}
	cpu := map[string]float64{"bare": 500, "retryhttp": 650, "retryablehttp": 1400, "retryablehttp-client": 850, "failsafe-go": 1850, "rehttp": 900}
	allocs := map[string]float64{"bare": 6, "retryhttp": 8, "retryablehttp": 18, "retryablehttp-client": 13, "failsafe-go": 32, "rehttp": 11}
	r := report{cpu: writeSamples(t, post(cpu, allocs))}
	r.perfTargets()
	table := r.buf.String()
	row, status := targetRow(t, table, postAllocsTarget)
	if status != "**met**" || !strings.Contains(row, "realistic: retryhttp 8 allocs/op, bare 6<br>empty: retryhttp 8 allocs/op, bare 6") {
		t.Errorf("2 allocations over bare: %s", row)
	}
	row, status = targetRow(t, table, postCPUTarget)
	if status != "**met**" || !strings.Contains(row, "retryhttp 650 ns, retryablehttp-client 850 ns: 0.76×; rehttp 900 ns: 0.72×") {
		t.Errorf("below both peers: %s", row)
	}

	// A third allocation over bare, or more CPU time than either peer,
	// is not met.
	allocs["retryhttp"], cpu["retryhttp"] = 9, 880
	r = report{cpu: writeSamples(t, post(cpu, allocs))}
	r.perfTargets()
	table = r.buf.String()
	if row, status := targetRow(t, table, postAllocsTarget); status != "**not met**" {
		t.Errorf("3 allocations over bare: %s", row)
	}
	if row, status := targetRow(t, table, postCPUTarget); status != "**not met**" {
		t.Errorf("above go-retryablehttp's client: %s", row)
	}

	r.buf.Reset()
	r.pathTable("POST1KiB", perfLibs)
	var libs []string
	for _, line := range strings.Split(r.buf.String(), "\n") {
		if cells := strings.Split(line, " | "); strings.HasPrefix(line, "| ") && cells[0] != "| library" {
			libs = append(libs, strings.TrimPrefix(cells[0], "| "))
		}
	}
	if !slices.Equal(libs, perfLibs) {
		t.Errorf("the table's rows %v, want %v:\n%s", libs, perfLibs, r.buf.String())
	}

	// Not measured: both rows say so.
	r = report{cpu: writeSamples(t, sample("GET", realistic, "retryhttp", 90, 0, 0))}
	r.perfTargets()
	for _, target := range []string{postAllocsTarget, postCPUTarget} {
		if row, status := targetRow(t, r.buf.String(), target); status != "–" || !strings.Contains(row, "not measured") {
			t.Errorf("a path not measured: %s", row)
		}
	}
}
