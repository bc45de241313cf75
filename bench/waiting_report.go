package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A WaitStat is one figure of the waiting scenario over its runs: the
// median, the least and the most.
type WaitStat struct{ Median, Min, Max float64 }

func waitStat(v []float64) WaitStat {
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return WaitStat{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// A WaitSummary is a library's runs of the waiting scenario.
type WaitSummary struct {
	Lib            string
	Runs, Requests int

	Heap, Stack WaitStat // bytes per waiting request
	AttemptsPer WaitStat // attempts per request, in all
	Served      WaitStat
	AllServed   WaitStat // seconds from the recovery until all the calls served were
	Unclosed    int64    // bodies left open, over all runs
}

// SummarizeWaiting sums results up by library, in the order of libs (the
// libraries without results left out).
func SummarizeWaiting(results []WaitResult, libs []string) []WaitSummary {
	var out []WaitSummary
	for _, l := range libs {
		s := WaitSummary{Lib: l}
		var heap, stack, att, served, all []float64
		for _, r := range results {
			if r.Lib != l {
				continue
			}
			s.Runs++
			s.Requests = r.Requests
			heap = append(heap, r.HeapPerRequest())
			stack = append(stack, r.StackPerRequest())
			att = append(att, float64(r.AttemptsTotal)/float64(r.Requests))
			served = append(served, float64(r.Served))
			all = append(all, r.AllServed.Seconds())
			s.Unclosed += r.UnclosedBodies
		}
		if s.Runs == 0 {
			continue
		}
		s.Heap, s.Stack, s.AttemptsPer = waitStat(heap), waitStat(stack), waitStat(att)
		s.Served, s.AllServed = waitStat(served), waitStat(all)
		out = append(out, s)
	}
	return out
}

// waitTargets are the pairs WaitTarget compares, and how the report names
// them: retryhttp against go-retryablehttp, each called directly, and each
// in an http.Client.
var waitTargets = []struct{ lib, peer, what string }{
	{"retryhttp", "retryablehttp-client", "waiting request: heap + stack at most go-retryablehttp's, each called directly (`Transport.RoundTrip`, `Client.Do`)"},
	{"retryhttp-httpclient", "retryablehttp-httpclient", "waiting request: the same, each in an `http.Client` (`retryhttp.NewClient`, `StandardClient()`)"},
}

// WaitTarget says whether the memory per waiting request of lib, heap and
// stack together (medians), is at most peer's, with the figures; ok is
// false when either did not run. Heap and stack count together because a
// waiting request holds both, and the runtime gives a goroutine a stack of
// 4 or 8 KiB by the depth of its calls, not to the byte.
func WaitTarget(sums []WaitSummary, lib, peer string) (figures string, met, ok bool) {
	var r, g *WaitSummary
	for i := range sums {
		switch sums[i].Lib {
		case lib:
			r = &sums[i]
		case peer:
			g = &sums[i]
		}
	}
	if r == nil || g == nil {
		return "", false, false
	}
	mine, theirs := r.Heap.Median+r.Stack.Median, g.Heap.Median+g.Stack.Median
	figures = fmt.Sprintf("%s %s B heap + %s B stack, %s %s B + %s B: %.2f×",
		lib, thousands(r.Heap.Median), thousands(r.Stack.Median),
		peer, thousands(g.Heap.Median), thousands(g.Stack.Median), mine/theirs)
	return figures, mine <= theirs, true
}

// A WaitMeta is what WAITING.md says of the run it reports.
type WaitMeta struct {
	Waiting       Waiting
	Runs          int
	Libs          []string // in the order the report lists them
	Date, Machine string   // when, and on what (Go, CPUs)
}

// WriteWaitingReport writes WAITING.md: the targets, a row per library,
// and how each was configured.
func WriteWaitingReport(w io.Writer, meta WaitMeta, results []WaitResult) error {
	sums := SummarizeWaiting(results, meta.Libs)
	wt := meta.Waiting
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# A waiting request's memory\n\n<!-- Written by bench/cmd/waiting; edit it, not this file. -->\n\n")
	p("%s GETs start at once through one client while an in-memory dependency answers 503 for %s, then\n", thousands(float64(wt.Requests)), secs(wt.Outage))
	p("200; %s into the outage the live heap and the goroutine stacks are read (`runtime/metrics`, after\n", secs(wt.At))
	p("a collection) and set against the same before the requests started. Each library runs in a\n")
	p("process of its own, the order rotated from run to run; medians of %d runs, least and most in\n", meta.Runs)
	p("brackets.\n\n")
	var first, last time.Duration
	for i, r := range results {
		if i == 0 || r.MeasuredAt < first {
			first = r.MeasuredAt
		}
		last = max(last, r.MeasuredAt)
	}
	p("Measured: %s, %s.\n", meta.Date, meta.Machine)
	p("The readings ended %.2f to %.2f s after the start; one that saw a request served (the process\n", first.Seconds(), last.Seconds())
	p("held up past the outage) is run again.\n\n## Target\n\n| target | figures | status |\n|---|---|---|\n")
	for _, tg := range waitTargets {
		if fig, met, ok := WaitTarget(sums, tg.lib, tg.peer); ok {
			p("| %s | %s | %s |\n", tg.what, fig, verdict(met))
		}
	}
	p("\n## Results\n\n")
	writeWaitingTable(&b, sums)
	for _, name := range meta.Libs {
		n := 0
		for _, s := range sums {
			if s.Lib == name {
				n = s.Runs
			}
		}
		switch {
		case n == 0:
			p("\n%s: no row; the readings of its %d runs came too late on every try (a busy machine).\n", name, meta.Runs)
		case n < meta.Runs:
			p("\n%s: %d of %d runs; the others' readings came too late on every try (a busy\nmachine).\n", name, n, meta.Runs)
		}
	}
	for _, s := range sums {
		if s.Unclosed > 0 {
			p("\n%s left %s bodies of the 503s it retried unclosed over its %d runs.\n", s.Lib, thousands(float64(s.Unclosed)), s.Runs)
		}
	}
	p("\n*handloop* is the floor: what every caller holds whatever the library. *all served* is the time\n")
	p("from the recovery until the last request served got its answer.\n\n## Configuration\n\n| library | configuration |\n|---|---|\n")
	for _, name := range meta.Libs {
		if l, ok := WaitLibByName(name); ok {
			p("| %s | %s |\n", l.Name, l.Config)
		}
	}
	size := ""
	if wt != DefaultWaiting {
		size = fmt.Sprintf(" -requests %d -outage %v -at %v -deadline %v", wt.Requests, wt.Outage, wt.At, wt.Deadline)
	}
	p("\n## Reproduce\n\n```\ncd bench && go run ./cmd/waiting -runs %d%s -md WAITING.md\n```\n", meta.Runs, size)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeWaitingTable writes a row per library: heap and stack per waiting
// request, their sum against go-retryablehttp's client's, the calls served
// and when, and the attempts per request.
func writeWaitingTable(b *strings.Builder, sums []WaitSummary) {
	var ref *WaitSummary
	for i := range sums {
		if sums[i].Lib == "retryablehttp-client" {
			ref = &sums[i]
		}
	}
	b.WriteString("| library | heap B/request | stack B/request | heap + stack ÷ retryablehttp-client | served | all served after the recovery | attempts/request |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sums {
		ratio := "–"
		if ref != nil {
			ratio = fmt.Sprintf("%.2f×", (s.Heap.Median+s.Stack.Median)/(ref.Heap.Median+ref.Stack.Median))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s of %s | %s | %s |\n", s.Lib,
			fmtStat(s.Heap, thousands), fmtStat(s.Stack, thousands), ratio,
			fmtStat(s.Served, thousands), thousands(float64(s.Requests)),
			fmtStat(s.AllServed, func(v float64) string { return fmt.Sprintf("%.2f s", v) }),
			fmtStat(s.AttemptsPer, func(v float64) string { return fmt.Sprintf("%.2f", v) }))
	}
}

// fmtStat formats s as "median (least–most)", or the median alone when
// every run gave the same.
func fmtStat(s WaitStat, f func(float64) string) string {
	if f(s.Min) == f(s.Max) {
		return f(s.Median)
	}
	return f(s.Median) + " (" + f(s.Min) + "–" + f(s.Max) + ")"
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// secs formats d in seconds: "1.5 s".
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s" }

// thousands formats v, rounded, with commas: 10,000.
func thousands(v float64) string {
	n := int(math.Round(v))
	if n < 0 {
		return "-" + thousands(float64(-n))
	}
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
