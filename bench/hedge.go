package bench

import (
	"context"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/hashicorp/go-cleanhttp"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/h3retry"
)

// Tail is a heavy-tailed latency: each attempt a server receives takes Fast,
// or Slow with probability SlowShare, drawn independently of the others.
type Tail struct {
	Fast, Slow time.Duration
	SlowShare  float64
}

// Scaled returns t with both latencies multiplied by f.
func (t Tail) Scaled(f float64) Tail {
	return Tail{Fast: time.Duration(float64(t.Fast) * f), Slow: time.Duration(float64(t.Slow) * f), SlowShare: t.SlowShare}
}

// TailServer is a test server on the loopback interface that answers every
// request 200 after a latency drawn from its Tail, or sooner when the
// request is canceled (a hedge's loser), with the realistic answers to a
// 200 (Realistic) in turn. It counts the requests it receives, each second
// since it started, the connections it accepts and the requests canceled
// before their answer. NewTailServer serves HTTP/1.1 over TCP,
// NewTailServer3 HTTP/3 over UDP.
type TailServer struct {
	URL string

	srv      *httptest.Server // HTTP/1.1; nil over HTTP/3
	h3       *h3Server        // HTTP/3; nil over HTTP/1.1
	tail     atomic.Pointer[Tail]
	active   atomic.Int64 // requests being answered
	arrivals perSecond
	answered atomic.Uint64
	conns    atomic.Int64 // connections accepted
	canceled atomic.Int64 // requests canceled before their answer
	resets   atomic.Int64 // of those, over HTTP/3, streams the client reset with H3_REQUEST_CANCELLED

	mu  sync.Mutex
	rng *rand.Rand
}

// NewTailServer starts a TailServer with tail t, drawing from a generator
// seeded with seed. Close it when done.
func NewTailServer(t Tail, seed uint64) *TailServer {
	s := newTailServer(t, seed)
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	s.arrivals.start = time.Now()
	s.URL = s.srv.URL
	return s
}

func newTailServer(t Tail, seed uint64) *TailServer {
	s := &TailServer{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	s.tail.Store(&t)
	return s
}

// SetTail changes the latency of the requests the server receives from now
// on.
func (s *TailServer) SetTail(t Tail) { s.tail.Store(&t) }

func (s *TailServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Add(-1)
	s.arrivals.add(time.Now())
	t := s.tail.Load()
	s.mu.Lock()
	slow := s.rng.Float64() < t.SlowShare
	s.mu.Unlock()
	d := t.Fast
	if slow {
		d = t.Slow
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		takeOK(&s.answered).serve(w, http.StatusOK)
	case <-r.Context().Done():
		s.canceled.Add(1)
		if s.h3 != nil && resetByClient(w) {
			s.resets.Add(1)
		}
	}
}

// Arrivals returns the requests received in each second since the server
// started.
func (s *TailServer) Arrivals() []int { return s.arrivals.counts() }

// Conns returns the connections the server accepted: TCP connections over
// HTTP/1.1, QUIC connections over HTTP/3.
func (s *TailServer) Conns() int { return int(s.conns.Load()) }

// Canceled returns the requests the server received whose context ended
// before their answer: over HTTP/1.1, the client closed their connection;
// over HTTP/3, it reset their stream (or the connection closed).
func (s *TailServer) Canceled() int { return int(s.canceled.Load()) }

// Resets returns, over HTTP/3, the canceled requests whose stream the
// client reset with H3_REQUEST_CANCELLED, as an answer written to it
// found; 0 over HTTP/1.1.
func (s *TailServer) Resets() int { return int(s.resets.Load()) }

// perSecond counts events in each second since start.
type perSecond struct {
	start time.Time // set before the first add
	mu    sync.Mutex
	n     []int
}

func (p *perSecond) add(now time.Time) {
	sec := max(int(now.Sub(p.start)/time.Second), 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.n) <= sec {
		p.n = append(p.n, 0)
	}
	p.n[sec]++
}

func (p *perSecond) counts() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.n)
}

// countingBase counts the attempts sent through it, in the second their
// request began (see get), or else when they are sent.
type countingBase struct {
	http.RoundTripper
	attempts *perSecond
}

func (c countingBase) RoundTrip(req *http.Request) (*http.Response, error) {
	at, ok := req.Context().Value(startKey{}).(time.Time)
	if !ok {
		at = time.Now()
	}
	c.attempts.add(at)
	return c.RoundTripper.RoundTrip(req)
}

// startKey keys the time a request began in its context.
type startKey struct{}

// Close waits up to a second for the requests being answered (canceled
// losers on their way out), then shuts the server down.
func (s *TailServer) Close() {
	for deadline := time.Now().Add(time.Second); s.active.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if s.h3 != nil {
		s.h3.close()
		return
	}
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// A Hedger is one way of hedging requests: a library configured to send a
// copy of a slow request, or no hedging at all.
type Hedger struct {
	Name  string
	Delay time.Duration // the fixed hedge delay; 0 when adaptive or off
	// Wrap returns a RoundTripper that hedges through base and calls hedged
	// for each hedge it sends, with the delay the library reports for it:
	// retryhttp's RetryEvent.Delay (the hedge delays its timer waited since
	// the first attempt began: one, and one more each time a hedge was
	// refused and looked for again a delay later), failsafe-go's time
	// since the request began (it reports no delay).
	Wrap func(base http.RoundTripper, hedged func(delay time.Duration)) http.RoundTripper
}

// NoHedging is retryhttp with its default policy and no hedging.
func NoHedging() Hedger {
	return Hedger{Name: "no hedging", Wrap: func(base http.RoundTripper, _ func(time.Duration)) http.RoundTripper {
		return &retryhttp.Transport{Base: base}
	}}
}

// RetryhttpHedge is retryhttp hedging with h in its default policy, and its
// default budget paying for the hedges.
func RetryhttpHedge(name string, h retryhttp.Hedge) Hedger {
	return Hedger{Name: name, Delay: h.Delay, Wrap: func(base http.RoundTripper, hedged func(time.Duration)) http.RoundTripper {
		return &retryhttp.Transport{
			Base:   base,
			Policy: retryhttp.Policy{Hedge: &h},
			OnRetry: func(e *retryhttp.RetryEvent) {
				if e.Hedge {
					hedged(e.Delay)
				}
			},
		}
	}}
}

// FailsafeHedge is failsafe-go's hedge policy (one hedge) with a fixed delay,
// through its failsafehttp RoundTripper.
func FailsafeHedge(name string, delay time.Duration) Hedger {
	return Hedger{Name: name, Delay: delay, Wrap: func(base http.RoundTripper, hedged func(time.Duration)) http.RoundTripper {
		p := hedgepolicy.NewBuilderWithDelay[*http.Response](delay).
			OnHedge(func(e failsafe.ExecutionEvent[*http.Response]) { hedged(e.ElapsedTime()) }).
			Build()
		return failsafehttp.NewRoundTripper(base, p)
	}}
}

// FailsafeQuantileHedge is failsafe-go's adaptive hedge policy: a hedge
// after the given quantile of recent executions' durations, remembering
// about age of them, once threshold were seen.
func FailsafeQuantileHedge(name string, quantile float64, age, threshold uint) Hedger {
	return Hedger{Name: name, Wrap: func(base http.RoundTripper, hedged func(time.Duration)) http.RoundTripper {
		p := hedgepolicy.NewBuilderWithDelayQuantile[*http.Response](quantile, age, threshold).
			OnHedge(func(e failsafe.ExecutionEvent[*http.Response]) { hedged(e.ElapsedTime()) }).
			Build()
		return failsafehttp.NewRoundTripper(base, p)
	}}
}

// HedgeLoad is a closed loop of requests: Workers callers each send a GET
// and read its answer, then send the next, for Duration, to a TailServer
// with latency Tail, over HTTP/1.1 or HTTP/3 (Proto). If ShiftAt is
// positive, the server's latencies are multiplied by ShiftBy from that time
// on.
type HedgeLoad struct {
	Workers  int
	Duration time.Duration
	Tail     Tail
	ShiftAt  time.Duration
	ShiftBy  float64
	Seed     uint64
	Proto    Proto
}

// Proto is the protocol of a HedgeLoad: HTTP1 (its zero value) or HTTP3.
type Proto int

const (
	// HTTP1 is HTTP/1.1 over TCP: a TailServer of NewTailServer, and
	// go-cleanhttp's pooled transport keeping up to 64 idle connections.
	HTTP1 Proto = iota
	// HTTP3 is HTTP/3 over QUIC: a TailServer of NewTailServer3, and
	// h3retry.NewBase over an http3.Transport, which keeps one
	// connection per host.
	HTTP3
)

func (p Proto) String() string {
	switch p {
	case HTTP1:
		return "HTTP/1.1"
	case HTTP3:
		return "HTTP/3"
	}
	return "Proto(" + strconv.Itoa(int(p)) + ")"
}

// A Call is one request of a run: when it began, relative to the run's
// start, and how long it took until its answer was read.
type Call struct {
	Start, Latency time.Duration
}

// A HedgeMark is one hedge: when it was sent, relative to the run's start,
// and the delay its library reported.
type HedgeMark struct {
	At, Delay time.Duration
}

// HedgeResult is what one Hedger did under a HedgeLoad.
type HedgeResult struct {
	Name     string
	Delay    time.Duration // the Hedger's fixed delay, 0 if none
	Calls    []Call        // requests answered 200, in order of start
	Errors   int           // requests that failed
	Attempts []int         // attempts sent (to the base transport), by the second their request began
	Arrivals []int         // requests the server received, each second
	Hedges   []HedgeMark   // in order of time
	Conns    int           // connections the server accepted (TailServer.Conns)
	Canceled int           // requests the server received that were canceled before their answer (TailServer.Canceled)
	Resets   int           // of those, over HTTP/3, streams reset with H3_REQUEST_CANCELLED (TailServer.Resets)
}

// Run sends the load through h and returns what happened. Over HTTP/1.1
// the base transport is go-cleanhttp's pooled transport keeping up to 64
// idle connections, so that neither pooling nor dialing limits the
// workers; over HTTP/3 it is h3retry.NewBase over an http3.Transport. A
// fresh one and a fresh server serve each run.
func (l HedgeLoad) Run(h Hedger) HedgeResult {
	var (
		srv       *TailServer
		base      http.RoundTripper
		closeBase func()
	)
	switch l.Proto {
	case HTTP3:
		srv = NewTailServer3(l.Tail, l.Seed)
		tr := srv.Client3()
		base, closeBase = h3retry.NewBase(tr), func() { _ = tr.Close() }
	default:
		srv = NewTailServer(l.Tail, l.Seed)
		tr := cleanhttp.DefaultPooledTransport()
		tr.MaxIdleConnsPerHost = 64
		base, closeBase = tr, tr.CloseIdleConnections
	}
	defer closeBase()

	var (
		mu     sync.Mutex
		hedges []HedgeMark
	)
	start := srv.arrivals.start
	attempts := &perSecond{start: start}
	client := &http.Client{Transport: h.Wrap(countingBase{base, attempts}, func(d time.Duration) {
		at := time.Since(start)
		mu.Lock()
		hedges = append(hedges, HedgeMark{At: at, Delay: d})
		mu.Unlock()
	})}
	if l.ShiftAt > 0 {
		shift := time.AfterFunc(l.ShiftAt, func() { srv.SetTail(l.Tail.Scaled(l.ShiftBy)) })
		defer shift.Stop()
	}
	calls := make([][]Call, l.Workers)
	errs := make([]int, l.Workers)
	var wg sync.WaitGroup
	for w := range l.Workers {
		wg.Go(func() {
			for {
				t0 := time.Now()
				if t0.Sub(start) >= l.Duration {
					return
				}
				if get(client, srv.URL, t0) {
					calls[w] = append(calls[w], Call{Start: t0.Sub(start), Latency: time.Since(t0)})
				} else {
					errs[w]++
				}
			}
		})
	}
	wg.Wait()
	srv.Close()

	r := HedgeResult{Name: h.Name, Delay: h.Delay, Attempts: attempts.counts(), Arrivals: srv.Arrivals(),
		Conns: srv.Conns(), Canceled: srv.Canceled(), Resets: srv.Resets()}
	for w := range calls {
		r.Calls = append(r.Calls, calls[w]...)
		r.Errors += errs[w]
	}
	slices.SortFunc(r.Calls, func(a, b Call) int { return int(a.Start - b.Start) })
	mu.Lock()
	r.Hedges = hedges
	mu.Unlock()
	return r
}

// get sends a GET to url, begun at start, and reads the answer; it reports
// whether that was a 200.
func get(c *http.Client, url string, start time.Time) bool {
	ctx := context.WithValue(context.Background(), startKey{}, start)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err == nil && resp.StatusCode == http.StatusOK
}

// Latencies returns the latencies of the calls that began in [from, to),
// sorted.
func (r HedgeResult) Latencies(from, to time.Duration) []time.Duration {
	var ls []time.Duration
	for _, c := range r.Calls {
		if c.Start >= from && c.Start < to {
			ls = append(ls, c.Latency)
		}
	}
	slices.Sort(ls)
	return ls
}

// Extra returns the attempts sent beyond one per request: attempts ÷
// requests - 1, failed requests included.
func (r HedgeResult) Extra() float64 { return r.extra(r.Attempts) }

// ExtraReceived returns the requests the server received beyond one per
// request: a hedge canceled before it was written never arrives.
func (r HedgeResult) ExtraReceived() float64 { return r.extra(r.Arrivals) }

func (r HedgeResult) extra(counts []int) float64 {
	n := len(r.Calls) + r.Errors
	if n == 0 {
		return 0
	}
	var sum int
	for _, c := range counts {
		sum += c
	}
	return float64(sum)/float64(n) - 1
}

// Quantile returns the q-quantile of sorted by the nearest-rank method: the
// smallest value that at least q of the values do not exceed. It returns 0
// for no values.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// A Second sums up one second of a run.
type Second struct {
	Requests int           // requests that began in it
	Attempts int           // attempts those requests sent, hedges included
	Hedges   int           // hedges sent in it
	P99      time.Duration // of the requests that began in it
	Delay    time.Duration // median delay of the hedges sent in it; 0 if none
}

// Extra returns the second's attempts beyond one per request.
func (s Second) Extra() float64 {
	if s.Requests == 0 {
		return 0
	}
	return float64(s.Attempts)/float64(s.Requests) - 1
}

// Seconds sums up the run second by second, for n seconds.
func (r HedgeResult) Seconds(n int) []Second {
	out := make([]Second, n)
	for i := range out {
		from := time.Duration(i) * time.Second
		ls := r.Latencies(from, from+time.Second)
		out[i].Requests = len(ls)
		out[i].P99 = Quantile(ls, 0.99)
		if i < len(r.Attempts) {
			out[i].Attempts = r.Attempts[i]
		}
		var ds []time.Duration
		for _, h := range r.Hedges {
			if h.At >= from && h.At < from+time.Second {
				ds = append(ds, h.Delay)
			}
		}
		slices.Sort(ds)
		out[i].Hedges = len(ds)
		out[i].Delay = Quantile(ds, 0.5)
	}
	return out
}

// DelayFor returns the fixed hedge delay that would hedge about share of
// the requests of unhedged, a run without hedging: the (1 - share)
// quantile of its latencies, to a tenth of a millisecond. A policy hedging
// every request still unanswered after it sends as many hedges as share of
// requests, on the same load.
func DelayFor(unhedged HedgeResult, share float64) time.Duration {
	d := Quantile(unhedged.Latencies(0, math.MaxInt64), 1-share)
	return d.Round(100 * time.Microsecond)
}

// Merge returns the results of runs of one Hedger as one: their calls,
// errors, attempts, arrivals and hedges together, with times relative to
// the start of each run, and the sums of their connections, canceled
// requests and resets.
func Merge(rs ...HedgeResult) HedgeResult {
	if len(rs) == 0 {
		return HedgeResult{}
	}
	m := HedgeResult{Name: rs[0].Name, Delay: rs[0].Delay}
	add := func(sum, n []int) []int {
		for i, v := range n {
			if i == len(sum) {
				sum = append(sum, 0)
			}
			sum[i] += v
		}
		return sum
	}
	for _, r := range rs {
		m.Calls = append(m.Calls, r.Calls...)
		m.Errors += r.Errors
		m.Attempts = add(m.Attempts, r.Attempts)
		m.Arrivals = add(m.Arrivals, r.Arrivals)
		m.Hedges = append(m.Hedges, r.Hedges...)
		m.Conns += r.Conns
		m.Canceled += r.Canceled
		m.Resets += r.Resets
	}
	slices.SortStableFunc(m.Calls, func(a, b Call) int { return int(a.Start - b.Start) })
	slices.SortStableFunc(m.Hedges, func(a, b HedgeMark) int { return int(a.At - b.At) })
	return m
}
