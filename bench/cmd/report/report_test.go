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
// number of values is the mean of the middle two, and the quartiles of 1..5
// are 2 and 4.
func TestSummarize(t *testing.T) {
	cases := []struct {
		in   []float64
		want spread
	}{
		{[]float64{7}, spread{n: 1, q1: 7, median: 7, q3: 7}},
		{[]float64{5, 1, 4, 2, 3}, spread{n: 5, q1: 2, median: 3, q3: 4}},
		{[]float64{40, 10, 30, 20}, spread{n: 4, q1: 17.5, median: 25, q3: 32.5}},
	}
	for _, c := range cases {
		if got := summarize(c.in); got != c.want {
			t.Errorf("summarize(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	if s := summarize(nil); s.n != 0 || s.median == s.median {
		t.Errorf("summarize(nil) = %+v, want no value and a NaN median", s)
	}
}

// writeFile writes text to a file of its own and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The values of a benchmark and library are kept in the order of their
// lines, which is the order of the rounds, so that ratios pair the values of
// one round; each stays in its unit as written, and a line that is not a
// benchmark's is skipped.
func TestReadResultsPairsRounds(t *testing.T) {
	res, err := readResults(writeFile(t, "samples.txt", "goos: linux\n"+
		"BenchmarkGET/lib=bare\t100\t20 cpu-ns/op\t25 ns/op\n"+
		"BenchmarkGET/lib=retryhttp\t100\t100 cpu-ns/op\t110 ns/op\n"+
		"BenchmarkGET/lib=retryhttp\t100\t90 cpu-ns/op\t100 ns/op\n"+
		"BenchmarkGET/lib=bare\t100\t30 cpu-ns/op\t40 ns/op\nPASS\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res["GET"]["retryhttp"][cpuUnit]; !slices.Equal(got, []float64{100, 90}) {
		t.Errorf("retryhttp's values %v, want [100 90]", got)
	}
	if got := res.ratios("GET", "retryhttp", "bare", cpuUnit); !slices.Equal(got, []float64{5, 3}) {
		t.Errorf("per-round ratios %v, want [5 3]", got)
	}
	if got := res.median("GET", "bare", wallUnit); got != 32.5 {
		t.Errorf("bare's median %v ns/op, want 32.5", got)
	}
}

// samplesOf returns cmd/measure's lines for a run of rounds rounds in which
// every library of every path takes cpu(path, lib) per operation, with the
// allocations and bytes given.
func samplesOf(rounds int, cpu func(path, lib string) float64, allocs, bytes func(path, lib string) float64) string {
	paths := []string{"GET", "PUT1MiB", "POST1KiB", "Retry"}
	for _, proto := range []string{"h1", "h2"} {
		for _, n := range loopbackCallers {
			paths = append(paths, loopbackPath(proto, n))
		}
	}
	var b strings.Builder
	for round := range rounds {
		for _, p := range paths {
			for _, lib := range perfLibs {
				c := cpu(p, lib) * (1 + 0.01*float64(round%3))
				fmt.Fprintf(&b, "Benchmark%s/lib=%s 1000 %g cpu-ns/op %g ns/op %g B/op %g allocs/op\n", p, lib, c, c, bytes(p, lib), allocs(p, lib))
			}
		}
	}
	return b.String()
}

// A target is met or not by its figures, and says "not measured" when the
// run lacks them: retryhttp slower than rehttp on the retry path, an
// allocation on the GET, a copy of the PUT's body, or 4 % more CPU than
// bare over HTTP/2 loopback are each "not met".
func TestTargets(t *testing.T) {
	cpu := func(path, lib string) float64 {
		switch {
		case lib == "retryhttp" && path == "Retry":
			return 1100
		case lib == "retryhttp" && strings.Contains(path, "h2"):
			return 1040
		case lib == "rehttp" || lib == "bare":
			return 1000
		}
		return 900
	}
	fixed := func(v float64) func(string, string) float64 { return func(string, string) float64 { return v } }
	r := report{scen: results{}}
	var err error
	if r.paths, err = readResults(writeFile(t, "s.txt", samplesOf(5, cpu, fixed(0), fixed(624)))); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"GET success path: CPU time at most rehttp's":                  "**met**",
		"retry path (503, 503, 200): CPU time at most rehttp's":        "**not met**",
		"GET success path: no allocation":                              "**met**",
		"PUT of 1 MiB: no copy of the body":                            "**met**",
		"HTTP/1.1 loopback: CPU time per request within 3 % of bare's": "**met**",
		"HTTP/2 loopback: CPU time per request within 3 % of bare's":   "**not met**",
		"storm: at most 1.30 attempts per call":                        "–",
	}
	checkStatuses(t, r.targets(), want)

	r.paths, _ = readResults(writeFile(t, "s.txt", samplesOf(2, cpu, func(p, lib string) float64 {
		return map[bool]float64{true: 1}[p == "GET" && lib == "retryhttp"]
	}, func(p, lib string) float64 {
		return map[bool]float64{true: 1 << 20}[p == "PUT1MiB" && lib == "retryhttp"]
	})))
	checkStatuses(t, r.targets(), map[string]string{
		"GET success path: no allocation":   "**not met**",
		"PUT of 1 MiB: no copy of the body": "**not met**",
	})
}

// checkStatuses checks the status of each target of table that starts
// with a key of want.
func checkStatuses(t *testing.T, table string, want map[string]string) {
	t.Helper()
	for target, status := range want {
		found := false
		for _, row := range strings.Split(table, "\n") {
			if strings.HasPrefix(row, "| "+target) {
				found = true
				if !strings.HasSuffix(row, "| "+status+" |") {
					t.Errorf("%s, want %s", row, status)
				}
			}
		}
		if !found {
			t.Errorf("no target %q in\n%s", target, table)
		}
	}
}

// The whole report renders from every input: each section of the template
// has its table, the scenarios' figures with benchstat's interval (but the
// attempt limit, a setting), and no part says it is missing. From no input it still
// renders, and each part says which input it lacks.
func TestRender(t *testing.T) {
	one := func(string, string) float64 { return 1 }
	r := report{waiting: waitingFixture, everyday: chaosReadme, anchorsOut: anchorsFixture, fleetTxt: "simulated real\n", Count: "2"}
	var err error
	if r.paths, err = readResults(writeFile(t, "s.txt", samplesOf(3, func(string, string) float64 { return 100 }, one, one))); err != nil {
		t.Fatal(err)
	}
	var scen strings.Builder
	for _, bench := range []string{"Storm", "Fleet", "Blip", "Overload"} {
		for _, lib := range scenarioLibs {
			for run := range 6 { // 1 to 6: a median of 3.5, its interval 1 to 6
				fmt.Fprintf(&scen, "Benchmark%s/lib=%s 1", bench, lib)
				for _, c := range scenarioCols[bench] {
					fmt.Fprintf(&scen, " %d %s", 1+run, c.unit)
				}
				scen.WriteString("\n")
			}
		}
	}
	if r.scen, err = readResults(writeFile(t, "scen.txt", scen.String())); err != nil {
		t.Fatal(err)
	}
	text, err := r.render()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "| GET success path: CPU time at most rehttp's |", "### HTTP/2\n",
		"| 64 | rehttp |", "| failsafe-go-breaker | 3.5 | 3.50 ± 71% |", "| waiting request: directly |", "| retryhttp | 3,019 |",
		"**1. Resets**", "\nresets 20%, 100/s, 30 s     99.9% 1.24", "simulated real"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("no %q in the report", want)
		}
	}
	if strings.Contains(string(text), "Not in this report") || strings.Contains(string(text), "not measured") {
		t.Errorf("a part missing from a report with every input:\n%s", text)
	}

	empty := report{paths: results{}, scen: results{}}
	text, err = empty.render()
	if err != nil {
		t.Fatal(err)
	}
	// 4 in-memory paths, 2 loopback tables, 4 scenarios, the waiting
	// results, the real faults, the anchors and the fleet.
	if n := strings.Count(string(text), "Not in this report"); n != 14 {
		t.Errorf("%d parts say they are missing, want 14:\n%s", n, text)
	}
}

// Long commands are broken at spaces outside quotes, each line within the
// width, a trailing comment moved before its command; short ones stay.
func TestWrapCommands(t *testing.T) {
	in := "cd bench\n" +
		"results/bench.test -test.run '^(TestStorm|TestFleet)$' -test.count 6 -scenarios.out 'a b.txt' >log   # the scenarios"
	want := "cd bench\n" +
		"# the scenarios\n" +
		"results/bench.test -test.run '^(TestStorm|TestFleet)$' \\\n" +
		"    -test.count 6 -scenarios.out 'a b.txt' >log"
	if got := wrapCommands(in, 60); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
