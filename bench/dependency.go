package bench

import (
	"net/http"
	"slices"
	"sync"
	"time"
)

// A dependency is the in-memory service the scenarios send their calls to.
// It answers 503 to an attempt that arrives while it is down, or beyond its
// capacity, and 200 to the others, after its latency. It records every
// arrival: when, which call and which attempt of its call it was, and
// whether it was served. Calls are told apart by their URL path, which
// every library keeps on every attempt. Its answers are the realistic ones
// (realisticOK, realisticFailed), in turn, each with a body of its own;
// their headers are shared, only read.
type dependency struct {
	start    time.Time
	latency  time.Duration
	down     func(since time.Duration) bool // whether it fails every attempt at since
	capacity int                            // attempts it serves per slot; 0: no limit
	slot     time.Duration                  // the slices of time capacity counts in: Slot unless set before use

	mu       sync.Mutex
	arrivals []arrival
	tries    map[string]int // attempts so far, by call
	slots    map[time.Duration]int
	answered [2]int // realistic answers given: 200, and 503
}

// forever is a time after every arrival.
const forever = time.Duration(1<<63 - 1)

// Slot is the width of the time slices a dependency's capacity is counted
// in, unless set otherwise.
const Slot = 10 * time.Millisecond

// An arrival is one attempt received by a dependency.
type arrival struct {
	at      time.Duration // since the dependency's start
	attempt int           // 1 for its call's first
	call    string        // its call's URL path
	served  bool          // answered 200
}

func newDependency(latency time.Duration, down func(time.Duration) bool, capacity int) *dependency {
	return &dependency{start: time.Now(), latency: latency, down: down, capacity: capacity, slot: Slot,
		tries: make(map[string]int), slots: make(map[time.Duration]int)}
}

func (d *dependency) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	d.mu.Lock()
	at := time.Since(d.start)
	call := req.URL.Path
	d.tries[call]++
	ok := !d.down(at)
	if ok && d.capacity > 0 {
		slot := at / d.slot
		d.slots[slot]++
		ok = d.slots[slot] <= d.capacity
	}
	d.arrivals = append(d.arrivals, arrival{at: at, attempt: d.tries[call], call: call, served: ok})
	status, answers, k := http.StatusOK, realisticOK, 0
	if !ok {
		status, answers, k = http.StatusServiceUnavailable, realisticFailed, 1
	}
	a := &answers[d.answered[k]%len(answers)]
	d.answered[k]++
	d.mu.Unlock()
	time.Sleep(d.latency)
	resp := new(http.Response)
	a.fill(resp, status, req, &body{b: a.body})
	return resp, nil
}

// sorted returns the arrivals in the order they came.
func (d *dependency) sorted() []arrival {
	d.mu.Lock()
	a := slices.Clone(d.arrivals)
	d.mu.Unlock()
	slices.SortStableFunc(a, func(x, y arrival) int { return int(x.at - y.at) })
	return a
}

// A peak is the busiest window of arrivals.
type peak struct {
	n       int           // arrivals in it
	at      time.Duration // its start, since the dependency's start
	retries int           // arrivals in it that were not their call's first
}

// peak returns the busiest window of length w among the arrivals in
// [from, to), counting only those: windows slide from arrival to arrival,
// so no burst is split between two fixed slices. Of equally busy windows,
// the first wins.
func (d *dependency) peak(from, to, w time.Duration) peak {
	var a []arrival
	for _, x := range d.sorted() {
		if x.at >= from && x.at < to {
			a = append(a, x)
		}
	}
	var best peak
	j := 0
	for i := range a {
		for j < len(a) && a[j].at < a[i].at+w {
			j++
		}
		if j-i > best.n {
			best = peak{n: j - i, at: a[i].at}
		}
	}
	for _, x := range a {
		if x.at >= best.at && x.at < best.at+w && x.attempt > 1 {
			best.retries++
		}
	}
	return best
}

// most returns the most attempts any one call made.
func (d *dependency) most() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, t := range d.tries {
		n = max(n, t)
	}
	return n
}

// count returns the arrivals in [from, to).
func (d *dependency) count(from, to time.Duration) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, x := range d.arrivals {
		if x.at >= from && x.at < to {
			n++
		}
	}
	return n
}
