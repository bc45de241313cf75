package retryhttp

import (
	"math"
	"net/http"
	"sync/atomic"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/hostgate"
)

// host is what a Transport knows of one host (a URL's host, port
// included), in its table of hosts (Transport.table): the state of its
// gates (throttling, the hedge delay and fraction), its account in the
// budget, and its counters if it is tracked (TrackHosts). A request looks
// its host up once, as it starts.
//
// The table forgets by one rule (hosts.Registry), the Budget's too: past
// 1024 hosts, those with no request in flight are forgotten, oldest first,
// down to 512; one that comes back starts afresh. The account is the
// budget's: a Transport that forgot the host finds it again in the budget.
type host struct {
	gate     hostgate.Host
	hold     hostHold                       // what the host said of waiting (Policy.HostWait)
	active   atomic.Int32                   // requests in flight; below zero: forgotten
	account  atomic.Pointer[budget.Account] // taken last; taken again once the budget forgot it
	counters *counters                      // if tracked, else nil
	t        *Transport
}

// hostName returns the name of the host req goes to: its URL's host, port
// included.
func hostName(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	return req.URL.Host
}

// enterHost counts req, and counts it in flight to its host, which it
// returns from t's table; the request must leave it. A host forgotten as
// the request entered it is looked up again: the table has a new one.
func (t *Transport) enterHost(req *http.Request) *host {
	name := hostName(req)
	for {
		h := t.table.Get(name, t.initHost)
		if h.active.Add(1) > 0 {
			h.count(nRequests)
			return h
		}
		h.active.Add(-1)
	}
}

// leave reports that a request that entered h has ended.
func (h *host) leave() { h.active.Add(-1) }

// initHost sets up a host new to t's table: it is tracked while fewer than
// TrackHosts hosts are.
func (t *Transport) initHost(h *host) {
	h.t = t
	if t.TrackHosts > 0 && t.tracked.Add(1) <= int64(t.TrackHosts) {
		h.counters = new(counters)
	} else if t.TrackHosts > 0 {
		t.tracked.Add(-1)
	}
}

// Forget reports whether h may be forgotten, no request being in flight
// to it, and if so marks it forgotten. A forgotten host's counters leave
// room for another's.
func (h *host) Forget() bool {
	if !h.active.CompareAndSwap(0, math.MinInt32/2) { // no number of requests entering brings it back up
		return false
	}
	if h.counters != nil {
		h.t.tracked.Add(-1)
	}
	return true
}

// takeAccount enters req, a request to h, in budget b, and returns h's
// account in it; nil when b is (no budget).
func (h *host) takeAccount(b *budget.Budget, req *http.Request) *budget.Account {
	if b == nil {
		return nil
	}
	if a := h.account.Load(); a != nil && a.Enter() {
		return a
	}
	a := b.Start(hostName(req))
	h.account.Store(a)
	return a
}

// count adds one to counter i of the Transport and of h, if tracked.
func (h *host) count(i int) {
	h.t.stats.n[i].Add(1)
	if h.counters != nil {
		h.counters.n[i].Add(1)
	}
}

// countN adds d to counter i of the Transport and of h, if tracked.
func (h *host) countN(i int, d uint64) {
	h.t.stats.n[i].Add(d)
	if h.counters != nil {
		h.counters.n[i].Add(d)
	}
}

// countGiveUp counts a request to h given up on for reason r.
func (h *host) countGiveUp(r Reason) {
	h.t.stats.giveUps[r].Add(1)
	if h.counters != nil {
		h.counters.giveUps[r].Add(1)
	}
}
