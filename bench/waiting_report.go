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
	if len(v) == 0 {
		return WaitStat{}
	}
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
	Lib      string
	Runs     int
	Requests int

	Heap, Stack   WaitStat // bytes per waiting request, after one collection
	Stack2        WaitStat // stack bytes per waiting request, after a second one
	Goroutines    WaitStat // goroutines per waiting request
	Waiting       WaitStat // calls waiting at the measurement
	AttemptsPer   WaitStat // attempts per request, in all
	OutagePer     WaitStat // attempts per request answered 503
	Served        WaitStat
	AllServed     WaitStat // seconds from the recovery until all the calls served were
	HalfServed    WaitStat // seconds from the recovery until half the calls were served
	Unclosed      int64    // bodies left open, over all runs
	UnservedAtAll bool     // some run served none
}

// SummarizeWaiting sums results up by library, in the order of libs (the
// libraries without results left out).
func SummarizeWaiting(results []WaitResult, libs []string) []WaitSummary {
	var out []WaitSummary
	for _, l := range libs {
		var (
			s                                              WaitSummary
			heap, stack, stack2, gor, waiting, att, outage []float64
			served, all, half                              []float64
		)
		s.Lib = l
		for _, r := range results {
			if r.Lib != l {
				continue
			}
			n := float64(r.Requests)
			s.Runs++
			s.Requests = r.Requests
			heap = append(heap, float64(r.Heap)/n)
			stack = append(stack, float64(r.Stack)/n)
			stack2 = append(stack2, float64(r.Stack2)/n)
			gor = append(gor, float64(r.Goroutines)/n)
			waiting = append(waiting, float64(r.Waiting))
			att = append(att, float64(r.AttemptsTotal)/n)
			outage = append(outage, float64(r.AttemptsOutage)/n)
			served = append(served, float64(r.Served))
			all = append(all, r.AllServed.Seconds())
			half = append(half, r.HalfServed.Seconds())
			s.Unclosed += r.UnclosedBodies
			s.UnservedAtAll = s.UnservedAtAll || r.Served == 0
		}
		if s.Runs == 0 {
			continue
		}
		s.Heap, s.Stack, s.Stack2, s.Goroutines = waitStat(heap), waitStat(stack), waitStat(stack2), waitStat(gor)
		s.Waiting, s.AttemptsPer, s.OutagePer = waitStat(waiting), waitStat(att), waitStat(outage)
		s.Served, s.AllServed, s.HalfServed = waitStat(served), waitStat(all), waitStat(half)
		out = append(out, s)
	}
	return out
}

// fmtStat formats a WaitStat as "median (least–most)" with format f.
func fmtStat(s WaitStat, f string) string {
	if s.Min == s.Max {
		return fmt.Sprintf(f, s.Median)
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s.Median, s.Min, s.Max)
}

// fmtInt formats a WaitStat of whole numbers as fmtStat does, with
// thousands separated.
func fmtInt(s WaitStat) string {
	r := func(v float64) string { return thousands(int(math.Round(v))) }
	if s.Min == s.Max {
		return r(s.Median)
	}
	return r(s.Median) + " (" + r(s.Min) + "–" + r(s.Max) + ")"
}

// WriteWaitingTable writes the summaries as a Markdown table: per library,
// the heap and stack per waiting request, the time to serve the calls after
// the recovery and how many were served, each a median with the least and
// the most of the runs, and ratios of the medians to go-retryablehttp's
// client ("retryablehttp-client"), when it ran.
func WriteWaitingTable(w io.Writer, sums []WaitSummary) error {
	var ref *WaitSummary
	for i := range sums {
		if sums[i].Lib == "retryablehttp-client" {
			ref = &sums[i]
		}
	}
	var b strings.Builder
	b.WriteString("| library | heap B/request | stack B/request | heap + stack ÷ retryablehttp-client | goroutines/request | waiting at the measurement | served | all served after the recovery | half served after it | attempts/request |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sums {
		ratio := "–"
		if ref != nil {
			ratio = fmt.Sprintf("%.2f×", (s.Heap.Median+s.Stack.Median)/(ref.Heap.Median+ref.Stack.Median))
		}
		all, half := "–", "–"
		if !s.UnservedAtAll {
			all = fmtStat(s.AllServed, "%.2f s")
			if s.HalfServed.Min > 0 {
				half = fmtStat(s.HalfServed, "%.2f s")
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s of %s | %s | %s | %s |\n", s.Lib,
			fmtInt(s.Heap), fmtInt(s.Stack), ratio, fmtStat(s.Goroutines, "%.2f"),
			fmtInt(s.Waiting), fmtInt(s.Served), thousands(s.Requests), all, half, fmtStat(s.AttemptsPer, "%.2f"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WaitMeta is what a report of the waiting scenario says of its run.
type WaitMeta struct {
	Waiting               Waiting
	Runs                  int
	Libs                  []string // in the order the report lists them
	Date, Go, CPU         string
	Cores                 int
	LoadBefore, LoadAfter string
	Versions              string // the modules measured
	SitesRequests         int    // the requests of the heap profiles
}

// A WaitExplain is where one library's waiting request keeps its memory:
// the frames of its stack, and its heap by allocation site.
type WaitExplain struct {
	Lib    string
	Frames []StackFrame
	Sites  []HeapSite
}

// A WaitRun is a whole run of cmd/waiting, as it writes it in JSON.
type WaitRun struct {
	Meta    WaitMeta
	Results []WaitResult
	Explain []WaitExplain
}

// WaitTarget is the waiting scenario's target, with its figures and
// whether it was met: the memory per waiting request of the retryhttp
// configuration named lib, its heap and its stack together, at most that of
// the go-retryablehttp one named peer, median against median; the figures
// give each part's ratio too. ok is false when either did not run. The
// target is for "retryhttp" against "retryablehttp-client" (each called
// directly), and for "retryhttp-httpclient" against
// "retryablehttp-httpclient" (each in an http.Client).
//
// Heap and stack count together because a waiting request holds both, and
// because the stack alone is not a figure a library sets to the byte: the
// runtime gives a goroutine a stack of 4 or 8 KiB by the depth of its
// calls, and the per-request median moves by a few bytes from run to run
// with the stacks of the process's other goroutines (8,192 to 8,202 B for
// two libraries whose waiting goroutines both hold 8 KiB).
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
	figures = fmt.Sprintf("%s %s B heap + %s B stack, %s %s B + %s B: %.2f× its memory (%.2f× its heap, %.2f× its stack)",
		lib, thousands(int(math.Round(r.Heap.Median))), thousands(int(math.Round(r.Stack.Median))),
		peer, thousands(int(math.Round(g.Heap.Median))), thousands(int(math.Round(g.Stack.Median))),
		mine/theirs, r.Heap.Median/g.Heap.Median, r.Stack.Median/g.Stack.Median)
	return figures, mine <= theirs, true
}

// waitTargets are the pairs WaitTarget compares, and how the report names
// them.
var waitTargets = []struct{ lib, peer, what string }{
	{"retryhttp", "retryablehttp-client", "a waiting request costs at most go-retryablehttp's memory per waiting request, heap and stack together: each called directly (`Transport.RoundTrip`, go-retryablehttp's `Client.Do`)"},
	{"retryhttp-httpclient", "retryablehttp-httpclient", "the same, each in an `http.Client` (`retryhttp.NewClient`, go-retryablehttp's `StandardClient()`), as most callers send"},
}

// The runtime's stack sizes on linux/amd64 (Go 1.26): a new goroutine's
// stack is 2 KiB unless the runtime's starting size is larger; a call that
// would leave less than the guard below the stack pointer doubles the
// stack; a collection halves a stack whose use, plus the no-split reserve,
// is under a quarter of it.
const (
	stackGuard   = 928
	stackNosplit = 800
)

// WriteWaitingReport writes WAITING.md from a run of cmd/waiting.
func WriteWaitingReport(w io.Writer, run WaitRun) error {
	m, sums := run.Meta, SummarizeWaiting(run.Results, run.Meta.Libs)
	wt := m.Waiting
	// How much a second collection changed the figures, and the stacks new
	// goroutines started with.
	var (
		dHeap, dStack float64
		starts        []int64
	)
	for _, r := range run.Results {
		n := float64(r.Requests)
		dHeap = max(dHeap, math.Abs(float64(r.Heap2-r.Heap))/n)
		dStack = max(dStack, math.Abs(float64(r.Stack2-r.Stack))/n)
		if !slices.Contains(starts, r.StartingStack) {
			starts = append(starts, r.StartingStack)
		}
	}
	slices.Sort(starts)
	var sizes []string
	for _, s := range starts {
		sizes = append(sizes, thousands(int(s))+" B")
	}
	starting := "new goroutines started with stacks of " + strings.Join(sizes, " or ")
	if len(starts) > 1 {
		starting += ", depending on the run"
	} else {
		starting += " in every run"
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# A waiting request's memory\n\n")
	p("<!-- Written by bench/cmd/waiting; edit it, not this file. -->\n\n")
	p("What a request costs while it waits to be retried, in retryhttp and its peers: %s GETs start at once\n", thousands(wt.Requests))
	p("through one client while the dependency answers 503 to every attempt for %s, then 200; %s into the\n", secs(wt.Outage), secs(wt.At))
	p("outage, with every request waiting, the heap and the goroutine stacks they hold are measured; then how\n")
	p("long the client takes to serve them all once the dependency is back. The code is `bench/waiting.go`\n")
	p("(the scenario, `bench.Waiting`) and `bench/cmd/waiting` (which runs it and writes this file).\n\n")
	p("| | |\n|---|---|\n")
	p("| date | %s |\n| Go | %s |\n| CPU | %s, %d cores |\n", m.Date, m.Go, m.CPU, m.Cores)
	p("| load average (1, 5, 15 min) | %s at the start of the runs, %s at their end |\n", m.LoadBefore, m.LoadAfter)
	if m.Versions != "" {
		p("| modules | %s |\n", m.Versions)
	}
	p("\n## Target\n\n")
	p("| target | figures (medians of %d runs) | status |\n|---|---|---|\n", m.Runs)
	for _, tg := range waitTargets {
		if fig, met, ok := WaitTarget(sums, tg.lib, tg.peer); ok {
			status := "**met**"
			if !met {
				status = "**not met**"
			}
			p("| %s | %s | %s |\n", tg.what, fig, status)
		}
	}
	p("\n## Results\n\n")
	p("Each figure is the median of %d runs, with the least and the most in brackets. *heap* and *stack*\n", m.Runs)
	p("are per waiting request: what the process held at the measurement over what it held before the\n")
	p("requests started, divided by the %s requests; they include what every caller holds whatever the\n", thousands(wt.Requests))
	p("library (its goroutine, its request and context, the library's wait timer): *handloop*, a retry loop\n")
	p("written by hand, is that floor. *all served after the recovery* is the time from the dependency's\n")
	p("return until the last request served got its response; *attempts/request* counts every attempt,\n")
	p("the first included.\n\n")
	WriteWaitingTable(&b, sums)
	for _, sm := range sums {
		if sm.Unclosed > 0 {
			p("\n%s never closed the bodies of the 503s it retried: %s bodies left open over its %d runs, when every\n", sm.Lib, thousands(int(sm.Unclosed)), sm.Runs)
			p("call had ended (about %.2f per request and run; %.2f attempts per request were answered 503). With a\n", float64(sm.Unclosed)/float64(sm.Runs*sm.Requests), sm.OutagePer.Median)
			p("network transport their connections would not be reused, and each response, with what it references,\n")
			p("stays in memory while its request goes on: hence its heap.\n")
		}
	}
	p("\nThe times follow from each library's schedule. go-retryablehttp's requests (and handloop's) retry\n")
	p("1 s and 3 s after they start, so all at once 1 s after the recovery. retryhttp's retries wait in the\n")
	p("host's line (all %s are in flight, and fail together): while it is down, one goes as a probe after\n", thousands(wt.Requests))
	p("100 to 200 ms without news of the host, then after twice that silence, and so on, so the first probe\n")
	p("after the recovery comes up to about as long after it as the outage had lasted; its success lets the\n")
	p("line go as a ramp that doubles every 100 ms (2, 4, 8... requests). The libraries with full jitter (retryhttp\n")
	p("without its budget, failsafe-go, rehttp) spread each request's next retry over a window that doubles\n")
	p("from retry to retry, up to 10 s: most are served soon after the recovery, the last seconds later, and\n")
	p("a few not before their deadline.\n")
	p("\nThe stacks come in powers of two, so the stack column is, per library, a share of requests on\n")
	p("4 KiB stacks and a share on 8 KiB ones. Why a library's stacks are the size they are is under\n")
	p("*Where the memory goes*.\n")

	p("\n## Method\n\n")
	p("- The dependency is an in-memory `http.RoundTripper` (no network, no server): until %s after the\n", secs(wt.Outage))
	p("  start it answers 503, then 200. Its answers are realistic: about six header fields, a header map of\n")
	p("  each answer's own (a transport parses one per response) and a body of 20 to 200 bytes (a JSON\n")
	p("  problem or a proxy's HTML page for a 503), which the libraries drain or keep, and the caller reads\n")
	p("  to its end and closes for a 200. Every body is checked closed at the end.\n")
	p("- Each request is a GET of a URL of its own with a deadline of %s (`context.WithTimeout`), sent on a\n", secs(wt.Deadline))
	p("  goroutine of its own through one client (`RoundTrip`, go-retryablehttp's `Client.Do`, or\n")
	p("  `http.Client.Do` for the `-httpclient` rows); all start at once.\n")
	p("- The memory is read with `runtime/metrics` after a garbage collection (`runtime.GC`): the bytes of\n")
	p("  live heap objects (`/memory/classes/heap/objects:bytes`) and of goroutine stacks\n")
	p("  (`/memory/classes/heap/stacks:bytes`), once before the requests start and once %s into the\n", secs(wt.At))
	p("  outage. That moment falls in a wait of every library: go-retryablehttp's requests retry at 1 s, then\n")
	p("  wait until 3 s. A second collection right after changed the heap by at most %.0f B per request\n", dHeap)
	p("  and the stacks by at most %.0f B (a collection halves only stacks that use under a quarter of\n", dStack)
	p("  theirs).\n")
	p("- Each library runs in a process of its own, one after the other, the order rotated from run to run:\n")
	p("  the heap and the runtime's sizing of new stacks (it starts goroutines at the average stack size it\n")
	p("  saw at the last collection) start from the same state for each:\n")
	p("  %s. GOMAXPROCS is the machine's.\n", starting)
	p("- Time runs in real time (timers, not a fake clock): the time to serve everyone depends on each\n")
	p("  library's schedule of retries, and a little on the machine (starting %s goroutines and the\n", thousands(wt.Requests))
	p("  measurement's collections take some tens of milliseconds, which delay every timer alike).\n")

	p("\n## How each library was configured\n\n")
	p("Each library keeps retrying through the %s outage. Where its defaults would give up within it, the\n", secs(wt.Outage))
	p("attempt limit was raised and the backoff set to what retryhttp's default is (the configuration says\n")
	p("so).\n\n| library | configuration |\n|---|---|\n")
	for _, name := range m.Libs {
		if l, ok := WaitLibByName(name); ok {
			p("| %s | %s |\n", l.Name, l.Config)
		}
	}

	if len(run.Explain) > 0 {
		writeExplain(&b, run)
	}

	p("\n## Reproduce\n\n```\ncd bench\n")
	p("go run ./cmd/waiting -runs %d -o results/waiting.json -md WAITING.md   # about 3 minutes\n```\n\n", m.Runs)
	p("It runs each library in a process of its own (`-child -lib NAME` runs one, once, and prints its\n")
	p("result), then the processes that dump a waiting request's stack (`-mode dump`, with\n")
	p("`GOTRACEBACK=system`) and profile the heap (`-mode sites`). `-from results/waiting.json` writes\n")
	p("this file again from the JSON, without measuring. `go test -run TestWaiting .` runs the scenario\n")
	p("small (200 requests, a 500 ms outage) through every library and checks what it measures.\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeExplain writes the section on where the libraries' memory goes.
func writeExplain(b *strings.Builder, run WaitRun) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## Where the memory goes\n\n### Stacks\n\n")
	p("A goroutine starts with a stack of 2 KiB (or the runtime's starting size, when it has seen larger\n")
	p("stacks) and the runtime doubles it, copying it, when a call would leave less than %d bytes free\n", stackGuard)
	p("below the stack pointer: a 4 KiB stack holds %s bytes of frames, an 8 KiB one %s. It never\n", thousands(4096-stackGuard), thousands(8192-stackGuard))
	p("shrinks while the goroutine runs; a garbage collection halves it only when what it uses, plus an\n")
	p("%d-byte reserve, is under a quarter of it: an 8 KiB stack goes back to 4 KiB only when its\n", stackNosplit)
	p("goroutine waits with less than %s bytes of frames. So what a waiting request's stack costs is set by\n", thousands(8192/4-stackNosplit))
	p("the deepest its goroutine went, first attempt included, and by how deep it waits.\n\n")
	p("Below, the frames of one waiting request of each library, from the runtime's traceback\n")
	p("(`GOTRACEBACK=system`, which gives each frame's bounds), the innermost first; each frame's bytes\n")
	p("include its return address. The last frames (`bench.WaitLibs…`, `bench.viaClient…`,\n")
	p("`bench.Waiting.Run.func1`, `sync.(*WaitGroup).Go.func1`, `runtime.goexit`) are the scenario's\n")
	p("caller; the `-httpclient` rows show what an `http.Client` adds (`net/http.send`, `(*Client).send`,\n")
	p("`(*Client).do`), the same under any library.\n\n")
	p("| library | stack in use while waiting | frames |\n|---|---:|---|\n")
	for _, e := range run.Explain {
		var fs []string
		for _, f := range e.Frames {
			if f.Inlined {
				fs = append(fs, fmt.Sprintf("%s (inlined)", f.Func))
				continue
			}
			fs = append(fs, fmt.Sprintf("%s %d", f.Func, f.Bytes))
		}
		p("| %s | %s B | %s |\n", e.Lib, thousands(StackDepth(e.Frames)), strings.Join(fs, " ← "))
	}
	p("\n### Heap\n\n")
	p("The heap each waiting request holds, by the place that allocated it (the first function outside\n")
	p("the runtime, and the calls that led there, innermost first, up to the scenario's caller), from a\n")
	p("heap profile of %s waiting requests with every allocation sampled (`runtime.MemProfileRate = 1`),\n", thousands(run.Meta.SitesRequests))
	p("taken at the same moment as the measurement, less the profile taken before the requests started,\n")
	p("per request. The totals differ a little from the measurement's (the profiles' own bookkeeping).\n")
	p("\nIn short, per waiting request: the goroutine's own structure; the request and context the caller\n")
	p("made (the same for every library); what the caller's `http.Client` made, for the `-httpclient`\n")
	p("rows (a copy of the URL, of the header); the failed attempt's 503 response, which the base made\n")
	p("(its header map, its body's reader) and the library still references while it waits (a network\n")
	p("transport's response weighs about as much); and what the library holds of its own (its state,\n")
	p("its timer, the channels and the runtime's wait records of its `select`, a copy of the 503's body\n")
	p("if it keeps one). A library that copies the request and drops the caller's (go-retryablehttp's\n")
	p("`Client.Do` does, for each retry) shows the copy as its own, and less under the caller's. Bytes\n")
	p("per request; the detail follows.\n\n")
	p("| library | %s | total |\n|---|%s---:|\n", strings.Join(Shares, " | "), strings.Repeat("---:|", len(Shares)))
	for _, e := range run.Explain {
		sh := HeapShares(e.Sites)
		total := 0.0
		p("| %s |", e.Lib)
		for _, v := range sh {
			p(" %.0f |", v)
			total += v
		}
		p(" %.0f |\n", total)
	}
	for _, e := range run.Explain {
		total := 0.0
		for _, s := range e.Sites {
			total += s.Bytes
		}
		p("\n**%s**: %.0f B per request\n\n| B/request | objects/request | whose | allocated in | via |\n|---:|---:|---|---|---|\n", e.Lib, total)
		for _, s := range e.Sites {
			p("| %.0f | %.2f | %s | %s | %s |\n", s.Bytes, s.Objects, s.Share(), s.Site, s.Via)
		}
	}
}

// secs formats d in seconds: "1.5 s".
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s" }

// thousands formats n with commas: 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
