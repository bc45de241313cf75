package chaos

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/PuerkitoBio/rehttp"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/retryhttp/retryhttp"
)

// The clients of TestEverydayRealFaults: the bare transport, retryhttp's
// default Transport and the same with UnlimitedBudget(), and the peers
// configured as bench/peers.go's Equal(Comparable, ...) configures them for
// BENCHMARKS.md (its "How each library was configured"): at most 4
// attempts, exponential backoff from 100 ms capped at 10 s, with full
// jitter where the library can express it, no logging. The versions are
// bench/go.mod's. The configurations are copied, not imported: bench is a
// module of its own, not required here.

// An everydayClient is one way of sending the calls, as a RoundTripper
// over base. keyed says the fault sends POSTs that the client should make
// safe to retry with an idempotency key, which only retryhttp can add
// (Policy.IdempotencyKeys); the peers send them as they are.
type everydayClient struct {
	name      string
	role      role // baseline (bare), subject (retryhttp) or peer
	unlimited bool // retryhttp with UnlimitedBudget()
	new       func(base http.RoundTripper, keyed bool) http.RoundTripper
}

// The most attempts and the backoff bench/peers.go gives every library.
const (
	peerMaxAttempts = 4
	peerBackoffBase = 100 * time.Millisecond
	peerBackoffCap  = 10 * time.Second
)

var everydayClients = []everydayClient{
	{name: "bare net/http", role: baseline, new: func(base http.RoundTripper, _ bool) http.RoundTripper {
		return base
	}},
	{name: "retryhttp", role: subject, new: func(base http.RoundTripper, keyed bool) http.RoundTripper {
		// The default Transport: zero Policy (4 attempts, full jitter
		// from 100 ms to 10 s), default Budget.
		return &retryhttp.Transport{Base: base, Policy: everydayPolicy(keyed)}
	}},
	{name: "retryhttp, UnlimitedBudget()", role: subject, unlimited: true, new: func(base http.RoundTripper, keyed bool) http.RoundTripper {
		return &retryhttp.Transport{Base: base, Policy: everydayPolicy(keyed), Budget: retryhttp.UnlimitedBudget()}
	}},
	{name: "go-retryablehttp", role: peer, new: func(base http.RoundTripper, _ bool) http.RoundTripper {
		// bench/peers.go: its RoundTripper adapter around a Client with 3
		// retries, its default retry policy (every method, 429 and 5xx but
		// 501) and exponential backoff without jitter from 100 ms (it
		// honours Retry-After on 429 and 503); Logger nil.
		return &retryablehttp.RoundTripper{Client: &retryablehttp.Client{
			HTTPClient:   &http.Client{Transport: base},
			RetryMax:     peerMaxAttempts - 1,
			RetryWaitMin: peerBackoffBase,
			RetryWaitMax: peerBackoffCap,
			CheckRetry:   retryablehttp.DefaultRetryPolicy,
			Backoff:      retryablehttp.DefaultBackoff,
		}}
	}},
	{name: "failsafe-go", role: peer, new: func(base http.RoundTripper, _ bool) http.RoundTripper {
		// bench/peers.go: failsafehttp's retry policy (every method, errors,
		// 429 and 5xx but 501; Retry-After in whole seconds on 429 and 503),
		// 4 attempts, delays of 50 ms * 2^n capped at 5 s scaled by a
		// factor uniform in (0, 2]: full jitter from 100 ms to 10 s.
		return failsafehttp.NewRoundTripper(base, failsafehttp.NewRetryPolicyBuilder().
			WithMaxAttempts(peerMaxAttempts).
			ReturnLastFailure().
			WithBackoff(peerBackoffBase/2, peerBackoffCap/2).
			WithJitterFactor(1).
			Build())
	}},
	{name: "rehttp", role: peer, new: func(base http.RoundTripper, _ bool) http.RoundTripper {
		// bench/peers.go: rehttp has no defaults; retryhttp's default
		// policy (3 retries of idempotent methods, on retryhttp's default
		// statuses or any error but cancellation) and rehttp's exponential
		// full jitter from 100 ms to 10 s. It does not read Retry-After.
		return rehttp.NewTransport(base, rehttp.RetryAll(
			rehttp.RetryMaxRetries(peerMaxAttempts-1),
			rehttp.RetryHTTPMethods("GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"),
			rehttp.RetryAny(
				rehttp.RetryStatuses(retryhttp.DefaultStatuses()...),
				rehttp.RetryIsErr(func(err error) bool {
					return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
				}),
			),
		), rehttp.ExpJitterDelay(peerBackoffBase, peerBackoffCap))
	}},
}

// everydayPolicy is the Policy of both retryhttp clients: the zero Policy,
// with idempotency keys added to POSTs when the fault sends POSTs without
// one (keyed).
func everydayPolicy(keyed bool) retryhttp.Policy {
	if keyed {
		return retryhttp.Policy{IdempotencyKeys: &retryhttp.IdempotencyKeys{}}
	}
	return retryhttp.Policy{}
}

// counting is the transport under a client when no router is: it counts
// each attempt of the call in the request's context.
type counting struct{ next http.RoundTripper }

func (c counting) RoundTrip(req *http.Request) (*http.Response, error) {
	if cl := callOf(req.Context()); cl != nil {
		cl.attempts.Add(1)
	}
	return c.next.RoundTrip(req)
}
