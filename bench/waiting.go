package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A Waiting is the scenario of what a request costs while it waits to be
// retried: Requests GETs start at once through one client, each with a
// deadline of Deadline; the base answers 503 to every attempt until Outage
// has passed since the start, then 200. At At (within the outage) the heap
// and the goroutine stacks are measured, before any request is served;
// then the time until the calls are served. It runs in real time: the goroutines, their stacks and their
// timers are the libraries' own.
type Waiting struct {
	Requests int
	Outage   time.Duration
	At       time.Duration
	Deadline time.Duration

	// HeapProfile, if not nil, receives a heap profile (pprof's format)
	// taken at the measurement, after its collection: where the bytes a
	// waiting request holds were allocated.
	HeapProfile io.Writer
}

// DefaultWaiting is the scenario at the size WAITING.md reports: 10,000
// requests through a 2 s outage, measured 1.5 s into it (when
// go-retryablehttp's calls are in their second wait, from 1 s to 3 s).
var DefaultWaiting = Waiting{Requests: 10000, Outage: 2 * time.Second, At: 1500 * time.Millisecond, Deadline: 10 * time.Second}

// ErrLateMeasurement is Run's error when a request had been served by the
// time the memory was read (the process having been held up, by a busy
// machine, past the outage): not every request was waiting, so the run
// tells nothing, and may be run again.
var ErrLateMeasurement = errors.New("the measurement came too late")

// A WaitResult is what one run of the scenario measured for one library.
type WaitResult struct {
	Lib      string
	Requests int

	// At the measurement, after a garbage collection, less the same
	// after one before the requests started: the bytes of live heap
	// objects and of goroutine stacks, and the goroutines.
	Heap, Stack, Goroutines int64

	MeasuredAt     time.Duration // when the reading ended, since the start
	Waiting        int           // calls started and not ended, at the measurement
	AttemptsAtMeas int64         // attempts the base had received by then
	AttemptsOutage int64         // attempts the base answered 503
	AttemptsTotal  int64
	Served, Failed int
	AllServed      time.Duration // from the recovery until the last call served ended (0 if none)
	HalfServed     time.Duration // from the recovery until half the calls were served (0 if fewer were)
	LastEnded      time.Duration // from the start until the last call ended
	UnclosedBodies int64         // answers whose bodies nobody closed: none, or a leak
}

// HeapPerRequest is the heap held per waiting request, in bytes.
func (r WaitResult) HeapPerRequest() float64 { return float64(r.Heap) / float64(r.Requests) }

// StackPerRequest is the stack held per waiting request, in bytes.
func (r WaitResult) StackPerRequest() float64 { return float64(r.Stack) / float64(r.Requests) }

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
	urls := make([]string, w.Requests) // made before the baseline: the caller's, not the library's
	for i := range urls {
		urls[i] = fmt.Sprintf("http://dependency.test/items/%d", i)
	}
	ends := make([]time.Duration, w.Requests) // since the start; < 0 for a call that failed
	var (
		wg              sync.WaitGroup
		started, ended  atomic.Int64
		parent, stopAll = context.WithCancel(context.Background())
	)
	defer stopAll() // the calls still going when the measurement came late
	// Collect twice (readMem once more): whatever the first left to sweep.
	runtime.GC()
	before := readMem()
	base.start = time.Now()
	start := base.start
	for i := range w.Requests {
		wg.Go(func() {
			started.Add(1)
			defer ended.Add(1)
			ok := waitCall(parent, send, w.Deadline, urls[i])
			if ends[i] = time.Since(start); !ok {
				ends[i] = -ends[i] - 1
			}
		})
	}

	time.Sleep(time.Until(start.Add(w.At)))
	during := readMem()
	if w.HeapProfile != nil {
		if err := pprof.Lookup("heap").WriteTo(w.HeapProfile, 0); err != nil {
			return WaitResult{}, fmt.Errorf("waiting, %s: the heap profile: %w", lib.Name, err)
		}
	}
	res := WaitResult{Lib: lib.Name, Requests: w.Requests, Waiting: int(started.Load() - ended.Load()),
		AttemptsAtMeas: base.attempts.Load(), Heap: during.heap - before.heap,
		Stack: during.stack - before.stack, Goroutines: during.goroutines - before.goroutines}
	res.MeasuredAt = time.Since(start)
	if n := base.served.Load(); n > 0 {
		return res, fmt.Errorf("waiting, %s: %w: %d requests served by the reading, which ended %v after the start (the outage lasts %v)",
			lib.Name, ErrLateMeasurement, n, res.MeasuredAt, w.Outage)
	}
	wg.Wait()
	res.AttemptsOutage, res.AttemptsTotal, res.UnclosedBodies = base.failed.Load(), base.attempts.Load(), base.open.Load()
	res.served(ends, w.Outage, w.Requests)
	return res, nil
}

// waitCall sends one GET of url through send with a deadline (ended with
// parent, if sooner), reads the answer's body to its end, closes it, and
// reports whether it was a 200.
func waitCall(parent context.Context, send func(context.Context, string) (*http.Response, error), deadline time.Duration, url string) bool {
	ctx, cancel := context.WithTimeout(parent, deadline)
	defer cancel()
	resp, err := send(ctx, url)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}

// served fills in what the calls' ends say: how many were served, and when
// all of them, and half of all the calls, were served after the outage.
func (r *WaitResult) served(ends []time.Duration, outage time.Duration, requests int) {
	var served []time.Duration
	for _, e := range ends {
		if e < 0 {
			r.Failed++
			e = -e - 1
		} else {
			served = append(served, e)
		}
		r.LastEnded = max(r.LastEnded, e)
	}
	r.Served = len(served)
	slices.Sort(served)
	if n := len(served); n > 0 {
		r.AllServed = served[n-1] - outage
		if half := (requests + 1) / 2; n >= half {
			r.HalfServed = served[half-1] - outage
		}
	}
}

// outageBase is the in-memory dependency of the waiting scenario: it
// answers 503 until down has passed since start, then 200, each answer a
// realistic one in turn with a header and a body of its own, as a network
// transport gives them. It counts the attempts and the bodies left open.
type outageBase struct {
	start time.Time
	down  time.Duration

	attempts, failed, served atomic.Int64
	open                     atomic.Int64 // bodies given and not yet closed
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
	} else {
		b.served.Add(1)
	}
	b.open.Add(1)
	resp := new(http.Response)
	a.fill(resp, status, req, &outageBody{b: a.body, open: &b.open})
	resp.Header = a.header.Clone() // a transport parses a header of its own
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

type memReading struct{ heap, stack, goroutines int64 }

// readMem collects the garbage and reads the bytes of live heap objects,
// of goroutine stacks, and the goroutines (runtime/metrics).
func readMem() memReading {
	runtime.GC()
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	metrics.Read(s)
	return memReading{heap: int64(s[0].Value.Uint64()), stack: int64(s[1].Value.Uint64()), goroutines: int64(s[2].Value.Uint64())}
}
