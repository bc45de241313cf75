package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// tracesFixture is "go tool pprof -traces -unit=ms" of a made-up profile:
// retryhttp's own frame, a runtime frame it calls, a sample on
// runtime.asyncPreempt, the base's frames (one called back by retryhttp),
// a GC worker's, and a sample with a label.
const tracesFixture = `File: profile
Type: cpu
Time: 2026-12-01 10:34:49 UTC
Duration: 3.10s, Total samples = 100ms (3.23%)
-----------+-------------------------------------------------------
      30ms   github.com/retryhttp/retryhttp.(*Transport).RoundTrip
             github.com/retryhttp/retryhttp/bench.sendThrough.func1
             github.com/retryhttp/retryhttp/bench.(*run).do
             main.main
-----------+-------------------------------------------------------
      20ms   runtime.nanotime (inline)
             github.com/retryhttp/retryhttp/internal/clock.MonoNow
             github.com/retryhttp/retryhttp.(*call).run
             github.com/retryhttp/retryhttp.(*Transport).RoundTrip
             github.com/retryhttp/retryhttp/bench.(*run).do
-----------+-------------------------------------------------------
      10ms   runtime.asyncPreempt
             github.com/retryhttp/retryhttp.(*Transport).RoundTrip
             github.com/retryhttp/retryhttp/bench.(*run).do
-----------+-------------------------------------------------------
      20ms   runtime.memmove
             github.com/retryhttp/retryhttp/bench.(*body).Read
             github.com/retryhttp/retryhttp.(*Transport).drainClose
             github.com/retryhttp/retryhttp.(*Transport).RoundTrip
             github.com/retryhttp/retryhttp/bench.(*run).do
-----------+-------------------------------------------------------
      10ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
     pprof:  one
      10ms   runtime.nanotime
             github.com/retryhttp/retryhttp.(*Transport).cutOff
             github.com/retryhttp/retryhttp/bench.(*run).do
-----------+-------------------------------------------------------
`

// Each sample belongs to the first frame of the module from its leaf up:
// retryhttp's (the runtime frames it calls included), the bench's (the
// base's body read by retryhttp included), or neither; a sample on
// runtime.asyncPreempt counts for the frame it interrupted; retryhttp's
// leaves are ranked by flat time, a runtime leaf with the retryhttp
// function most of it came through.
func TestSummarizeTraces(t *testing.T) {
	stacks, err := parseTraces(strings.NewReader(tracesFixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(stacks) != 6 || stacks[1].frames[0] != "runtime.nanotime" || stacks[1].ms != 20 {
		t.Fatalf("parsed %+v", stacks)
	}
	s := summarize(stacks, 10)
	if s.sampled != 100 {
		t.Errorf("%v ms sampled, want 100", s.sampled)
	}
	for o, want := range map[string]float64{ownRetryhttp: 70, ownBench: 20, ownNeither: 10} {
		if s.shares[o] != want {
			t.Errorf("%s's share %v ms, want %v", o, s.shares[o], want)
		}
	}
	want := []frame{
		{name: "github.com/retryhttp/retryhttp.(*Transport).RoundTrip", ms: 40},
		{name: "runtime.nanotime", ms: 30, via: "github.com/retryhttp/retryhttp/internal/clock.MonoNow", viaPct: 200.0 / 3},
	}
	if len(s.frames) != len(want) {
		t.Fatalf("frames %+v, want %+v", s.frames, want)
	}
	for i := range want {
		if g := s.frames[i]; g.name != want[i].name || g.ms != want[i].ms || g.via != want[i].via || math.Abs(g.viaPct-want[i].viaPct) > 1e-9 {
			t.Errorf("frame %d: %+v, want %+v", i, g, want[i])
		}
	}
	if s = summarize(stacks, 1); len(s.frames) != 1 {
		t.Errorf("top 1 kept %d frames", len(s.frames))
	}

	var b strings.Builder
	summarize(stacks, 10).write(&b, "GET/resp=realistic/lib=retryhttp", 5, "p.pprof")
	wantOut := "case GET/resp=realistic/lib=retryhttp\tops 5\tsampled-ms 100\tprofile p.pprof\n" +
		"share\tretryhttp\t70.00\nshare\tbench\t20.00\nshare\tneither\t10.00\n" +
		"frame\t40.00\tgithub.com/retryhttp/retryhttp.(*Transport).RoundTrip\n" +
		"frame\t30.00\truntime.nanotime\t66.67\tgithub.com/retryhttp/retryhttp/internal/clock.MonoNow\n"
	if b.String() != wantOut {
		t.Errorf("wrote\n%s\nwant\n%s", b.String(), wantOut)
	}

	if _, err := parseTraces(strings.NewReader("-----------+---\nnot a frame line at all\n")); err == nil {
		t.Error("a line that is no frame parsed")
	}
}

// The command profiles one case at a tiny size, reads the profile with
// go tool pprof, and writes a block whose shares add up to 100 %; GOMAXPROCS
// is left as it was. A case that does not exist is an error.
func TestProfileOneCase(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to run go tool pprof")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "profiles.txt")
	procs := runtime.GOMAXPROCS(0)
	const name = "GET/resp=realistic/lib=retryhttp"
	if err := run([]string{name}, 150*time.Millisecond, filepath.Join(dir, "profiles"), 5, goCmd, out); err != nil {
		t.Fatal(err)
	}
	if n := runtime.GOMAXPROCS(0); n != procs {
		t.Errorf("GOMAXPROCS %d after the profile, want %d", n, procs)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[1], "case "+name+"\tops ") {
		t.Fatalf("wrote\n%s", data)
	}
	file := lines[1][strings.LastIndex(lines[1], "\tprofile ")+len("\tprofile "):]
	if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
		t.Errorf("profile %s: %v", file, err)
	}
	var sum float64
	frames := 0
	for _, l := range lines[2:] {
		f := strings.Split(l, "\t")
		switch f[0] {
		case "share":
			v, err := strconv.ParseFloat(f[2], 64)
			if err != nil {
				t.Fatal(err)
			}
			sum += v
		case "frame":
			frames++
		default:
			t.Errorf("line %q", l)
		}
	}
	if math.Abs(sum-100) > 0.05 || frames > 5 {
		t.Errorf("shares add up to %v %%, %d frames listed (at most 5):\n%s", sum, frames, data)
	}

	if err := run([]string{"GET/resp=realistic/lib=nosuch"}, time.Millisecond, dir, 5, goCmd, out); err == nil {
		t.Error("a case that does not exist profiled")
	}
}

// Every default case is a case of the bench: retryhttp's row of each
// in-memory path (the POST of 1 KiB among them) and the opt-ins.
func TestDefaultCasesExist(t *testing.T) {
	cases, done, err := selectCases(defaultCases)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if len(cases) != len(defaultCases) {
		t.Errorf("%d cases for %d names", len(cases), len(defaultCases))
	}
	for _, want := range []string{"GET", "PUT1MiB", "POST1KiB", "Retry"} {
		name := want + "/resp=realistic/lib=retryhttp"
		if !slices.Contains(defaultCases, name) {
			t.Errorf("no default case %s", name)
		}
	}
}
