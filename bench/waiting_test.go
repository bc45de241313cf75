package bench

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// quickWaiting is the waiting scenario small enough for go test (and the
// race detector): 200 requests through a 500 ms outage, measured 100 ms
// into it.
var quickWaiting = Waiting{Requests: 200, Outage: 500 * time.Millisecond, At: 100 * time.Millisecond, Deadline: 5 * time.Second}

// fullJitter names the libraries whose waits are drawn from a window that
// doubles with each retry, up to 10 s: one request in a few hundred may
// draw a wait that ends past its deadline, and fail.
var fullJitter = map[string]bool{"retryhttp-nobudget": true, "failsafe-go": true, "rehttp": true}

// TestWaiting runs the waiting scenario small through every library, one
// after the other, and checks that it measures what it says: every request
// waits at the measurement, every one is served after the recovery (but a
// few of those with full jitter), no body is left open, and the figures
// add up. Its memory figures are not
// checked (the race detector's instrumentation allocates, and the
// libraries share a process here; cmd/waiting runs each in its own).
func TestWaiting(t *testing.T) {
	var results []WaitResult
	for _, lib := range WaitLibs() {
		t.Run(lib.Name, func(t *testing.T) {
			var (
				r   WaitResult
				err error
			)
			for try := 0; try < 3; try++ {
				if r, err = quickWaiting.Run(lib); !errors.Is(err, ErrLateMeasurement) {
					break
				}
				t.Logf("try %d: %v", try+1, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("heap %.0f B/request, stack %.0f B/request, served %d, all %v after the recovery, %.2f attempts/request",
				r.HeapPerRequest(), r.StackPerRequest(), r.Served, r.AllServed, float64(r.AttemptsTotal)/float64(r.Requests))
			n := quickWaiting.Requests
			if r.Waiting != n {
				t.Errorf("%d requests waiting at the measurement, want all %d", r.Waiting, n)
			}
			if r.Goroutines < int64(n) {
				t.Errorf("%d goroutines more at the measurement than before, want at least one per request (%d)", r.Goroutines, n)
			}
			if r.AttemptsAtMeas < int64(n) || r.AttemptsOutage < r.AttemptsAtMeas {
				t.Errorf("%d attempts by the measurement, %d failed in all: want every request's first by then", r.AttemptsAtMeas, r.AttemptsOutage)
			}
			if r.Served+r.Failed != n || r.Served < n-n/50 || (r.Served != n && !fullJitter[lib.Name]) {
				t.Errorf("%d served, %d failed, want all %d served", r.Served, r.Failed, n)
			}
			if r.AttemptsTotal-r.AttemptsOutage != int64(r.Served) {
				t.Errorf("%d attempts answered 200 for %d served, want one each", r.AttemptsTotal-r.AttemptsOutage, r.Served)
			}
			if r.AllServed <= 0 || r.HalfServed <= 0 || r.HalfServed > r.AllServed || r.LastEnded < r.AllServed+quickWaiting.Outage {
				t.Errorf("half served %v and all %v after the recovery, the last call ended %v after the start: out of order", r.HalfServed, r.AllServed, r.LastEnded)
			}
			switch {
			case r.UnclosedBodies != 0 && !lib.LeavesBodiesOpen:
				t.Errorf("%d answers' bodies never closed", r.UnclosedBodies)
			case r.UnclosedBodies != 0:
				t.Logf("%d answers' bodies never closed, of the %d answered 503 (a known fault of the library)", r.UnclosedBodies, r.AttemptsOutage)
			}
			// (Not the stacks: those of the libraries run before are cached
			// for the goroutines that follow.)
			if !raceEnabled && r.Heap <= 0 {
				t.Errorf("heap %d B more while waiting: want more", r.Heap)
			}
			results = append(results, r)
		})
	}

	// The report of those runs: its target row and a row per library.
	var b strings.Builder
	if err := WriteWaitingReport(&b, WaitRun{Meta: WaitMeta{Waiting: quickWaiting, Runs: 1, Libs: WaitLibNames()}, Results: results}); err != nil {
		t.Fatal(err)
	}
	report := b.String()
	for _, want := range []string{"| a waiting request costs at most go-retryablehttp's memory", "| the same, each in an `http.Client`"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report has no target row %q", want)
		}
	}
	for _, lib := range WaitLibNames() {
		if !strings.Contains(report, "\n| "+lib+" | ") {
			t.Errorf("the report has no row for %s", lib)
		}
	}
}

// A waiting goroutine as the runtime's traceback prints it with
// GOTRACEBACK=system (cut short), and a goroutine running.
const waitingDump = `goroutine 1 gp=0xc000002380 m=0 mp=0x8b2d40 [running]:
main.main()
	/src/main.go:10 +0x10 fp=0xc000100000 sp=0xc0000fff00 pc=0x1

goroutine 23 gp=0x32b1c41eda40 m=nil [select]:
runtime.gopark(0x32b1c433b538?, 0x3?, 0x70?, 0x0?, 0x32b1c433b52a?)
	/usr/local/go/src/runtime/proc.go:462 +0xce fp=0x32b1c433b3c0 sp=0x32b1c433b3a0 pc=0x488c6e
runtime.selectgo(0x32b1c433b538, 0x32b1c433b524, 0xb4cf80?, 0x0, 0xb4cf80?, 0x1)
	/usr/local/go/src/runtime/select.go:351 +0xaa5 fp=0x32b1c433b4f0 sp=0x32b1c433b3c0 pc=0x467565
github.com/retryhttp/retryhttp/internal/budget.(*Budget).Wait(0x32b1c42a4328, {0x83d608, 0xb6e5a0}, 0x834cb0, {0x32b1c42d43e7, 0xf}, ...)
	/work/internal/budget/wait.go:35 +0x24e fp=0x32b1c433b638 sp=0x32b1c433b4f0 pc=0x69e72e
github.com/retryhttp/retryhttp.(*Budget).wait(...)
	/work/budget.go:117
github.com/retryhttp/retryhttp.(*call).awaitBudget(0x32b1c433bbd8, 0x32b1c433b8d8, {0xb4cf80?, 0x32b1c433b7a0?, 0xb4cf80?}, 0x2aa1a22, 0x1f5c125d?)
	/work/retrywait.go:93 +0x3ac fp=0x32b1c433b720 sp=0x32b1c433b638 pc=0x6c322c
github.com/retryhttp/retryhttp/bench.Waiting.Run.func1()
	/work/bench/waiting.go:327 +0x11f fp=0x32b1c433bfb0 sp=0x32b1c433b720 pc=0x6f355f
runtime.goexit({})
	/usr/local/go/src/runtime/asm_amd64.s:1771 +0x1 fp=0x32b1c433bfe8 sp=0x32b1c433bfb0 pc=0x4904e1
created by sync.(*WaitGroup).Go in goroutine 1
	/usr/local/go/src/sync/waitgroup.go:238 +0x73
`

func TestParseWaitingStack(t *testing.T) {
	frames, err := ParseWaitingStack(waitingDump, "bench.Waiting.Run.func1")
	if err != nil {
		t.Fatal(err)
	}
	want := []StackFrame{
		{Func: "runtime.gopark", Where: "proc.go:462", Bytes: 0x20},
		{Func: "runtime.selectgo", Where: "select.go:351", Bytes: 0x130},
		{Func: "retryhttp/internal/budget.(*Budget).Wait", Where: "wait.go:35", Bytes: 0x148},
		{Func: "retryhttp.(*Budget).wait", Where: "budget.go:117", Inlined: true},
		{Func: "retryhttp.(*call).awaitBudget", Where: "retrywait.go:93", Bytes: 0xe8},
		{Func: "bench.Waiting.Run.func1", Where: "waiting.go:327", Bytes: 0x890},
		{Func: "runtime.goexit", Where: "asm_amd64.s:1771", Bytes: 0x38},
	}
	if len(frames) != len(want) {
		t.Fatalf("got %d frames, want %d: %+v", len(frames), len(want), frames)
	}
	for i := range want {
		if frames[i] != want[i] {
			t.Errorf("frame %d: got %+v, want %+v", i, frames[i], want[i])
		}
	}
	if got, want := StackDepth(frames), 0x32b1c433bfe8-0x32b1c433b3a0; got != want {
		t.Errorf("depth %d, want %d", got, want)
	}
	if _, err := ParseWaitingStack(waitingDump, "no.such.func"); err == nil {
		t.Error("found a goroutine in a function absent from the dump")
	}
	if _, err := ParseWaitingStack(strings.ReplaceAll(waitingDump, " fp=", " xx="), "bench.Waiting.Run.func1"); err == nil {
		t.Error("parsed a dump without frame bounds")
	}
}

func TestHeapShares(t *testing.T) {
	sites := []HeapSite{
		{Site: "goroutine (its g)", Bytes: 480},
		{Site: "net/http.NewRequestWithContext (request.go:912)", Via: "bench.WaitLibs.func1.1", Bytes: 320},
		{Site: "context.WithDeadlineCause (context.go:640)", Via: "context.WithDeadline ← context.WithTimeout", Bytes: 112},
		{Site: "net/http.Header.Clone (header.go:114)", Via: "bench.(*outageBase).RoundTrip ← retryhttp.(*Transport).RoundTrip", Bytes: 352},
		{Site: "io.ReadAll (io.go:712)", Via: "retryhttp.keepClose ← retryhttp.(*call).awaitBudget", Bytes: 512},
		{Site: "net/http.NewRequestWithContext (request.go:912)", Via: "rehttp.(*Transport).RoundTrip", Bytes: 320},
		{Site: "net/http.cloneURL (clone.go:45)", Via: "net/http.(*Client).send ← net/http.(*Client).do ← net/http.(*Client).Do ← bench.viaClient.1", Bytes: 144},
		{Site: "net/http.cloneURL (clone.go:45)", Via: "net/http.(*Client).send ← net/http.(*Client).Do ← go-retryablehttp.(*Client).Do", Bytes: 100},
	}
	if got, want := HeapShares(sites), []float64{480, 432, 144, 352, 932}; !slices.Equal(got, want) {
		t.Errorf("shares %v, want %v (%v)", got, want, Shares)
	}
	p := HeapProfile{{"a", ""}: {300, 3}, {"b", "x"}: {50, 1}, {"c", ""}: {7, 1}}
	base := HeapProfile{{"a", ""}: {100, 1}}
	got := p.Sites(base, 10, 4)
	if len(got) != 3 || got[0].Site != "a" || got[0].Bytes != 20 || got[0].Objects != 0.2 || got[1].Site != "b" || got[2].Bytes != 0.7 {
		t.Errorf("sites %+v, want a (20 B), b (5 B), then the rest (0.7 B)", got)
	}
}

// The waiting target compares heap and stack together: a library that holds
// more heap and less stack than go-retryablehttp meets it when the sum is
// not larger, and misses it when it is, by a byte.
func TestWaitTargetCountsHeapAndStackTogether(t *testing.T) {
	sum := func(lib string, heap, stack float64) WaitSummary {
		return WaitSummary{Lib: lib, Heap: WaitStat{Median: heap}, Stack: WaitStat{Median: stack}}
	}
	for _, tc := range []struct {
		heap, stack float64
		met         bool
	}{
		{2651, 4122, true},  // more heap, far less stack
		{2636, 4794, true},  // the same
		{2637, 4794, false}, // a byte more in all
		{2000, 5431, false},
	} {
		fig, met, ok := WaitTarget([]WaitSummary{sum("retryhttp", tc.heap, tc.stack), sum("peer", 2636, 4794)}, "retryhttp", "peer")
		if !ok || met != tc.met {
			t.Errorf("heap %v, stack %v against 2636 + 4794: met %v, want %v (%s)", tc.heap, tc.stack, met, tc.met, fig)
		}
	}
	if _, _, ok := WaitTarget([]WaitSummary{sum("retryhttp", 1, 1)}, "retryhttp", "peer"); ok {
		t.Error("a target with a library that did not run")
	}
}
