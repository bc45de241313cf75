package retryhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/retryhttp/retryhttp"
)

// ExampleTransport_Explain prints the policy a host's requests get, and
// one request's under WithPolicy, with where each setting comes from.
func ExampleTransport_Explain() {
	tr := &retryhttp.Transport{
		Policy: retryhttp.Policy{AttemptTimeout: 2 * time.Second},
		Hosts: map[string]retryhttp.Policy{
			"api.example.com": {
				MaxAttempts:     3,
				IdempotencyKeys: &retryhttp.IdempotencyKeys{},
				Statuses:        []int{}, // off: no status is retried, only errors
			},
		},
	}
	ctx := retryhttp.WithPolicy(context.Background(), retryhttp.Policy{
		AttemptTimeout: -1, // off for this request
		Hedge:          &retryhttp.Hedge{},
	})
	req, _ := http.NewRequestWithContext(ctx, "POST", "https://api.example.com/v1/charges", nil)
	fmt.Print(tr.Explain(req))
	// Output:
	// POST https://api.example.com/v1/charges
	// setting          value                                                    from
	// MaxAttempts      3                                                        Hosts["api.example.com"]
	// Backoff          full jitter, 100ms to 10s                                default
	// Statuses         off (no status retried)                                  Hosts["api.example.com"]
	// Retryable        none (the default verdict)                               default
	// AttemptTimeout   off (the caller's deadline only)                         WithPolicy
	// MaxRetryAfter    30s                                                      default
	// MaxBufferedBody  64 KiB                                                   default
	// BufferResponse   off                                                      default
	// IdempotencyKeys  Idempotency-Key on POST, PATCH                           Hosts["api.example.com"]
	// Idempotent       no (by method or key)                                    default
	// Throttle         off                                                      default
	// LongRetryAfter   return (the response at once)                            default
	// Hedge            1 after p95 latency (2ms to 1s); 5% of requests at most  WithPolicy
	// Budget           10 retries held, 0.55 earned per success                 default
}
