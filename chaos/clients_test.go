package chaos

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/retryhttp/retryhttp"
)

// A role says what TestChaos checks of a client.
type role int

const (
	baseline role = iota // the bare client: the success rate to match
	subject              // retryhttp: every assertion applies
	peer                 // measured and reported only
)

// A client is one way of sending the calls, built on a base transport that
// routes each attempt (see router).
type client struct {
	name string
	role role
	new  func(base http.RoundTripper, f fault) *http.Client
}

// clients is the table TestChaos runs for every fault. A retryhttp variant
// with another Policy is one more entry with role subject.
var clients = []client{
	{"bare net/http", baseline, func(base http.RoundTripper, _ fault) *http.Client {
		return &http.Client{Transport: base}
	}},
	{"retryhttp", subject, func(base http.RoundTripper, f fault) *http.Client {
		return &http.Client{Transport: &retryhttp.Transport{
			Base:   base,
			Policy: retryPolicy(f),
			// These runs measure retries, not the budget.
			Budget: retryhttp.UnlimitedBudget(),
		}}
	}},
	{"retryhttp, default budget", subject, func(base http.RoundTripper, f fault) *http.Client {
		// The same with the default Budget: after a failure of the host,
		// its retries wait for news of it (a success, or a probe after
		// 100 to 200 ms without news).
		return &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: retryPolicy(f)}}
	}},
	{"retryhttp, whole responses", subject, func(base http.RoundTripper, f fault) *http.Client {
		p := retryPolicy(f)
		p.BufferResponse = 1 << 20 // read each answer inside its attempt
		return &http.Client{Transport: &retryhttp.Transport{Base: base, Policy: p, Budget: retryhttp.UnlimitedBudget()}}
	}},
	{"go-retryablehttp", peer, func(base http.RoundTripper, f fault) *http.Client {
		c := retryablehttp.NewClient() // 5 attempts, 1 s to 30 s exponential
		c.HTTPClient.Transport = base
		c.RetryWaitMin /= backoffScale
		c.RetryWaitMax /= backoffScale
		c.HTTPClient.Timeout = f.attemptTimeout // per attempt: Do is called once each
		c.Logger = nil
		return c.StandardClient()
	}},
}

// retryPolicy is retryhttp's policy for a fault: the defaults, waits
// shortened by backoffScale (FullJitter's default 100 ms to 10 s), keys for POSTs that carry none, and the
// fault's attempt timeout.
func retryPolicy(f fault) retryhttp.Policy {
	return retryhttp.Policy{
		Backoff: retryhttp.FullJitter{
			Base: 100 * time.Millisecond / backoffScale,
			Cap:  10 * time.Second / backoffScale,
		},
		IdempotencyKeys: &retryhttp.IdempotencyKeys{},
		AttemptTimeout:  f.attemptTimeout,
	}
}

// A call is one logical request, carried in its context so that the router
// can count its attempts whatever client sends them.
type call struct {
	id       int
	attempts atomic.Int32
}

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callOf(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// router is the base transport of every client: it counts the attempts of
// each call and sends attempt n of call i to the faulty proxy when
// draw(seed, i, n) < rate, to the clean proxy otherwise. Each proxy has its
// own connections, so the draw decides what the attempt meets.
type router struct {
	next          http.RoundTripper
	clean, faulty string // host:port of the proxies
	rate          float64
	seed          uint64
}

func (r *router) RoundTrip(req *http.Request) (*http.Response, error) {
	c := callOf(req.Context())
	if c == nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errNoCall
	}
	n := int(c.attempts.Add(1))
	out := req.Clone(req.Context())
	out.URL.Host = r.clean
	if draw(r.seed, c.id, n) < r.rate {
		out.URL.Host = r.faulty
	}
	out.Host = ""
	return r.next.RoundTrip(out)
}

func (r *router) CloseIdleConnections() {
	if c, ok := r.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type routeError string

func (e routeError) Error() string { return string(e) }

const errNoCall = routeError("chaos: request without a call in its context")

// draw returns a number in [0, 1) fixed by seed, the call and the attempt
// (or request) number n: the same for every client.
func draw(seed uint64, id, n int) float64 {
	return rand.New(rand.NewPCG(seed, uint64(id)<<16|uint64(n))).Float64()
}
