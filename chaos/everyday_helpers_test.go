package chaos

// The machinery of TestEverydayRealFaults (everyday_test.go): one call
// through a client, a load on a schedule, and the servers of its faults.
// The backend restarted behind a proxy and the listener that resets its
// connections follow the core module's loopback_helpers_test.go and
// classify_test.go (test files of another module, so reimplemented here).

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// everydayDeadline is each call's context deadline, from its start to the
// end of reading its answer's body.
const everydayDeadline = 10 * time.Second

// An everydayOutcome is how one call ended.
type everydayOutcome struct {
	post     bool
	served   bool // a 200 whose body was read to its end
	attempts int  // as the transport beneath the client counted them
	why      string
}

// everydaySend makes call id through rt within everydayDeadline: a GET, or
// a POST of body when body is not empty, carrying the call's number in
// callHeader and no idempotency key (a client may add one). It reads the
// answer's body to its end and closes it.
func everydaySend(rt http.RoundTripper, target string, id int, body string) everydayOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), everydayDeadline)
	defer cancel()
	cl := &call{id: id}
	ctx = withCall(ctx, cl)
	method := http.MethodGet
	var rd io.Reader
	if body != "" {
		method, rd = http.MethodPost, strings.NewReader(body) // GetBody set: every client may send it again
	}
	o := everydayOutcome{post: body != ""}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		panic(err) // the test's own URLs
	}
	req.Header.Set(callHeader, strconv.Itoa(id))
	resp, err := rt.RoundTrip(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			o.why = fmt.Sprintf("%d, then its body: %s", resp.StatusCode, errKind(err))
		case resp.StatusCode != http.StatusOK:
			o.why = resp.Status
		default:
			o.served = true
		}
	} else {
		o.why = errKind(err)
	}
	o.why = loopbackAddr.ReplaceAllString(o.why, "127.0.0.1:*")
	o.attempts = int(cl.attempts.Load())
	return o
}

var loopbackAddr = regexp.MustCompile(`127\.0\.0\.1:\d+`)

// onSchedule calls fn(i) from a goroutine of its own at begin + i*gap, for
// i from 0 while i*gap < d, and returns the number of calls; wg counts
// them. A slow scheduler delays the calls, never drops one.
func onSchedule(wg *sync.WaitGroup, begin time.Time, gap, d time.Duration, fn func(i int)) int {
	n := 0
	for ; time.Duration(n)*gap < d; n++ {
		time.Sleep(time.Until(begin.Add(time.Duration(n) * gap)))
		i := n
		wg.Go(func() { fn(i) })
	}
	return n
}

// ---- fault 2: a backend restarted behind a reverse proxy ----

// restartLedger is a backend that keeps a ledger of POSTs, as a payments
// API does: a POST with an Idempotency-Key already seen is answered from
// the ledger (409 while the first is in progress, as the Idempotency-Key
// draft says) and not applied again; a POST without a key is applied each
// time it arrives. A POST is applied even if its connection is cut
// meanwhile, as a database commit would be; only its answer is lost. Every
// application is counted by call, so a POST applied twice shows. Each
// request takes work.
type restartLedger struct {
	work time.Duration
	// cut, when set, is taken and called by the next POST to be applied,
	// before it is applied: the backend goes down under it.
	cut atomic.Pointer[func()]

	mu      sync.Mutex
	answers map[string]string // by key; "" while in progress
	applied map[string]int    // by call
	keyed   int               // POSTs that arrived with a key
	unkeyed int               // POSTs that arrived without one
}

func newRestartLedger(work time.Duration) *restartLedger {
	return &restartLedger{work: work, answers: make(map[string]string), applied: make(map[string]int)}
}

func (l *restartLedger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.Method != http.MethodPost {
		time.Sleep(l.work)
		io.WriteString(w, "ok")
		return
	}
	key := r.Header.Get(keyHeader)
	l.mu.Lock()
	answer, seen := "", false
	if key == "" {
		l.unkeyed++
	} else {
		l.keyed++
		answer, seen = l.answers[key]
		if !seen {
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
		l.applied[r.Header.Get(callHeader)]++
		answer = fmt.Sprintf(`{"payment":%d}`, len(l.applied))
		if key != "" {
			l.answers[key] = answer
		}
		l.mu.Unlock()
	}
	io.WriteString(w, answer)
}

// twice returns the calls whose POST was applied more than once.
func (l *restartLedger) twice() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return overOnce(l.applied)
}

// restartBackend is a backend server on loopback that can be stopped and
// started again on the same address (or, should another socket have taken
// it meanwhile, on a new one: url follows).
type restartBackend struct {
	h        http.Handler
	target   atomic.Pointer[url.URL]
	handlers sync.WaitGroup // handlers running, which outlive a Close

	mu    sync.Mutex
	srv   *http.Server
	serve chan struct{} // closed when srv's Serve returns
}

func (b *restartBackend) url() *url.URL { return b.target.Load() }

// start listens on addr and serves there.
func (b *restartBackend) start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	b.target.Store(&url.URL{Scheme: "http", Host: ln.Addr().String()})
	srv := &http.Server{ErrorLog: discardLog, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
func (b *restartBackend) stop() {
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
func (b *restartBackend) restartUnder(l *restartLedger, down time.Duration) error {
	var once sync.Once
	stopped := make(chan struct{})
	stop := func() { once.Do(func() { b.stop(); close(stopped) }) }
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
	if err := b.start(b.url().Host); err != nil {
		return b.start("127.0.0.1:0")
	}
	return nil
}

// ---- fault 3: an HTTP/2 server resetting its connections ----

// abortListener records the connections it accepts, so that abort can
// reset them all.
type abortListener struct {
	net.Listener
	mu       sync.Mutex
	conns    []*net.TCPConn
	accepted int
}

func (l *abortListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c.(*net.TCPConn))
		l.accepted++
		l.mu.Unlock()
	}
	return c, err
}

// count returns the connections accepted so far.
func (l *abortListener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted
}

// abort resets every connection accepted so far and not yet aborted: a TCP
// RST, with no TLS close_notify and no GOAWAY, as when a server process
// dies or a load balancer drops its connections.
func (l *abortListener) abort() {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		c.SetLinger(0)
		c.Close()
	}
}

// ---- fault 4: a server admitting 20 requests a second ----

// rateLimited admits perSecond requests a second (a token bucket holding
// perSecond, full at the start) and answers the others 429 with
// Retry-After: 1. Every answer takes latency.
type rateLimited struct {
	perSecond float64
	latency   time.Duration

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	admitted int
	refused  int
}

func newRateLimited(perSecond float64, latency time.Duration) *rateLimited {
	return &rateLimited{perSecond: perSecond, latency: latency, tokens: perSecond, last: time.Now()}
}

func (s *rateLimited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	timer := time.NewTimer(s.latency)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-r.Context().Done():
		return
	}
	s.mu.Lock()
	now := time.Now()
	s.tokens = min(s.perSecond, s.tokens+s.perSecond*now.Sub(s.last).Seconds())
	s.last = now
	ok := s.tokens >= 1
	if ok {
		s.tokens--
		s.admitted++
	} else {
		s.refused++
	}
	s.mu.Unlock()
	if !ok {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many requests", http.StatusTooManyRequests)
		return
	}
	io.WriteString(w, "ok")
}
