// Package budget is the machinery of retryhttp.Budget, kept per host in an
// account: the host's credit, which pays for retries; the requests to the
// host in flight and the recent failures of other requests, which tell a
// retry whether to wait; and the host's line, where such retries wait until
// the host's successes earn them credit, or a silence lets one go as a probe.
//
// Time enters every decision as a parameter (now), as in
// golang.org/x/time/rate, so a test drives an account with the times it
// chooses. A retry waiting in line sleeps on its own goroutine's clock.Clock
// (the real clock, a testing/synctest bubble's or a clock.Virtual): the one
// at the head of its line also wakes when its probe is due.
//
// A nil *Budget, and its nil *Account, allow every retry at no cost. A Budget
// is safe for simultaneous use.
package budget

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/hosts"
)

// The size of the zero Budget, which retryhttp's zero Budget has too.
const (
	DefaultRatio  = 0.55 // retries earned per success
	DefaultCredit = 10   // retries of credit held at most, and at the start
)

// failureWindow is how recent another request's failure of a host must be to
// hold a retry to it; refill is how long an empty credit takes to fill.
const (
	failureWindow = 10 * time.Second
	refill        = 10 * time.Second
)

// A Budget holds an account for each host its requests go to. The zero Budget
// has the default size; Size sets another before first use.
type Budget struct {
	ratio, credit int64 // units earned per success, and held at most, when sized
	sized         bool  // set by Size; else the defaults
	ids           atomic.Uint64

	// accounts: past hosts.Most hosts, those with no request in flight
	// are forgotten, oldest first (and start afresh): see hosts.Registry.
	accounts hosts.Registry[Account, *Account]

	// mu guards every account's line, failures and refill.
	mu sync.Mutex
}

// New returns a budget of the size that Size sets.
func New(ratio float64, credit int) *Budget {
	b := new(Budget)
	b.Size(ratio, credit)
	return b
}

// Size makes each host's credit hold up to credit retries (and start with
// them all) and earn ratio of a retry for each success. A ratio below zero
// (or NaN) counts as zero, above 1000 as 1000, and is kept to a billionth;
// a credit below zero counts as zero, above a million as a million. It
// must be called before b's first use, if at all.
func (b *Budget) Size(ratio float64, credit int) {
	if !(ratio > 0) {
		ratio = 0
	}
	ratio = min(ratio, 1000)
	credit = min(max(credit, 0), 1_000_000)
	b.ratio, b.credit, b.sized = int64(math.Round(ratio*unit)), int64(credit)*unit, true
}

// size returns the budget's parameters in units: those that Size
// set, or the defaults.
func (b *Budget) size() (ratio, credit int64) {
	if !b.sized {
		return DefaultRatio * unit, DefaultCredit * unit
	}
	return b.ratio, b.credit
}

// Params returns the budget's ratio and credit: those that Size set, or the
// defaults.
func (b *Budget) Params() (ratio float64, credit int) {
	r, c := b.size()
	return float64(r) / unit, int(c / unit)
}

// An Account is one host's part of a Budget. A request takes its host's
// account with Start, reports its attempts' outcomes to it, asks it for each
// retry, and Ends it.
type Account struct {
	b *Budget

	active  atomic.Int32 // requests in flight (started, not ended); below 0: forgotten
	spent   atomic.Int64 // units of credit spent: 0 is full
	failing atomic.Bool  // the last outcome reported was a failure
	waiting atomic.Int32 // retries in line

	// Guarded by b.mu.
	refilled  int64      // when the credit was last refilled, on the monotonic scale
	fails     [2]failure // the last failure of each of the two requests that failed last
	lastHeard int64      // the last outcome reported, or retry let go, on the monotonic scale
	line      []*Ticket  // first in, first out
}

// failure is a request's failure of a host.
type failure struct {
	at int64  // when, on the monotonic scale
	by uint64 // the request's id
}

// Start reports a request to host that begins, and returns the host's account.
// The request must End it when it ends. A nil Budget returns nil.
func (b *Budget) Start(host string) *Account {
	if b == nil {
		return nil
	}
	for {
		if acc := b.accounts.Get(host, b.init); acc.Enter() {
			return acc
		}
		// Forgotten meanwhile: the registry has a new account, or will.
	}
}

// init sets a new account of b up.
func (b *Budget) init(acc *Account) { acc.b = b }

// Forget reports whether acc, which no request uses, may be forgotten, and
// if so marks it forgotten: no request enters it again.
func (acc *Account) Forget() bool {
	return acc.waiting.Load() == 0 && acc.active.CompareAndSwap(0, forgotten)
}

// forgotten is the count of requests in flight of an account taken out of its
// Budget: far enough below zero that no number of requests entering it
// at once brings it back up.
const forgotten = math.MinInt32 / 2

// Enter counts a request in flight, unless the account was forgotten: the
// request then takes its host's account again (Start). A request that
// entered must End.
func (acc *Account) Enter() bool {
	if acc.active.Add(1) > 0 {
		return true
	}
	acc.active.Add(-1)
	return false
}

// End reports that a request that Started the account has ended.
func (acc *Account) End() {
	if acc != nil {
		acc.active.Add(-1)
	}
}

// A Decision is what becomes of a retry that an Account was asked for.
type Decision uint8

// What becomes of a retry.
const (
	Go     Decision = iota // it goes at its own time, paid for
	Wait                   // it waits in line (Account.Wait)
	Refuse                 // it is refused: its request ends
)

// Retry decides the retry of request id, whose attempt to the account's
// host failed, at now. It goes, paid for, if the credit pays for it and no
// other request holds it back (another request to the host is in flight,
// and another request failed the host in the last 10 s, with no success of
// the host since). Otherwise it waits in line if another request is in
// flight, whose outcome will tell how the host is; with nothing else in
// flight, no outcome is coming, and it is refused.
func (acc *Account) Retry(now time.Time, id uint64) Decision {
	if acc == nil {
		return Go
	}
	b := acc.b
	b.mu.Lock()
	defer b.mu.Unlock()
	others := acc.active.Load() > 1
	if !(others && acc.otherFailedLocked(id, now)) && acc.spendLocked(now) {
		return Go
	}
	if others {
		return Wait
	}
	return Refuse
}

// Failure reports that an attempt of request *id to the account's host failed
// at now: the host failed it, or did not respond. (A response that says when
// to come back, Retry-After, is no failure; the caller does not report it.)
// It gives *id the request's id if it has none yet.
func (acc *Account) Failure(now time.Time, id *uint64) {
	if acc == nil {
		return
	}
	b := acc.b
	if *id == 0 {
		*id = b.ids.Add(1)
	}
	m := clock.Mono(now)
	b.mu.Lock()
	defer b.mu.Unlock()
	if acc.fails[0].by != *id {
		acc.fails[1] = acc.fails[0]
	}
	acc.fails[0] = failure{at: m, by: *id}
	acc.lastHeard = max(acc.lastHeard, m)
	acc.failing.Store(true)
}

// otherFailedLocked reports whether a request other than id failed the
// host within failureWindow before now, and since its last success.
// Requires b.mu held.
func (acc *Account) otherFailedLocked(id uint64, now time.Time) bool {
	f := acc.fails[0]
	if f.by == id {
		f = acc.fails[1]
	}
	return f.by != 0 && clock.Mono(now)-f.at < int64(failureWindow)
}

// Success reports an attempt to the account's host whose outcome is not
// retried: the host responded. A retry (or hedge) that paid for itself gives
// its retry of credit back (paid); any other success earns the budget's
// ratio of one. When the host failed last or retries wait, the success is
// recorded at clk.Now(): the host is up, and the oldest retries in line go,
// as many as the credit pays for. Otherwise it takes no lock and reads no
// clock.
func (acc *Account) Success(clk clock.Clock, paid bool) {
	if acc == nil {
		return
	}
	if paid {
		acc.earn(unit)
	} else {
		ratio, _ := acc.b.size()
		acc.earn(ratio)
	}
	if acc.waiting.Load() > 0 || acc.failing.Load() {
		acc.recover(clk.Now())
	}
}

// Spend spends one retry of the host's credit at now for an attempt that
// follows no failure (a hedge), and reports whether there was that much.
func (acc *Account) Spend(now time.Time) bool {
	if acc == nil {
		return true
	}
	acc.b.mu.Lock()
	defer acc.b.mu.Unlock()
	return acc.spendLocked(now)
}

// Refund gives back a retry that Retry or Spend paid for but that was never
// sent.
func (acc *Account) Refund() {
	if acc != nil {
		acc.earn(unit)
	}
}
