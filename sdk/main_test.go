package sdk

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine of the SDKs, the transports or
// the fake services outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A client run (the calls of one client under one fault, against a
// service of its own) holds a slot while it runs. Runs whose calls wait in
// the line of retryhttp's default budget for their host (up to 0.9 of
// their deadline, see retryhttp.Budget) spend their time asleep: up to
// cap(lineSlots) of them go at once, one starting every lineStagger, so
// that the ends of their lines do not coincide: tens of calls leaving their
// lines in one instant, each sending its SDK's tries, would starve each
// other past the second their deadlines leave them (2 cores, -race, a
// loaded machine). The other runs are busy (TLS, bodies, the SDKs' work):
// up to GOMAXPROCS of them go at once. Slots are shared by TestAWS,
// TestAPIStripe and TestAPIOpenAI, which run in parallel.
var (
	lineSlots = make(chan struct{}, 24)
	busySlots = make(chan struct{}, max(runtime.GOMAXPROCS(0), 2))
)

const lineStagger = 250 * time.Millisecond

// lineStarts spaces the starts of the runs that hold a line slot.
var lineStarts struct {
	sync.Mutex
	next time.Time
}

// awaitLineStart returns once lineStagger has passed since the start of
// the run before.
func awaitLineStart() {
	lineStarts.Lock()
	at := time.Now()
	if at.Before(lineStarts.next) {
		at = lineStarts.next
	}
	lineStarts.next = at.Add(lineStagger)
	lineStarts.Unlock()
	time.Sleep(time.Until(at))
}

// runRows runs row(t, i) for each i in [0, n) as a subtest named name(i),
// all at once, and returns once all have ended; rows for which first(i)
// holds start first. A row runs its clients with runUnits.
func runRows(t *testing.T, n int, name func(i int) string, first func(i int) bool, row func(t *testing.T, i int)) {
	t.Helper()
	order := make([]int, 0, n)
	for pass := range 2 {
		for i := range n {
			if first(i) == (pass == 0) {
				order = append(order, i)
			}
		}
	}
	var wg sync.WaitGroup
	for _, i := range order {
		wg.Go(func() { t.Run(name(i), func(t *testing.T) { row(t, i) }) })
		runtime.Gosched() // let it queue for its slots in order
	}
	wg.Wait()
}

// runUnits runs run(k) for each k in [0, n) at once, each holding a slot
// while it runs, of lineSlots where waits(k) (its calls may wait in the
// budget's line) and of busySlots elsewhere, and returns once all have
// returned.
func runUnits(n int, waits func(k int) bool, run func(k int)) {
	var wg sync.WaitGroup
	for k := range n {
		slots := busySlots
		if waits(k) {
			slots = lineSlots
		}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if waits(k) {
				awaitLineStart()
			}
			run(k)
		})
	}
	wg.Wait()
}

// stallWatch measures how late this process runs its goroutines: the
// longest gap between the ticks of a 5 ms ticker since it started, less
// the 5 ms. A call that ends past its deadline while this is long was
// starved (by the machine's load, not by retryhttp). Stop returns it.
type stallWatch struct {
	done chan struct{}
	max  chan time.Duration
}

func watchStalls() *stallWatch {
	w := &stallWatch{done: make(chan struct{}), max: make(chan time.Duration, 1)}
	go func() {
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		var longest time.Duration
		last := time.Now()
		for {
			select {
			case <-w.done:
				w.max <- longest
				return
			case now := <-tk.C:
				longest = max(longest, now.Sub(last)-5*time.Millisecond)
				last = now
			}
		}
	}()
	return w
}

// Stop stops w and returns the longest stall it saw.
func (w *stallWatch) Stop() time.Duration {
	close(w.done)
	return <-w.max
}

// A tryTrace records, for one call, when each request the SDK handed to
// its HTTP client started and ended, relative to the call's deadline.
type tryTrace struct {
	mu       sync.Mutex
	deadline time.Time
	tries    []string
}

type tryTraceKey struct{}

// withTryTrace returns ctx carrying a new trace for a call with ctx's deadline.
func withTryTrace(ctx context.Context) (context.Context, *tryTrace) {
	dl, _ := ctx.Deadline()
	tr := &tryTrace{deadline: dl}
	return context.WithValue(ctx, tryTraceKey{}, tr), tr
}

func (tr *tryTrace) String() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.tries, "; ")
}

// tracing is an http.RoundTripper that records each request in the
// tryTrace of its context, if any.
type tracing struct{ next http.RoundTripper }

func (t tracing) RoundTrip(req *http.Request) (*http.Response, error) {
	tr, _ := req.Context().Value(tryTraceKey{}).(*tryTrace)
	if tr == nil {
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	end := time.Now()
	outcome := "err " + fmt.Sprint(err)
	if err == nil {
		outcome = resp.Status
	}
	tr.mu.Lock()
	tr.tries = append(tr.tries, fmt.Sprintf("try from %v to %v before the deadline: %s",
		tr.deadline.Sub(start).Round(time.Millisecond), tr.deadline.Sub(end).Round(time.Millisecond), outcome))
	tr.mu.Unlock()
	return resp, err
}
