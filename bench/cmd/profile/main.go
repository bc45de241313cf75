// Command profile takes a CPU profile of retryhttp's rows of the measured
// paths (bench.ProfileCPU: the case cmd/measure measures, warmed up, with
// its GOMAXPROCS, for a few seconds of CPU time) and says where the time
// went, for cmd/report to print under each path's table in BENCHMARKS.md.
//
// Each sample of a profile is a call stack. Walking it from the leaf up, the
// first frame of this repository's module says whose work the sample is:
// retryhttp's (its package or one of its internal ones; the runtime and
// standard library functions it calls count as its own), the bench's (the
// in-memory base, the caller that reads the answer, the loop around them;
// what they call counts as theirs, retryhttp's callbacks into the base's
// body included), or neither (no such frame: the garbage collector's
// background workers, the scheduler). The frames of retryhttp's share are
// then ranked by flat time: the leaf function of each of its samples, with,
// for a leaf of another package (runtime.mallocgc), the retryhttp function
// most of its samples came through.
//
// A sample whose leaf is runtime.asyncPreempt counts for the function it
// interrupted, the frame below: the profiler's signal lands there on 2 to
// 4 % of the GET path's samples, yet the path runs no faster with
// asynchronous preemption off (GODEBUG=asyncpreemptoff=1), so those samples
// are not time the preemption takes.
//
// For each case it writes the profile to -dir, reads its stacks with
// "go tool pprof -traces -unit=ms", and writes to -o a block of lines,
// fields separated by tabs:
//
//	case GET/resp=realistic/lib=retryhttp	ops 49234567	sampled-ms 3010	profile results/profiles/GET_resp=realistic_lib=retryhttp.pprof
//	share	retryhttp	24.49
//	share	bench	75.26
//	share	neither	0.25
//	frame	8.31	github.com/retryhttp/retryhttp.(*Transport).RoundTrip
//	frame	3.70	time.runtimeNow	100.00	github.com/retryhttp/retryhttp.(*call).run
//
// Shares and frames are percentages of all the case's samples; the frames
// are retryhttp's share's, the most flat time first (-top of them), a
// frame of another package's followed by the percentage of its samples
// that came through the retryhttp function named last.
//
//	go run ./cmd/profile -cputime 3s -dir results/profiles -o results/profiles.txt
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// defaultCases are retryhttp's rows of the in-memory paths, on realistic
// answers. The opt-ins path's row of retryhttp without opt-ins is the GET
// path's case again, so only the opt-ins are profiled there. The loopback
// paths are not profiled: most of their CPU time is net/http's and the
// server's, on several threads, and the partition above would count the
// network transport retryhttp calls as retryhttp's.
var defaultCases = []string{
	"GET/resp=realistic/lib=retryhttp",
	"PUT1MiB/resp=realistic/lib=retryhttp",
	"POST1KiB/resp=realistic/lib=retryhttp",
	"Retry/resp=realistic/lib=retryhttp",
	"OptIns/resp=realistic/lib=retryhttp-hedge",
	"OptIns/resp=realistic/lib=retryhttp-throttle",
}

func main() {
	names := flag.String("cases", strings.Join(defaultCases, ","), "comma-separated cases to profile, each path/resp=kind/lib=name")
	cpu := flag.Duration("cputime", 3*time.Second, "CPU time each case runs profiled (100 samples a second)")
	dir := flag.String("dir", "results/profiles", "directory the profiles are written to")
	top := flag.Int("top", 10, "frames of retryhttp's share to list per case")
	goCmd := flag.String("go", "go", "the go command, whose \"go tool pprof\" reads the profiles")
	out := flag.String("o", "", "output file (default: standard output)")
	flag.Parse()
	if err := run(strings.Split(*names, ","), *cpu, *dir, *top, *goCmd, *out); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		os.Exit(1)
	}
}

func run(names []string, cpu time.Duration, dir string, top int, goCmd, out string) error {
	cases, done, err := selectCases(names)
	if err != nil {
		return err
	}
	defer done()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	fmt.Fprintln(&buf, "# cmd/profile: where retryhttp's CPU time goes, in % of each case's samples")
	for _, c := range cases {
		fmt.Fprintf(os.Stderr, "profiling %s for %v of CPU time\n", c.Name(), cpu)
		file := filepath.Join(dir, strings.ReplaceAll(c.Name(), "/", "_")+".pprof")
		ops, err := profileTo(c, cpu, file)
		if err != nil {
			return err
		}
		traces, err := pprofTraces(goCmd, file)
		if err != nil {
			return err
		}
		stacks, err := parseTraces(bytes.NewReader(traces))
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		s := summarize(stacks, top)
		if s.sampled == 0 {
			return fmt.Errorf("%s: no samples in %v of CPU time", c.Name(), cpu)
		}
		s.write(&buf, c.Name(), ops, file)
	}
	if out == "" {
		_, err = os.Stdout.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// selectCases returns the cases named, in the order of names, and the
// function that releases what they share.
func selectCases(names []string) ([]bench.Case, func(), error) {
	var paths []string
	for _, name := range names {
		path, _, ok := strings.Cut(name, "/lib=")
		if !ok {
			return nil, nil, fmt.Errorf("case %q: want path/resp=kind/lib=name", name)
		}
		if !slices.Contains(paths, path) {
			paths = append(paths, path)
		}
	}
	if _, err := bench.Expand(paths...); err != nil {
		return nil, nil, err
	}
	all, done := bench.Cases(paths...)
	var cases []bench.Case
	for _, name := range names {
		i := slices.IndexFunc(all, func(c bench.Case) bool { return c.Name() == name })
		if i < 0 {
			done()
			return nil, nil, fmt.Errorf("no case %q", name)
		}
		cases = append(cases, all[i])
	}
	return cases, done, nil
}

// profileTo profiles c for cpu of CPU time into file.
func profileTo(c bench.Case, cpu time.Duration, file string) (ops int, err error) {
	f, err := os.Create(file)
	if err != nil {
		return 0, err
	}
	ops, _, err = bench.ProfileCPU(c, cpu, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return ops, err
}

// pprofTraces returns "go tool pprof -traces" of the profile in file, its
// values in milliseconds.
func pprofTraces(goCmd, file string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(goCmd, "tool", "pprof", "-traces", "-unit=ms", file)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// A stack is one sample of a profile, as "go tool pprof -traces" prints
// it: its value and its frames, leaf first, inlined calls as frames of
// their own.
type stack struct {
	ms     float64
	frames []string
}

const traceSeparator = "-----------+"

// parseTraces reads the output of "go tool pprof -traces": a header, then
// for each sample a separator, its labels if any ("%10s:  %s"), and its
// frames, one a line ("%10s   %s"), the first with its value.
func parseTraces(r io.Reader) ([]stack, error) {
	var (
		out []stack
		cur *stack
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, traceSeparator):
			if cur != nil && len(cur.frames) > 0 {
				out = append(out, *cur)
			}
			cur = &stack{}
			continue
		case cur == nil || len(line) < 13 || line[10] == ':':
			continue // the header, or a sample's label
		case line[10:13] != "   ":
			return nil, fmt.Errorf("line %d: %q is not a frame", n, line)
		}
		if v := strings.TrimSpace(line[:10]); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			cur.ms = float64(d) / float64(time.Millisecond)
		}
		cur.frames = append(cur.frames, strings.TrimSuffix(line[13:], " (inline)"))
	}
	return out, sc.Err()
}

// The owners of a sample's CPU time.
const (
	ownRetryhttp = "retryhttp"
	ownBench     = "bench"
	ownNeither   = "neither"
)

var owners = []string{ownRetryhttp, ownBench, ownNeither}

const module = "github.com/retryhttp/retryhttp"

// owner returns whose code a frame is: retryhttp's, the bench's (this
// module's bench package and its commands), or "" for another package's
// (the runtime's, the standard library's).
func owner(frame string) string {
	switch {
	case strings.HasPrefix(frame, module+"/bench.") || strings.HasPrefix(frame, module+"/bench/") ||
		strings.HasPrefix(frame, "main."):
		return ownBench
	case strings.HasPrefix(frame, module+".") || strings.HasPrefix(frame, module+"/"):
		return ownRetryhttp
	}
	return ""
}

// ownerOf returns whose work a sample is: that of its first frame, from
// the leaf up, that is retryhttp's or the bench's; neither's if none is.
// It also returns that frame's index, -1 for neither.
func ownerOf(s stack) (string, int) {
	for i, f := range s.frames {
		if o := owner(f); o != "" {
			return o, i
		}
	}
	return ownNeither, -1
}

// asyncPreempt is the function a goroutine preempted asynchronously runs
// on top of the one it interrupted.
const asyncPreempt = "runtime.asyncPreempt"

// A frame is a leaf function of retryhttp's share, its flat time, and, if
// it is another package's, the retryhttp function most of that time came
// through and how much of it.
type frame struct {
	name   string
	ms     float64
	via    string
	viaPct float64
}

// A summary is where one profile's CPU time went.
type summary struct {
	sampled float64            // milliseconds of samples in all
	shares  map[string]float64 // milliseconds, by owner
	frames  []frame            // retryhttp's share by leaf, the most first
}

// summarize divides stacks among their owners and ranks the leaf functions
// of retryhttp's share by flat time, keeping top of them (ties in name
// order). A sample on runtime.asyncPreempt counts for the frame below it.
func summarize(stacks []stack, top int) summary {
	s := summary{shares: map[string]float64{}}
	flat := map[string]float64{}
	via := map[string]map[string]float64{}
	for _, st := range stacks {
		if len(st.frames) > 1 && st.frames[0] == asyncPreempt {
			st.frames = st.frames[1:]
		}
		s.sampled += st.ms
		o, i := ownerOf(st)
		s.shares[o] += st.ms
		if o != ownRetryhttp {
			continue
		}
		leaf := st.frames[0]
		flat[leaf] += st.ms
		if i > 0 {
			if via[leaf] == nil {
				via[leaf] = map[string]float64{}
			}
			via[leaf][st.frames[i]] += st.ms
		}
	}
	for name, ms := range flat {
		f := frame{name: name, ms: ms}
		for fn, v := range via[name] {
			if v > f.viaPct || v == f.viaPct && fn < f.via {
				f.via, f.viaPct = fn, v
			}
		}
		f.viaPct = 100 * f.viaPct / ms
		s.frames = append(s.frames, f)
	}
	slices.SortFunc(s.frames, func(a, b frame) int {
		return cmp.Or(cmp.Compare(b.ms, a.ms), strings.Compare(a.name, b.name))
	})
	if len(s.frames) > top {
		s.frames = s.frames[:top]
	}
	return s
}

// write writes s as a block of lines, percentages of all the samples.
func (s summary) write(w io.Writer, name string, ops int, file string) {
	pct := func(ms float64) float64 { return 100 * ms / s.sampled }
	fmt.Fprintf(w, "case %s\tops %d\tsampled-ms %.0f\tprofile %s\n", name, ops, s.sampled, file)
	for _, o := range owners {
		fmt.Fprintf(w, "share\t%s\t%.2f\n", o, pct(s.shares[o]))
	}
	for _, f := range s.frames {
		fmt.Fprintf(w, "frame\t%.2f\t%s", pct(f.ms), f.name)
		if f.via != "" {
			fmt.Fprintf(w, "\t%.2f\t%s", f.viaPct, f.via)
		}
		fmt.Fprintln(w)
	}
}
