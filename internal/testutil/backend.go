package testutil

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// CallHeader carries the number of the call an attempt belongs to, for
// the servers that count by call (Ledger).
const CallHeader = "X-Call"

// Ledger is a backend that keeps a ledger of POSTs, as a payments API
// does: a POST with an Idempotency-Key already seen is answered from the
// ledger (409 while the first is in progress, as the Idempotency-Key
// draft says) and not applied again; a POST without a key is applied each
// time it arrives. A POST is applied even if its connection is cut
// meanwhile, as a database commit would be; only its answer is lost.
// Every application is counted by call (CallHeader), so a POST applied
// twice shows. Each request takes work.
type Ledger struct {
	work time.Duration
	// cut, when set, is taken and called by the next POST to be applied,
	// before it is applied: the backend goes down under it.
	cut atomic.Pointer[func()]

	mu      sync.Mutex
	answers map[string]string // by key; "" while in progress
	applied map[string]int    // by call
	counts  LedgerCounts
}

// LedgerCounts are what a Ledger saw of the POSTs.
type LedgerCounts struct {
	Twice   int // calls whose POST was applied more than once
	Keyed   int // POSTs that arrived with a key
	Unkeyed int // POSTs that arrived without one
	Repeats int // POSTs whose key had been seen: answered from the ledger, or 409
}

// NewLedger returns a ledger whose every request takes work.
func NewLedger(work time.Duration) *Ledger {
	return &Ledger{work: work, answers: make(map[string]string), applied: make(map[string]int)}
}

// ServeHTTP answers a GET "ok", and applies a POST as the ledger says.
func (l *Ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost {
		time.Sleep(l.work)
		io.WriteString(w, "ok")
		return
	}
	key := r.Header.Get("Idempotency-Key")
	l.mu.Lock()
	answer, seen := "", false
	if key == "" {
		l.counts.Unkeyed++
	} else {
		l.counts.Keyed++
		answer, seen = l.answers[key]
		if seen {
			l.counts.Repeats++
		} else {
			l.answers[key] = ""
		}
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
		l.applied[r.Header.Get(CallHeader)]++
		answer = fmt.Sprintf(`{"payment":%d}`, len(l.applied))
		if key != "" {
			l.answers[key] = answer
		}
		l.mu.Unlock()
	}
	io.WriteString(w, answer)
}

// Counts returns what the ledger saw so far.
func (l *Ledger) Counts() LedgerCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts
	for _, n := range l.applied {
		if n > 1 {
			c.Twice++
		}
	}
	return c
}

// Backend is a server on loopback that can be stopped and started again
// on the same address (or, should another socket have taken it meanwhile,
// on a new one: URL follows).
type Backend struct {
	h      http.Handler
	target atomic.Pointer[url.URL]
	// conns counts the connections of every server the backend ran, from
	// their acceptance to the end of their goroutine: net/http reports
	// StateNew on the goroutine that accepts, before Serve can return, and
	// StateClosed once the handler has returned. (A count kept in the
	// handler misses a connection whose goroutine has yet to call it.)
	conns sync.WaitGroup

	mu    sync.Mutex
	srv   *http.Server
	serve chan struct{} // closed when srv's Serve returns
}

// StartBackend starts a backend serving h on a loopback port.
func StartBackend(h http.Handler) (*Backend, error) {
	b := &Backend{h: h}
	return b, b.start("127.0.0.1:0")
}

// URL returns where the backend listens.
func (b *Backend) URL() *url.URL { return b.target.Load() }

// start listens on addr and serves there.
func (b *Backend) start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	b.target.Store(&url.URL{Scheme: "http", Host: ln.Addr().String()})
	srv := &http.Server{ErrorLog: DiscardLog(), Handler: b.h, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			b.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			b.conns.Done()
		}
	}}
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

// Stop closes the listener and every connection at once, requests in
// flight included (their handlers run on: Wait waits for them). A handler
// may call it.
func (b *Backend) Stop() {
	b.mu.Lock()
	srv, serve := b.srv, b.serve
	b.mu.Unlock()
	srv.Close()
	<-serve
}

// Wait waits, once the backend is stopped, for every connection it
// accepted to be done, its handler returned: nothing of the backend runs
// on after it.
func (b *Backend) Wait() { b.conns.Wait() }

// RestartUnder stops the backend as soon as a POST is being applied to l
// (or after 50 ms if none comes), so that one POST is applied and its
// answer lost; keeps it down for down; and starts it again on its address,
// or on a new one if that is taken.
func (b *Backend) RestartUnder(l *Ledger, down time.Duration) error {
	var once sync.Once
	stopped := make(chan struct{})
	stop := func() { once.Do(func() { b.Stop(); close(stopped) }) }
	l.cut.Store(&stop)
	timer := time.NewTimer(50 * time.Millisecond)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		l.cut.Store(nil)
		stop()
	}
	time.Sleep(down)
	if err := b.start(b.URL().Host); err != nil {
		return b.start("127.0.0.1:0")
	}
	return nil
}
