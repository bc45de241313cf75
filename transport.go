package retryhttp

import (
	"cmp"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-cleanhttp"

	"github.com/retryhttp/retryhttp/internal/budget"
	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/hosts"
	"github.com/retryhttp/retryhttp/internal/mark"
	"github.com/retryhttp/retryhttp/internal/recent"
)

// Transport is an http.RoundTripper that retries failed requests safely.
// Its zero value is ready to use and retries with the defaults of Policy:
//
//	client := &http.Client{Transport: &retryhttp.Transport{}}
//
// The exported fields are read on first use and must not change after it.
// A Transport is safe for simultaneous use by multiple goroutines.
//
// A Transport keeps what it learns of each host (URL host, port included:
// throttling's counts, hedging's latencies and counts, the host's counters
// if tracked) in one table. Past 1024 hosts, the hosts with no request in
// flight are forgotten, oldest first, down to 512; one that comes back
// starts afresh. A Budget keeps its accounts by the same rule.
//
// In testing/synctest bubbles, use a Transport in one bubble only (or
// outside any), as net/http's: a bubble's clock reads another time than the
// real one, and a Transport used in and out of bubbles keeps working but
// judges its hosts from times that do not match.
type Transport struct {
	// Base sends each attempt. Nil means one pooled transport from
	// go-cleanhttp, made on first use and kept for the Transport's life.
	//
	// Retries never multiply across layers. A Base that is itself a
	// Transport sends every attempt once: only the one above it retries. A
	// Transport reached inside an attempt some other way (an SDK's client
	// called with the caller's context) sends once from the second attempt
	// of the Transport above it on; inside the first it may retry, and the
	// Transport above then returns that result as it is (ReasonNoRetries).
	//
	// A Base whose errors the Transport cannot classify may classify them
	// itself: an error with a method RetryClass() (transient, nothingSent
	// bool), found by errors.As, says whether another attempt may help and
	// whether the server cannot have processed the request (which makes any
	// request safe to send again). A certificate failure in the chain is
	// never retried. The h3retry module's base has such errors.
	Base http.RoundTripper

	// Policy applies to every request; an entry of Hosts, and a policy
	// given to WithPolicy, refine it (see Policy for how they layer).
	Policy Policy

	// Hosts holds per-host policies, each refining Policy: a field an entry
	// leaves zero takes Policy's value. Keys are "host", "host:port" or
	// "*.suffix" (any subdomain of suffix, not suffix itself; such a key
	// takes no port and matches every port), case-insensitive, a trailing
	// dot ignored. The most specific match wins: host:port, then host, then
	// the longest suffix. A request without a port matches "host:port" keys
	// with its scheme's default port.
	Hosts map[string]Policy

	// TrackHosts, if positive, keeps Stats per host (URL host, port
	// included) for up to that many of the hosts the Transport keeps, the
	// first seen: a host it forgets leaves room for another. HostStats
	// returns them. Zero keeps none, at no cost.
	TrackHosts int

	// Budget bounds the retries of all requests through this Transport; it
	// may be shared with other Transports. Nil means a budget of the default
	// size owned by this Transport; UnlimitedBudget() turns budgeting off.
	Budget *Budget

	// OnRetry, if set, is called on the request's goroutine before each
	// retry's wait, and before each hedge is sent. Should the caller's
	// context end during the wait, that retry is not sent and OnGiveUp
	// reports ReasonCanceled or ReasonDeadline.
	OnRetry func(*RetryEvent)

	// PrepareRetry, if set, is called on the request's goroutine before each
	// retry or hedge is sent, with its request: a copy of the caller's whose
	// header and URL the hook may change (refresh an expired token, sign
	// again with a new timestamp), but not its Body; AttemptNumber of its
	// context gives its number (2 for the first retry). The caller's request
	// and the other attempts are never affected. An error ends the request
	// with an *Error (ReasonNotTransient) that wraps it, the retry not sent;
	// for a hedge (before OnRetry), no more hedges go, and those sent go on.
	PrepareRetry func(*http.Request) error

	// OnGiveUp, if set, is called when a request ends with a failure: an
	// error, or a retryable status that was not retried (with MaxAttempts 1,
	// reason ReasonNoRetries). It runs on the request's goroutine before
	// RoundTrip returns. A request inside another Transport's attempt passes
	// straight through and reports nothing: the Transport above decides.
	OnGiveUp func(*GiveUpEvent)

	// Logger, if set, receives a debug record for each retry (not for a
	// hedge: OnRetry sees those), an info record for each give-up, and a
	// warning when the budget holds retries, or throttling rejects requests,
	// at most once every 10 s each, with the Transport's counts. Records
	// carry OpenTelemetry's attribute names, and URLs without userinfo or
	// query values. Nil logs nothing.
	Logger *slog.Logger

	once            sync.Once
	base            http.RoundTripper
	policy          *policy
	hosts           hosts.Table[*policy]
	accounts        *budget.Budget // nil: unlimited
	clock           clock.Clock    // the real clock, unless Base is a simulation's (clock.Source)
	realClock       bool           // clock is clock.Real
	epoch           time.Time      // the clock's time at first use, unless realClock: see monoAt
	rand            func() float64 // uniform in [0, 1); tests set it before first use
	baseIsTransport bool           // so every attempt carries its number: the one beneath sends it once
	stats           counters
	table           hosts.Registry[host, *host]
	tracked         atomic.Int64 // hosts of table with counters (TrackHosts)
	recent          recent.Keys  // the callers' idempotency keys sent lately
	warnedBudget    atomic.Int64 // when the Logger last heard of the budget, on the monotonic scale
	warnedThrottle  atomic.Int64 // when it last heard of throttling, on that scale
}

// NewClient returns a copy of c (a new http.Client if c is nil) whose
// transport retries with policy p through c's transport, or if nil through
// go-cleanhttp's pooled one, as for a nil Base (not http.DefaultTransport).
func NewClient(c *http.Client, p Policy) *http.Client {
	var cc http.Client
	if c != nil {
		cc = *c
	}
	cc.Transport = &Transport{Base: cc.Transport, Policy: p}
	return &cc
}

func (t *Transport) init() {
	t.once.Do(func() {
		t.base = t.Base
		if t.base == nil {
			t.base = cleanhttp.DefaultPooledTransport()
		}
		t.policy = t.Policy.compileAll()
		t.hosts = hosts.NewTable(t.Hosts, func(key string, p Policy) *policy {
			layered := p.over(t.Policy)
			c := layered.compileAll()
			c.hostKey, c.oneAttempt.hostKey = key, key
			return c
		})
		t.accounts = cmp.Or(t.Budget, new(Budget)).machine() // nil Budget: the default size
		t.baseIsTransport = isTransport(t.base)
		t.clock = clock.Real{}
		if s, ok := t.base.(clock.Source); ok {
			t.clock, t.rand = s.RetryClock(), s.RetryRand()
		}
		if _, t.realClock = t.clock.(clock.Real); !t.realClock {
			t.epoch = t.clock.Now()
		}
		if t.rand == nil {
			t.rand = rand.Float64
		}
	})
}

// isTransport reports whether rt is a *Transport, or wraps one: a base that
// wraps another (as otelretry's does) has an Unwrap() http.RoundTripper method.
func isTransport(rt http.RoundTripper) bool {
	for range 16 { // a bound against a wrapper that wraps itself
		switch r := rt.(type) {
		case *Transport:
			return true
		case interface{ Unwrap() http.RoundTripper }:
			rt = r.Unwrap()
		default:
			return false
		}
	}
	return false
}

// CloseIdleConnections closes the idle connections of the base transport,
// if it has such a method; http.Client.CloseIdleConnections reaches it.
func (t *Transport) CloseIdleConnections() {
	t.init()
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// policyFor returns req's policy: its host's or the default, then WithPolicy's.
func (t *Transport) policyFor(req *http.Request) *policy {
	p := t.policy
	if req.URL != nil && !t.hosts.Empty() {
		if hp, ok := t.hosts.Lookup(req.URL.Scheme, req.URL.Hostname(), req.URL.Port()); ok {
			p = hp
		}
	}
	if o, ok := req.Context().Value(overrideKey{}).(*override); ok {
		p = o.apply(p)
	}
	return p
}

// RoundTrip sends req, retrying transient failures as its policy allows.
// It never modifies req, always closes req's body, and returns either a
// response or an error. A failure that was not retried (or no longer) comes
// back as the last attempt's response, or as an *Error. A request that
// could not be sent at all (its idempotency key could not be made, its body
// did not match its ContentLength) gets an error wrapping ErrIdempotencyKey
// or ErrBodyLength.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	m, live := mark.Live(req.Context())
	h := t.enterHost(req)
	if live {
		// Inside another Transport's attempt: that one retries and
		// budgets, this one sends once.
		h.count(nAttempts)
		defer h.leave()
		return t.base.RoundTrip(req)
	}
	c := call{t: t, p: t.policyFor(req), req: req, parent: req.Context(), markedBefore: m != nil, host: h,
		budget: budgetState{account: h.takeAccount(t.accounts, req)}, sentAt: t.mono(), held: held{entered: true}}
	return c.do()
}

// mono returns monoAt(now), reading the monotonic clock alone if it can.
func (t *Transport) mono() int64 {
	if t.realClock {
		return clock.MonoNow()
	}
	return t.monoAt(t.clock.Now())
}

// monoAt returns now, a time of the Transport's clock, on the monotonic scale
// of the per-host counters' windows: the real clock's, or for a simulation's
// clock one from the Transport's first use, alike on every run.
func (t *Transport) monoAt(now time.Time) int64 {
	if t.realClock {
		return clock.Mono(now)
	}
	return clock.MonoSince(t.epoch, now)
}
