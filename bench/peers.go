package bench

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/PuerkitoBio/rehttp"
	"github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/retryhttp/retryhttp"
)

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
	// Wrap returns a RoundTripper that retries through base.
	Wrap func(base http.RoundTripper) http.RoundTripper
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
// in this configuration). The first entry is the bare base.
func Equal(w Waits, budgeted bool) []Lib {
	return []Lib{
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"retryhttp", func(base http.RoundTripper) http.RoundTripper {
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
		{"retryablehttp", func(base http.RoundTripper) http.RoundTripper {
			c := &retryablehttp.Client{
				HTTPClient: &http.Client{Transport: base},
				RetryMax:   MaxAttempts - 1,
				CheckRetry: retryablehttp.DefaultRetryPolicy,
				// Exponential without jitter: the library's only
				// exponential strategy.
				Backoff: retryablehttp.DefaultBackoff,
			}
			if w == Comparable {
				c.RetryWaitMin, c.RetryWaitMax = backoffBase, backoffCap
			}
			return &retryablehttp.RoundTripper{Client: c}
		}},
		{"failsafe-go", func(base http.RoundTripper) http.RoundTripper {
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
		{"rehttp", func(base http.RoundTripper) http.RoundTripper {
			delay := rehttp.ConstDelay(0)
			if w == Comparable {
				delay = rehttp.ExpJitterDelay(backoffBase, backoffCap) // full jitter
			}
			return rehttp.NewTransport(base, rehttpRetry(), delay)
		}},
	}
}

// rehttpRetry is rehttp configured like retryhttp's default policy: at most
// MaxAttempts-1 retries, of idempotent methods only, on retryhttp's default
// statuses or any error but the caller's cancellation.
func rehttpRetry() rehttp.RetryFn {
	return rehttp.RetryAll(
		rehttp.RetryMaxRetries(MaxAttempts-1),
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
// configuration: its own default backoff and budget, at most MaxAttempts
// attempts, no logging. The storm compares these. Where a library has an
// optional budget, a second entry has it on; retryhttp also appears without
// its budget, to show what the budget does. The first entry is the bare base.
func Defaults() []Lib {
	return []Lib{
		{"bare", func(base http.RoundTripper) http.RoundTripper { return base }},
		{"retryhttp", func(base http.RoundTripper) http.RoundTripper {
			return &retryhttp.Transport{Base: base} // default policy and budget
		}},
		{"retryhttp-nobudget", func(base http.RoundTripper) http.RoundTripper {
			return &retryhttp.Transport{Base: base, Budget: retryhttp.UnlimitedBudget()}
		}},
		{"retryablehttp", func(base http.RoundTripper) http.RoundTripper {
			c := retryablehttp.NewClient() // 1 s to 30 s exponential, no jitter
			c.HTTPClient = &http.Client{Transport: base}
			c.RetryMax = MaxAttempts - 1
			c.Logger = nil
			return &retryablehttp.RoundTripper{Client: c}
		}},
		{"failsafe-go", func(base http.RoundTripper) http.RoundTripper {
			p := failsafehttp.NewRetryPolicyBuilder(). // no delay by default
									WithMaxAttempts(MaxAttempts).
									ReturnLastFailure().
									Build()
			return failsafehttp.NewRoundTripper(base, p)
		}},
		{"failsafe-go-budget", func(base http.RoundTripper) http.RoundTripper {
			p := failsafehttp.NewRetryPolicyBuilder().
				WithMaxAttempts(MaxAttempts).
				ReturnLastFailure().
				WithBudget(budget.New()). // 20 % of executions in flight, at least 3
				Build()
			return failsafehttp.NewRoundTripper(base, p)
		}},
		{"rehttp", func(base http.RoundTripper) http.RoundTripper {
			// rehttp has no default backoff; its exponential helper is
			// full jitter, the same formula as retryhttp's default.
			return rehttp.NewTransport(base, rehttpRetry(), rehttp.ExpJitterDelay(backoffBase, backoffCap))
		}},
	}
}
