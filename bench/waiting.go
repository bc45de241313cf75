package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/PuerkitoBio/rehttp"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/retryhttp/retryhttp"
)

// What a request costs while it waits to be retried: many concurrent GETs
// through one client while the dependency is down, the memory they hold
// (heap and goroutine stacks) measured while they all wait, then how long
// the client takes to serve them all once the dependency is back. It runs
// in real time: the goroutines and their stacks are the libraries' own,
// waiting on real timers.

// A Waiting describes the scenario: Requests GETs start at once through one
// client, each with a deadline of Deadline; the base answers 503 to every
// attempt until Outage has passed since the start, then 200. At At (within
// the outage) the memory is measured.
type Waiting struct {
	Requests int
	Outage   time.Duration
	At       time.Duration
	Deadline time.Duration

	// Before, if set, is called once the baseline is measured, just before
	// the requests start; Inspect, if set, at At, after the measurement
	// and before the calls go on: to take heap profiles or the waiting
	// goroutines' stacks.
	Before, Inspect func() `json:"-"`
}

// DefaultWaiting is the scenario at the size WAITING.md reports: 10,000
// requests through a 2 s outage, measured 1.5 s into it (when
// go-retryablehttp's calls are in their second wait, from 1 s to 3 s),
// each request with a deadline of 10 s.
var DefaultWaiting = Waiting{Requests: 10000, Outage: 2 * time.Second, At: 1500 * time.Millisecond, Deadline: 10 * time.Second}

// ErrLateMeasurement is Run's error when the measurement ended after the
// outage, the process having been held up (by a busy machine): the run
// tells nothing, and may be run again.
var ErrLateMeasurement = errors.New("the measurement came too late")

// A WaitResult is what one run of the scenario measured for one library.
type WaitResult struct {
	Lib      string
	Requests int
	Outage   time.Duration

	// Measured at the Waiting's At, after a garbage collection, as the
	// difference with the same figures after one before the requests
	// started: the bytes of live heap objects (runtime/metrics
	// /memory/classes/heap/objects:bytes), of goroutine stacks
	// (/memory/classes/heap/stacks:bytes) and the goroutines.
	Heap, Stack int64
	Goroutines  int64
	// The same two, after a second garbage collection: each one halves
	// the stacks that use less than a quarter of theirs.
	Heap2, Stack2 int64
	// StartingStack is the size new goroutines' stacks started with when
	// the requests started (/gc/stack/starting-size:bytes): the runtime
	// sets it at each collection from the stacks it scanned.
	StartingStack int64

	Waiting         int   // calls started and not ended, at the measurement
	AttemptsAtMeas  int64 // attempts the base had received by then
	AttemptsOutage  int64 // attempts the base answered 503
	AttemptsTotal   int64
	Served, Failed  int
	AllServed       time.Duration // from the recovery until the last call served ended (0 if none)
	HalfServed      time.Duration // from the recovery until half the calls were served (0 if fewer were)
	LastEnded       time.Duration // from the start until the last call ended
	UnclosedBodies  int64         // answers whose bodies nobody closed: none, or a leak
	MeasureDuration time.Duration // how long the two collections took
}

// HeapPerRequest is the heap held per waiting request, in bytes.
func (r WaitResult) HeapPerRequest() float64 { return float64(r.Heap) / float64(r.Requests) }

// StackPerRequest is the stack held per waiting request, in bytes.
func (r WaitResult) StackPerRequest() float64 { return float64(r.Stack) / float64(r.Requests) }

// A WaitLib is a library as the waiting scenario sends through it: Start
// returns the function each caller sends its GET with, over base.
type WaitLib struct {
	Name   string
	Config string // how it is configured, for the report
	// LeavesBodiesOpen says that the library does not close the bodies
	// of the failed answers it retries (failsafe-go v0.9.8 does not): with
	// a network transport their connections are not reused, and what they
	// reference stays in memory while the request goes on.
	LeavesBodiesOpen bool
	Start            func(base http.RoundTripper) func(ctx context.Context, url string) (*http.Response, error)
}

// waitAttempts is the attempt limit of the libraries whose default one
// would not outlast the outage: full jitter from 100 ms doubles its window
// with each retry, and with 10 attempts all but about one request in 1,000
// keep retrying through 2 s and are served before their deadline (the
// others draw waits short enough to spend their attempts within the
// outage, or long enough to pass their deadline).
const waitAttempts = 10

// WaitLibs returns the libraries of the waiting scenario, each configured
// to keep retrying through the outage (WAITING.md lists how), and a floor:
// a hand-written retry loop.
func WaitLibs() []WaitLib {
	viaRT := func(wrap func(http.RoundTripper) http.RoundTripper) func(http.RoundTripper) func(context.Context, string) (*http.Response, error) {
		return func(base http.RoundTripper) func(context.Context, string) (*http.Response, error) {
			rt := wrap(base)
			return func(ctx context.Context, url string) (*http.Response, error) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return nil, err
				}
				return rt.RoundTrip(req)
			}
		}
	}
	retryablehttpClient := func(base http.RoundTripper) *retryablehttp.Client {
		c := retryablehttp.NewClient() // 4 retries, 1, 2, 4, 8 s apart
		c.HTTPClient = &http.Client{Transport: base}
		c.Logger = nil
		return c
	}
	return []WaitLib{
		{Name: "retryhttp", Config: "`&retryhttp.Transport{Base: base}`: its defaults, default budget (4 attempts; retries wait in the host's line)",
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper { return &retryhttp.Transport{Base: base} })},
		{Name: "retryhttp-nobudget", Config: fmt.Sprintf("`&retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: %d}, Budget: retryhttp.UnlimitedBudget()}`: default backoff (full jitter, 100 ms·2ⁿ, at most 10 s)", waitAttempts),
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				return &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: waitAttempts}, Budget: retryhttp.UnlimitedBudget()}
			})},
		{Name: "retryablehttp-client", Config: "`retryablehttp.NewClient()` with `Logger: nil` and its base, called with `Client.Do` on a `retryablehttp.NewRequestWithContext`: its defaults (5 attempts, waits 1, 2, 4, 8 s: exponential from `RetryWaitMin` 1 s, no jitter, at most `RetryWaitMax` 30 s), which keep retrying through the outage (its retries go at 1 s and 3 s)",
			Start: func(base http.RoundTripper) func(context.Context, string) (*http.Response, error) {
				c := retryablehttpClient(base)
				return func(ctx context.Context, url string) (*http.Response, error) {
					req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, url, nil)
					if err != nil {
						return nil, err
					}
					return c.Do(req)
				}
			}},
		{Name: "retryablehttp", Config: "the same `Client`, through its `RoundTripper` adapter",
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				return &retryablehttp.RoundTripper{Client: retryablehttpClient(base)}
			})},
		{Name: "retryhttp-httpclient", Config: "retryhttp as most users call it: `retryhttp.NewClient(&http.Client{Transport: base}, retryhttp.Policy{})`, its defaults, called with `http.Client.Do`",
			Start: func(base http.RoundTripper) func(context.Context, string) (*http.Response, error) {
				return viaClient(retryhttp.NewClient(&http.Client{Transport: base}, retryhttp.Policy{}))
			}},
		{Name: "retryablehttp-httpclient", Config: "go-retryablehttp's `http.Client`: the same `Client`'s `StandardClient()` (its `RoundTripper` adapter in an `http.Client`), called with `http.Client.Do`",
			Start: func(base http.RoundTripper) func(context.Context, string) (*http.Response, error) {
				return viaClient(retryablehttpClient(base).StandardClient())
			}},
		{Name: "failsafe-go", LeavesBodiesOpen: true, Config: fmt.Sprintf("`failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(%d).ReturnLastFailure().WithBackoff(50ms, 5s).WithJitterFactor(1).Build())`: full jitter as retryhttp's (its default has no delay: its 3 attempts would end within a millisecond)", waitAttempts),
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				p := failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(waitAttempts).ReturnLastFailure().
					WithBackoff(backoffBase/2, backoffCap/2).WithJitterFactor(1).Build()
				return failsafehttp.NewRoundTripper(base, p)
			})},
		{Name: "rehttp", Config: fmt.Sprintf("`rehttp.NewTransport(base, retry, rehttp.ExpJitterDelay(100ms, 10s))`, retry as retryhttp's default conditions with `RetryMaxRetries(%d)`", waitAttempts-1),
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				return rehttp.NewTransport(base, rehttpRetry(waitAttempts-1), rehttp.ExpJitterDelay(backoffBase, backoffCap))
			})},
		{Name: "handloop", Config: "the floor: a hand-written loop around the base, no library: send; on a 503 read the body, close it, wait on a timer (1, 2, 4, 8 s) or the context; at most 5 attempts",
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper { return handLoop{base} })},
	}
}

// viaClient returns the function a caller sends its GET with through c.
func viaClient(c *http.Client) func(context.Context, string) (*http.Response, error) {
	return func(ctx context.Context, url string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		return c.Do(req)
	}
}

// WaitLibNames returns the names of WaitLibs, in order.
func WaitLibNames() []string {
	var names []string
	for _, l := range WaitLibs() {
		names = append(names, l.Name)
	}
	return names
}

// WaitLibByName returns the library of WaitLibs called name.
func WaitLibByName(name string) (WaitLib, bool) {
	for _, l := range WaitLibs() {
		if l.Name == name {
			return l, true
		}
	}
	return WaitLib{}, false
}

// handLoop is the least a retrying client can be: a loop that waits on a
// timer or the request's context, with go-retryablehttp's default waits.
type handLoop struct{ base http.RoundTripper }

func (h handLoop) RoundTrip(req *http.Request) (*http.Response, error) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		resp, err := h.base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || attempt == 5 {
			return resp, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		}
		wait *= 2
	}
}

// outageBase is the in-memory dependency of the waiting scenario: it
// answers 503 until down has passed since start, then 200, each answer a
// realistic one (Realistic) in turn with a header and a body of its own,
// as a network transport gives them. It counts the attempts and the
// answers' bodies left open.
type outageBase struct {
	start time.Time
	down  time.Duration

	attempts, failed atomic.Int64
	open             atomic.Int64 // bodies given and not yet closed
}

func (b *outageBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	n := b.attempts.Add(1)
	status, a := http.StatusOK, &realisticOK[n%int64(len(realisticOK))]
	if time.Since(b.start) < b.down {
		b.failed.Add(1)
		status, a = http.StatusServiceUnavailable, &realisticFailed[n%int64(len(realisticFailed))]
	}
	b.open.Add(1)
	resp := &http.Response{
		Status:        statusLine(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        a.header.Clone(), // a transport parses a header of its own
		Body:          &outageBody{b: a.body, open: &b.open},
		ContentLength: int64(len(a.body)),
		Request:       req,
	}
	if a.chunked {
		resp.ContentLength = -1
		resp.TransferEncoding = chunked
	}
	return resp, nil
}

// outageBody is an answer's body: its bytes, then io.EOF; Close counts
// once.
type outageBody struct {
	b    []byte
	off  int
	shut atomic.Bool
	open *atomic.Int64
}

func (b *outageBody) Read(p []byte) (int, error) {
	if b.shut.Load() {
		return 0, errReadClosed
	}
	if b.off >= len(b.b) {
		return 0, io.EOF
	}
	n := copy(p, b.b[b.off:])
	b.off += n
	return n, nil
}

func (b *outageBody) Close() error {
	if !b.shut.Swap(true) {
		b.open.Add(-1)
	}
	return nil
}

// The runtime/metrics samples the scenario reads.
var waitMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/sched/goroutines:goroutines",
	"/gc/stack/starting-size:bytes",
}

type memReading struct{ heap, stack, goroutines, startingStack int64 }

// readMem collects the garbage and reads the heap, the stacks and the
// goroutines.
func readMem() memReading {
	runtime.GC()
	s := make([]metrics.Sample, len(waitMetrics))
	for i, name := range waitMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	return memReading{heap: int64(s[0].Value.Uint64()), stack: int64(s[1].Value.Uint64()),
		goroutines: int64(s[2].Value.Uint64()), startingStack: int64(s[3].Value.Uint64())}
}

// Run runs the scenario through lib and returns what it measured once every
// call has ended. For figures of one library alone, run it in a process of
// its own (cmd/waiting does): the runtime sizes new goroutines' stacks by
// the average it last saw, and the heap keeps what came before.
func (w Waiting) Run(lib WaitLib) (WaitResult, error) {
	if w.Requests < 1 || w.At <= 0 || w.At >= w.Outage {
		return WaitResult{}, fmt.Errorf("waiting: %d requests measured at %v of an outage of %v: want at least one, within the outage", w.Requests, w.At, w.Outage)
	}
	base := &outageBase{down: w.Outage}
	send := lib.Start(base)
	urls := make([]string, w.Requests)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://dependency.test/items/%d", i)
	}
	ends := make([]time.Duration, w.Requests) // since the start; < 0 for a call that failed
	var (
		wg              sync.WaitGroup
		started, ended  atomic.Int64
		parent, stopAll = context.WithCancel(context.Background())
	)
	defer stopAll()
	runtime.GC() // and readMem a second one: whatever the first left to sweep or shrink
	before := readMem()
	if w.Before != nil {
		w.Before()
	}

	base.start = time.Now()
	start := base.start
	for i := range w.Requests {
		wg.Go(func() {
			started.Add(1)
			defer ended.Add(1)
			ctx, cancel := context.WithTimeout(parent, w.Deadline)
			defer cancel()
			resp, err := send(ctx, urls[i])
			ok := false
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ok = err == nil && resp.StatusCode == http.StatusOK
			}
			if ends[i] = time.Since(start); !ok {
				ends[i] = -ends[i] - 1
			}
		})
	}

	time.Sleep(time.Until(start.Add(w.At)))
	res := WaitResult{Lib: lib.Name, Requests: w.Requests, Outage: w.Outage, StartingStack: before.startingStack}
	m0 := time.Now()
	during := readMem()
	res.Waiting = int(started.Load() - ended.Load())
	res.AttemptsAtMeas = base.attempts.Load()
	measured := time.Since(start)
	during2 := readMem()
	res.MeasureDuration = time.Since(m0)
	res.Heap, res.Stack = during.heap-before.heap, during.stack-before.stack
	res.Goroutines = during.goroutines - before.goroutines
	res.Heap2, res.Stack2 = during2.heap-before.heap, during2.stack-before.stack
	if measured >= w.Outage {
		return res, fmt.Errorf("waiting, %s: %w: it ended %v into the outage of %v", lib.Name, ErrLateMeasurement, measured, w.Outage)
	}
	if w.Inspect != nil {
		w.Inspect()
	}

	wg.Wait()
	res.AttemptsOutage = base.failed.Load()
	res.AttemptsTotal = base.attempts.Load()
	res.UnclosedBodies = base.open.Load()
	var served []time.Duration
	for _, e := range ends {
		if e < 0 {
			res.Failed++
			e = -e - 1
		} else {
			served = append(served, e)
		}
		res.LastEnded = max(res.LastEnded, e)
	}
	res.Served = len(served)
	slices.Sort(served)
	if n := len(served); n > 0 {
		res.AllServed = served[n-1] - w.Outage
		if half := (w.Requests + 1) / 2; n >= half {
			res.HalfServed = served[half-1] - w.Outage
		}
	}
	return res, nil
}
