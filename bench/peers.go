package bench

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/PuerkitoBio/rehttp"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/retryhttp/retryhttp"
)

const defaultMaxAttempts = 4 // a zero retryhttp.Policy's MaxAttempts

// MaxAttempts is the attempt limit every library gets: the first attempt and
// three retries.
const MaxAttempts = 4

// The backoff every library is asked for when a benchmark does not need zero
// waits: exponential from 100 ms, capped at 10 s (retryhttp's default).
const (
	backoffBase = 100 * time.Millisecond
	backoffCap  = 10 * time.Second
)

// A Lib is one way of sending requests: a retrying library wrapped around a
// base transport, or the bare base itself.
type Lib struct {
	Name string
	// Attempts is the most attempts the library makes for one call, the
	// first included, as configured by Defaults (0 when not known).
	Attempts int
	// Wrap returns a RoundTripper that retries through base. It is nil for
	// a library measured through its own client API instead (see Sender).
	Wrap func(base http.RoundTripper) http.RoundTripper

	// send, if set, is Sender for a library whose users call a client API
	// of its own rather than a RoundTripper.
	send func(base http.RoundTripper, method, url string, body []byte) func() (*http.Response, error)
}

// Sender returns a function that sends one request through the library
// over base, the way its users send one: method to url, with a body read
// from a fresh bytes.Reader over body, or none when body is nil. A bodiless
// request is made once and sent again on every call, so that what a call
// costs is what the library adds to base; a request with a body is made
// anew on every call (by http.NewRequest, or the library's own
// constructor), a cost every library pays alike. The function must be
// called from one goroutine at a time.
func (l Lib) Sender(base http.RoundTripper, method, url string, body []byte) func() (*http.Response, error) {
	if l.send != nil {
		return l.send(base, method, url, body)
	}
	return sendThrough(l.Wrap(base), method, url, body)
}

// sendThrough is Sender for a library whose RoundTripper is rt.
func sendThrough(rt http.RoundTripper, method, url string, body []byte) func() (*http.Response, error) {
	if body == nil {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			panic(err) // the benchmarks' own URLs
		}
		return func() (*http.Response, error) { return rt.RoundTrip(req) }
	}
	return func() (*http.Response, error) {
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		return rt.RoundTrip(req)
	}
}

// Waits says which backoff the libraries are configured with.
type Waits int

const (
	// Comparable waits: full jitter from 100 ms to 10 s wherever the
	// library can express it, its nearest equivalent otherwise.
	Comparable Waits = iota
	// Zero waits: every retry is sent at once.
	Zero
)

// Equal returns the libraries configured as alike as their APIs allow: at
// most MaxAttempts attempts, the waits asked for, the same retried statuses
// where that can be chosen, and no logging. retryhttp keeps its default
// budget when budgeted is true and has none otherwise (no peer has a budget
// in this configuration). go-retryablehttp appears twice: through its
// RoundTripper adapter ("retryablehttp"), and through its own client API
// ("retryablehttp-client", whose Wrap is nil: use Sender). The first entry
// is the bare base.
func Equal(w Waits, budgeted bool) []Lib {
	return []Lib{
		{Name: "bare", Wrap: func(base http.RoundTripper) http.RoundTripper { return base }},
		{Name: "retryhttp", Wrap: func(base http.RoundTripper) http.RoundTripper {
			p := retryhttp.Policy{MaxAttempts: MaxAttempts}
			if w == Zero {
				p.Backoff = retryhttp.Constant(0)
			} else {
				p.Backoff = retryhttp.FullJitter{Base: backoffBase, Cap: backoffCap}
			}
			t := &retryhttp.Transport{Base: base, Policy: p}
			if !budgeted {
				t.Budget = retryhttp.UnlimitedBudget()
			}
			return t
		}},
		{Name: "retryablehttp", Wrap: func(base http.RoundTripper) http.RoundTripper {
			return &retryablehttp.RoundTripper{Client: retryablehttpClient(base, w)}
		}},
		{Name: "retryablehttp-client", send: func(base http.RoundTripper, method, url string, body []byte) func() (*http.Response, error) {
			// Its own API: Client.Do with a retryablehttp.Request. A
			// bytes.Reader body is replayed from its bytes, not copied (the
			// RoundTripper adapter reads every body into a buffer of its
			// own).
			c := retryablehttpClient(base, w)
			if body == nil {
				req, err := retryablehttp.NewRequest(method, url, nil)
				if err != nil {
					panic(err) // the benchmarks' own URLs
				}
				return func() (*http.Response, error) { return c.Do(req) }
			}
			return func() (*http.Response, error) {
				req, err := retryablehttp.NewRequest(method, url, bytes.NewReader(body))
				if err != nil {
					return nil, err
				}
				return c.Do(req)
			}
		}},
		{Name: "failsafe-go", Wrap: func(base http.RoundTripper) http.RoundTripper {
			b := failsafehttp.NewRetryPolicyBuilder().
				WithMaxAttempts(MaxAttempts).
				ReturnLastFailure()
			if w == Comparable {
				// Delays of 50 ms * 2^n (capped at 5 s), each scaled by
				// a factor uniform in (0, 2]: U(0, min(100 ms * 2^n, 10 s)],
				// which is full jitter.
				b = b.WithBackoff(backoffBase/2, backoffCap/2).WithJitterFactor(1)
			}
			return failsafehttp.NewRoundTripper(base, b.Build())
		}},
		{Name: "rehttp", Wrap: func(base http.RoundTripper) http.RoundTripper {
			delay := rehttp.ConstDelay(0)
			if w == Comparable {
				delay = rehttp.ExpJitterDelay(backoffBase, backoffCap) // full jitter
			}
			return rehttp.NewTransport(base, rehttpRetry(MaxAttempts-1), delay)
		}},
	}
}

// retryablehttpClient returns go-retryablehttp's client configured as
// Equal describes, sending through base.
func retryablehttpClient(base http.RoundTripper, w Waits) *retryablehttp.Client {
	c := &retryablehttp.Client{
		HTTPClient: &http.Client{Transport: base},
		RetryMax:   MaxAttempts - 1,
		CheckRetry: retryablehttp.DefaultRetryPolicy,
		// Exponential without jitter: go-retryablehttp's only exponential
		// strategy.
		Backoff: retryablehttp.DefaultBackoff,
	}
	if w == Comparable {
		c.RetryWaitMin, c.RetryWaitMax = backoffBase, backoffCap
	}
	return c
}

// rehttpRetry is rehttp configured like retryhttp's default policy: at most
// the given retries, of idempotent methods only, on retryhttp's default
// statuses or any error but the caller's cancellation.
func rehttpRetry(retries int) rehttp.RetryFn {
	return rehttp.RetryAll(
		rehttp.RetryMaxRetries(retries),
		rehttp.RetryHTTPMethods("GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"),
		rehttp.RetryAny(
			rehttp.RetryStatuses(retryhttp.DefaultStatuses()...),
			rehttp.RetryIsErr(func(err error) bool {
				return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
			}),
		),
	)
}

// Defaults returns each library as a user gets it with the least
// configuration: its own default backoff, attempt limit and budget, and no
// logging. Where a library has an optional retry budget, a second entry has
// it on; retryhttp also appears without its budget, to show what the budget
// does. A maxAttempts above zero sets every library's attempt limit (the
// first attempt included) instead. The first entry is the bare base.
func Defaults(maxAttempts int) []Lib {
	// retries returns the retry limit: maxAttempts-1, or def.
	retries := func(def int) int {
		if maxAttempts > 0 {
			return maxAttempts - 1
		}
		return def
	}
	failsafe := func() retrypolicy.Builder[*http.Response] {
		b := failsafehttp.NewRetryPolicyBuilder() // 2 retries, no delay (unless Retry-After)
		if maxAttempts > 0 {
			b = b.WithMaxAttempts(maxAttempts)
		}
		return b
	}
	return []Lib{
		{Name: "bare", Attempts: 1, Wrap: func(base http.RoundTripper) http.RoundTripper { return base }},
		{Name: "retryhttp", Attempts: retries(defaultMaxAttempts-1) + 1, Wrap: func(base http.RoundTripper) http.RoundTripper {
			// Default policy (full jitter 100 ms to 10 s) and budget.
			return &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: maxAttempts}}
		}},
		{Name: "retryhttp-nobudget", Attempts: retries(defaultMaxAttempts-1) + 1, Wrap: func(base http.RoundTripper) http.RoundTripper {
			return &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: maxAttempts},
				Budget: retryhttp.UnlimitedBudget()}
		}},
		{Name: "retryablehttp", Attempts: retries(retryablehttp.NewClient().RetryMax) + 1, Wrap: func(base http.RoundTripper) http.RoundTripper {
			c := retryablehttp.NewClient() // 4 retries, exponential 1 s to 30 s without jitter
			c.HTTPClient = &http.Client{Transport: base}
			c.RetryMax = retries(c.RetryMax)
			c.Logger = nil // its default logger writes a line per attempt
			return &retryablehttp.RoundTripper{Client: c}
		}},
		{Name: "failsafe-go", Attempts: retries(failsafeMaxRetries) + 1, Wrap: func(base http.RoundTripper) http.RoundTripper {
			return failsafehttp.NewRoundTripper(base, failsafe().Build())
		}},
		{Name: "failsafe-go-budget", Attempts: retries(failsafeMaxRetries) + 1, Wrap: func(base http.RoundTripper) http.RoundTripper {
			// budget.New(): retries in flight may be 20 % of the
			// executions in flight, and at least 3.
			return failsafehttp.NewRoundTripper(base, failsafe().WithBudget(budget.New()).Build())
		}},
		{Name: "rehttp", Attempts: retries(rehttpMaxRetries) + 1, Wrap: func(base http.RoundTripper) http.RoundTripper {
			// rehttp has no defaults: retryhttp's default policy (3
			// retries of its transient outcomes) and rehttp's own
			// exponential helper, full jitter from 100 ms to 10 s.
			return rehttp.NewTransport(base, rehttpRetry(retries(rehttpMaxRetries)), rehttp.ExpJitterDelay(backoffBase, backoffCap))
		}},
	}
}

// The retry limits of failsafe-go's retry policy by default (it has no
// accessor for it), and of rehttp (which has no default: retryhttp's).
const (
	failsafeMaxRetries = 2
	rehttpMaxRetries   = defaultMaxAttempts - 1
)
