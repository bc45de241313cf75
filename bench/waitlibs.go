package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/PuerkitoBio/rehttp"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/retryhttp/retryhttp"
)

// A WaitLib is a library as the waiting scenario sends through it: Start
// returns the function each caller sends its GET with, over base.
type WaitLib struct {
	Name   string
	Config string // how it is configured, for the report
	// LeavesBodiesOpen says that the library does not close the bodies
	// of the failed answers it retries (failsafe-go v0.9.8 does not).
	LeavesBodiesOpen bool
	Start            func(base http.RoundTripper) func(ctx context.Context, url string) (*http.Response, error)
}

// waitAttempts is the attempt limit of the libraries whose default one
// would not outlast the outage: with full jitter from 100 ms and 10
// attempts, all but about one request in 1,000 keep retrying through 2 s
// and are served before their deadline.
const waitAttempts = 10

// WaitLibs returns the libraries of the waiting scenario, each configured
// to keep retrying through the outage, and a floor: a retry loop written
// by hand.
func WaitLibs() []WaitLib {
	retryablehttpClient := func(base http.RoundTripper) *retryablehttp.Client {
		c := retryablehttp.NewClient() // 4 retries, 1, 2, 4, 8 s apart
		c.HTTPClient = &http.Client{Transport: base}
		c.Logger = nil
		return c
	}
	return []WaitLib{
		{Name: "retryhttp", Config: fmt.Sprintf("`Policy{MaxAttempts: %d}`: default backoff and default budget, whose line holds a retry while its schedule lasts", waitAttempts),
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				return &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: waitAttempts}}
			})},
		{Name: "retryhttp-nobudget", Config: fmt.Sprintf("`Policy{MaxAttempts: %d}`, `Budget: UnlimitedBudget()`: default backoff (full jitter)", waitAttempts),
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				return &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{MaxAttempts: waitAttempts}, Budget: retryhttp.UnlimitedBudget()}
			})},
		{Name: "retryablehttp-client", Config: "`retryablehttp.NewClient()`, `Logger: nil`, called with `Client.Do`: its defaults (5 attempts, waits 1, 2, 4, 8 s)",
			Start: func(base http.RoundTripper) func(context.Context, string) (*http.Response, error) {
				c := retryablehttpClient(base)
				return func(ctx context.Context, url string) (*http.Response, error) {
					req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, url, nil)
					if err != nil {
						return nil, err
					}
					return c.Do(req)
				}
			}},
		{Name: "retryablehttp", Config: "the same `Client` through its `RoundTripper` adapter",
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				return &retryablehttp.RoundTripper{Client: retryablehttpClient(base)}
			})},
		{Name: "retryhttp-httpclient", Config: fmt.Sprintf("`retryhttp.NewClient(&http.Client{Transport: base}, retryhttp.Policy{MaxAttempts: %d})`, called with `http.Client.Do`", waitAttempts),
			Start: func(base http.RoundTripper) func(context.Context, string) (*http.Response, error) {
				return viaClient(retryhttp.NewClient(&http.Client{Transport: base}, retryhttp.Policy{MaxAttempts: waitAttempts}))
			}},
		{Name: "retryablehttp-httpclient", Config: "the same go-retryablehttp `Client`'s `StandardClient()`, called with `http.Client.Do`",
			Start: func(base http.RoundTripper) func(context.Context, string) (*http.Response, error) {
				return viaClient(retryablehttpClient(base).StandardClient())
			}},
		{Name: "failsafe-go", LeavesBodiesOpen: true, Config: fmt.Sprintf("`NewRetryPolicyBuilder().WithMaxAttempts(%d).ReturnLastFailure().WithBackoff(50ms, 5s).WithJitterFactor(1)`: full jitter (its default has no delay)", waitAttempts),
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				p := failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(waitAttempts).ReturnLastFailure().
					WithBackoff(backoffBase/2, backoffCap/2).WithJitterFactor(1).Build()
				return failsafehttp.NewRoundTripper(base, p)
			})},
		{Name: "rehttp", Config: fmt.Sprintf("`rehttp.NewTransport(base, retry, ExpJitterDelay(100ms, 10s))`, retry as in BENCHMARKS.md with `RetryMaxRetries(%d)`", waitAttempts-1),
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper {
				return rehttp.NewTransport(base, rehttpRetry(waitAttempts-1), rehttp.ExpJitterDelay(backoffBase, backoffCap))
			})},
		{Name: "handloop", Config: "the floor, no library: on a 503 read and close the body, wait on a timer (1, 2, 4, 8 s) or the context; 5 attempts",
			Start: viaRT(func(base http.RoundTripper) http.RoundTripper { return handLoop{base} })},
	}
}

// viaRT returns the Start of a library used as a RoundTripper.
func viaRT(wrap func(http.RoundTripper) http.RoundTripper) func(http.RoundTripper) func(context.Context, string) (*http.Response, error) {
	return func(base http.RoundTripper) func(context.Context, string) (*http.Response, error) {
		rt := wrap(base)
		return func(ctx context.Context, url string) (*http.Response, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return nil, err
			}
			return rt.RoundTrip(req)
		}
	}
}

// viaClient returns the function a caller sends its GET with through c.
func viaClient(c *http.Client) func(context.Context, string) (*http.Response, error) {
	return func(ctx context.Context, url string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		return c.Do(req)
	}
}

// WaitLibNames returns the names of WaitLibs, in order.
func WaitLibNames() []string {
	var names []string
	for _, l := range WaitLibs() {
		names = append(names, l.Name)
	}
	return names
}

// WaitLibByName returns the library of WaitLibs called name.
func WaitLibByName(name string) (WaitLib, bool) {
	for _, l := range WaitLibs() {
		if l.Name == name {
			return l, true
		}
	}
	return WaitLib{}, false
}

// handLoop is the least a retrying client can be: a loop that waits on a
// timer or the request's context, with go-retryablehttp's default waits.
type handLoop struct{ base http.RoundTripper }

func (h handLoop) RoundTrip(req *http.Request) (*http.Response, error) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		resp, err := h.base.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || attempt == 5 {
			return resp, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			return nil, req.Context().Err()
		}
		wait *= 2
	}
}
