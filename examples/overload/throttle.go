package main

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

// The overload scenario, in real time before scaling: a dependency that
// serves capacity requests a second is offered hotRate a second for hotFor,
// then coolRate a second for coolFor.
const (
	capacity = 100
	hotRate  = 300
	hotFor   = 60 * time.Second
	coolRate = 80
	coolFor  = 20 * time.Second
)

// throttleWindow is a Throttle's Window when it is zero: the window that
// the runs scale with the load.
const throttleWindow = 10 * time.Second

// loadPhase is the request header that tells the dependency which phase
// of the load a call (and each of its attempts) belongs to.
const loadPhase = "X-Load-Phase"

// An overloadRow is what one client policy did to the overloaded
// dependency.
type overloadRow struct {
	Throttle bool // Policy.Throttle set, its window scaled with the run

	Hot      time.Duration // how long the 300/s phase lasted (longer than planned if Lag moved it)
	Window   time.Duration // the throttle's window (scaled)
	Offered  int           // calls made at 300/s
	Received int           // attempts of those calls the dependency received
	Accepted int           // and answered 200
	Served   int           // requests of any phase the dependency accepted in the slots within the 300/s phase
	ServedIn time.Duration // how long those slots last
	Rejected int           // calls never sent: throttling rejected their first attempt
	Denied   uint64        // attempts throttling rejected, retries included (Stats.Throttled)

	// Lag is the longest a call started after its time: how long a busy
	// machine held the load up at once.
	Lag time.Duration

	// Calls made at 80/s in the first throttle window after the load
	// dropped, and after it; and how many of each got a 200.
	EarlyCalls, EarlyOK int
	LateCalls, LateOK   int
}

// Stalled reports whether the machine held the load up long enough to
// skew the figures: for longer than a slot of the dependency and than a
// quarter of the throttle's window.
func (r *overloadRow) Stalled() bool { return r.Lag > max(slot, r.Window/4) }

// Ratio returns what the dependency received per request it accepted.
func (r *overloadRow) Ratio() float64 { return float64(r.Received) / max(float64(r.Accepted), 1) }

// Goodput returns the requests per second the dependency accepted while
// it was offered 300/s.
func (r *overloadRow) Goodput() float64 { return float64(r.Served) / r.ServedIn.Seconds() }

// runOverload offers the load of the scenario, with time running
// cfg.Scale times faster, to a new dependency through one Transport with
// the default policy, and with throttling if row.Throttle.
func runOverload(row *overloadRow, cfg config) {
	scale := cfg.Scale
	row.Window = time.Duration(float64(throttleWindow) / scale)

	start := time.Now()
	dep := newDependency(capacity, start)
	srv := cfg.newServer(dep)
	defer srv.Close()

	tr := &retryhttp.Transport{Base: cfg.newBase()}
	if row.Throttle {
		tr.Policy.Throttle = &retryhttp.Throttle{Window: row.Window}
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	var wg sync.WaitGroup
	hot := load{client: client, url: srv.URL, phase: "hot", perSecond: hotRate}
	drop := hot.offer(&wg, start, time.Duration(float64(hotFor)/scale))
	cool := load{client: client, url: srv.URL, phase: "cool", perSecond: coolRate}
	cool.offer(&wg, drop, time.Duration(float64(coolFor)/scale))
	wg.Wait()

	row.Hot = drop.Sub(start)
	row.Lag = max(hot.lag, cool.lag)
	row.Offered = len(hot.calls)
	row.Received, row.Accepted = dep.counts("hot")
	row.ServedIn = row.Hot.Truncate(slot)
	row.Served = dep.servedBefore(row.ServedIn)
	row.Denied = tr.Stats().Throttled
	for _, c := range hot.calls {
		if c.throttled {
			row.Rejected++
		}
	}
	for _, c := range cool.calls {
		if c.start < row.Window {
			row.EarlyCalls++
			row.EarlyOK += c.ok
		} else {
			row.LateCalls++
			row.LateOK += c.ok
		}
	}
}

// load is one phase of the load: GETs through client, evenly spaced.
type load struct {
	client    *http.Client
	url       string
	phase     string // the value of its requests' loadPhase field
	perSecond int

	calls []callOutcome // complete once the WaitGroup given to offer is done
	lag   time.Duration // the longest a call started after its time
}

// callOutcome is how one call of the load went.
type callOutcome struct {
	start     time.Duration // since its phase began
	ok        int           // 1 if it got a 200
	throttled bool          // its first attempt was rejected in the client
}

// offer starts l.perSecond calls a second for d from begin, each in its
// own goroutine counted in wg, and returns when the phase ends. Calls a
// little late are sent at once to catch up; a stall longer than catchUp
// (the machine was busy) moves the rest of the schedule instead, rather
// than sending the calls it missed in a burst the scenario does not have:
// the phase then ends that much later.
func (l *load) offer(wg *sync.WaitGroup, begin time.Time, d time.Duration) (end time.Time) {
	n := int(d.Seconds() * float64(l.perSecond))
	l.calls = make([]callOutcome, n)
	var shift time.Duration // how far stalls moved the schedule
	for i := range l.calls {
		at := begin.Add(shift + d*time.Duration(i)/time.Duration(n))
		time.Sleep(time.Until(at))
		now := time.Now()
		late := now.Sub(at)
		l.lag = max(l.lag, late)
		if late > catchUp {
			shift += late
		}
		o := &l.calls[i]
		o.start = now.Sub(begin)
		wg.Go(func() { l.call(o) })
	}
	return begin.Add(shift + d)
}

// catchUp is how late the load may fall behind its schedule and still
// catch up: half a slot of the dependency.
const catchUp = slot / 2

// call makes one call of the load and notes its outcome in o.
func (l *load) call(o *callOutcome) {
	req, err := http.NewRequest(http.MethodGet, l.url, nil)
	if err != nil {
		return
	}
	req.Header.Set(loadPhase, l.phase)
	resp, err := l.client.Do(req)
	if err != nil {
		var e *retryhttp.Error
		o.throttled = errors.As(err, &e) && e.Reason == retryhttp.ReasonThrottled
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		o.ok = 1
	}
}

// slot is the dependency's accounting period: it serves capacity/10
// requests in each 100 ms and answers 503 to the rest.
const slot = 100 * time.Millisecond

// dependency is a server with a fixed capacity that answers 503 beyond
// it. It counts the requests it receives and accepts by load phase.
type dependency struct {
	perSlot int

	mu       sync.Mutex
	start    time.Time
	slot     int64 // the current slot, counted from start
	inSlot   int   // requests received in it
	received map[string]int
	accepted map[string]int
	served   []int // requests accepted, by slot
}

func newDependency(perSecond int, start time.Time) *dependency {
	return &dependency{perSlot: perSecond * int(slot) / int(time.Second), start: start,
		received: map[string]int{}, accepted: map[string]int{}}
}

func (d *dependency) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	phase := r.Header.Get(loadPhase)
	d.mu.Lock()
	if s := int64(time.Since(d.start) / slot); s != d.slot {
		d.slot, d.inSlot = s, 0
	}
	d.inSlot++
	ok := d.inSlot <= d.perSlot
	d.received[phase]++
	if ok {
		d.accepted[phase]++
		for int64(len(d.served)) <= d.slot {
			d.served = append(d.served, 0)
		}
		d.served[d.slot]++
	}
	d.mu.Unlock()
	if !ok {
		http.Error(w, "over capacity", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok\n")
}

// counts returns the requests of phase received and accepted.
func (d *dependency) counts(phase string) (received, accepted int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.received[phase], d.accepted[phase]
}

// servedBefore returns the requests the dependency accepted in the slots
// that end by t after its start.
func (d *dependency) servedBefore(t time.Duration) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for i, c := range d.served {
		if time.Duration(i+1)*slot <= t {
			n += c
		}
	}
	return n
}
