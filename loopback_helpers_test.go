package retryhttp

// The machinery of loopback_faults_test.go: a load on a schedule, a
// monitor of the scheduler's lag, and for item 3 a backend with a ledger of
// POSTs that can be restarted on its address.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// loopEvery calls fn(i) from a goroutine of its own at begin + i*gap, for i
// from 0 while i*gap < d, and returns the number of calls; wg counts them.
// A slow scheduler delays the calls, never drops one.
func loopEvery(wg *sync.WaitGroup, begin time.Time, gap, d time.Duration, fn func(i int)) int {
	n := 0
	for ; time.Duration(n)*gap < d; n++ {
		time.Sleep(time.Until(begin.Add(time.Duration(n) * gap)))
		i := n
		wg.Go(func() { fn(i) })
	}
	return n
}

// lagMonitor measures the scheduler's lag while a scenario runs: how much
// later than asked a goroutine sleeping 1 ms at a time wakes up, at worst.
// A machine too busy to run the scenario on time lags; the figures are
// then the machine's as much as the Transport's.
type lagMonitor struct {
	stop  chan struct{}
	done  chan struct{}
	worst time.Duration
}

func startLagMonitor() *lagMonitor {
	m := &lagMonitor{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case <-m.stop:
				return
			default:
			}
			t0 := time.Now()
			time.Sleep(time.Millisecond)
			m.worst = max(m.worst, time.Since(t0)-time.Millisecond)
		}
	}()
	return m
}

// end stops the monitor and returns the worst lag it saw.
func (m *lagMonitor) end() time.Duration {
	close(m.stop)
	<-m.done
	return m.worst
}

// ---- item 3's backend ----

// loopLedger is a backend that applies each POST once per Idempotency-Key:
// a repeated key gets the stored answer and is not applied again (409
// while the first is in progress, as the Idempotency-Key draft says). A
// POST is applied even if its connection is cut meanwhile, as a database
// commit would be; only its answer is lost. Each request takes work.
type loopLedger struct {
	work time.Duration
	// cut, when set, is taken and called by the next POST to be applied,
	// before it is applied: the backend goes down under it.
	cut atomic.Pointer[func()]

	mu      sync.Mutex
	answers map[string]string // by key; "" while in progress
	applied map[string]int    // by key
	unkeyed int
	repeats int // POSTs whose key had been seen: answered from the ledger, or 409
}

func newLoopLedger(work time.Duration) *loopLedger {
	return &loopLedger{work: work, answers: make(map[string]string), applied: make(map[string]int)}
}

func (l *loopLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost {
		time.Sleep(l.work)
		io.WriteString(w, "ok")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	if key == "" {
		l.unkeyed++
	}
	answer, seen := l.answers[key]
	if !seen {
		l.answers[key] = ""
	} else {
		l.repeats++
	}
	l.mu.Unlock()
	switch {
	case seen && answer == "":
		http.Error(w, "in progress", http.StatusConflict)
		return
	case !seen:
		if cut := l.cut.Swap(nil); cut != nil {
			(*cut)()
		}
		time.Sleep(l.work)
		l.mu.Lock()
		l.applied[key]++
		answer = fmt.Sprintf(`{"payment":%d}`, len(l.applied))
		l.answers[key] = answer
		l.mu.Unlock()
	}
	io.WriteString(w, answer)
}

// twice returns the keys applied more than once.
func (l *loopLedger) twice() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.applied {
		if c > 1 {
			n++
		}
	}
	return n
}

// loopBackend is a backend server on loopback that can be stopped and
// started again on the same address (or, should another socket have taken
// it meanwhile, on a new one: url follows).
type loopBackend struct {
	h        http.Handler
	target   atomic.Pointer[url.URL]
	handlers sync.WaitGroup // handlers running, which outlive a Close

	mu    sync.Mutex
	srv   *http.Server
	serve chan struct{} // closed when srv's Serve returns
}

func startLoopBackend(t *testing.T, h http.Handler) *loopBackend {
	b := &loopBackend{h: h}
	require.NoError(t, b.start("127.0.0.1:0"))
	return b
}

func (b *loopBackend) url() *url.URL { return b.target.Load() }

// start listens on addr and serves there.
func (b *loopBackend) start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	b.target.Store(&url.URL{Scheme: "http", Host: ln.Addr().String()})
	srv := &http.Server{ErrorLog: discardLog(), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.handlers.Add(1)
		defer b.handlers.Done()
		b.h.ServeHTTP(w, r)
	})}
	serve := make(chan struct{})
	go func() {
		defer close(serve)
		srv.Serve(ln)
	}()
	b.mu.Lock()
	b.srv, b.serve = srv, serve
	b.mu.Unlock()
	return nil
}

// stop closes the listener and every connection at once, requests in
// flight included (their handlers run on).
func (b *loopBackend) stop() {
	b.mu.Lock()
	srv, serve := b.srv, b.serve
	b.mu.Unlock()
	srv.Close()
	<-serve
}

// restartUnder stops the backend as soon as a POST is being applied (or
// after 50 ms if none comes), so that one POST is applied and its answer
// lost; keeps it down for down; and starts it again on its address, or on
// a new one if that is taken.
func (b *loopBackend) restartUnder(l *loopLedger, down time.Duration) error {
	var once sync.Once
	stopped := make(chan struct{})
	stop := func() { once.Do(func() { b.stop(); close(stopped) }) }
	l.cut.Store(&stop)
	select {
	case <-stopped:
	case <-time.After(50 * time.Millisecond):
		l.cut.Store(nil)
		stop()
	}
	time.Sleep(down)
	if err := b.start(b.url().Host); err != nil {
		return b.start("127.0.0.1:0")
	}
	return nil
}
