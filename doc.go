// Package retryhttp is an http.RoundTripper that retries failed HTTP
// requests safely.
//
// Retries rescue requests from the transient failures every network has: a
// reset connection, a 503 from an overloaded replica, a 429 asking the
// client to slow down. Done carelessly they cause worse failures than they
// cure: a POST applied twice (a double charge), a fleet of clients
// multiplying the load on a dependency that is already down (a retry storm),
// a request that sleeps past its caller's deadline, a retry that sends a
// truncated body. This package retries the way the best-run systems do, and
// refuses the retries that would hurt:
//
//   - Only idempotent methods (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) are
//     retried, and other methods only with an Idempotency-Key header, which
//     the Transport can add itself (see IdempotencyKeys), when the caller
//     declares them idempotent (Policy.Idempotent, or as net/http lets it:
//     an Idempotency-Key or X-Idempotency-Key field with a nil value, which
//     is not sent), or when the failure proves nothing was sent (a dial
//     error).
//   - Only transient failures are retried: 408, 429, 500, 502, 503, 504 and
//     network errors such as a refused or reset connection, never a TLS
//     certificate error or the caller's own cancellation.
//   - Waits follow exponential backoff with jitter (FullJitter by default,
//     EqualJitter, DecorrelatedJitter, Constant), honour a
//     server's Retry-After, and never end past the caller's deadline.
//   - Request bodies are sent again in full: re-created through GetBody
//     without a copy, or buffered when small.
//   - A Budget shared by every request of a Transport bounds retries per
//     host: a request alone gets exactly its policy, paid by the host's
//     credit, which a retry that succeeds gives back; a retry the server
//     timed costs nothing; while other requests in flight fail the host, its
//     retries wait in the host's line until the host responds (a success
//     lets go what the credit pays for; after a silence as long as a retry's
//     backoff, one goes to try the host), but only while the request's
//     schedule lasts: the budget never makes a request end later than its
//     policy allows. So a long outage meets barely more than the first
//     attempts, for one client as for a fleet, callers do not pile up on a
//     dead host, and it never holds up a healthy one's retries.
//   - Retries stay at one layer of the stack: a Transport beneath
//     another does not retry again, one beneath an SDK that
//     retries stands down, and AdviceHandler tells a service's callers not
//     to retry what it already retried.
//   - Opt-in, per host: adaptive throttling of a host that rejects most
//     requests (Throttle), hedged requests against tail latency (Hedge),
//     response bodies read inside the attempt so that a cut body is
//     retried (BufferResponse), or resumed where they broke with a Range
//     request (ResumeResponse).
//   - What a request went through, attempt by attempt, is told by its
//     response or its error (Policy.Timeline, Timeline); an *Error unwraps
//     to every attempt's error.
//
// A Transport's zero value is ready to use; wrap any client's transport:
//
//	client := &http.Client{Transport: &retryhttp.Transport{Base: http.DefaultTransport}}
//
// Policy sets what is retried and how; Transport.Hosts sets it per host,
// WithPolicy per request (Policy{MaxAttempts: 1} turns retries off).
//
// # Examples
//
// go doc does not print examples; read them in the module's
// example_test.go and example_readme_test.go, or run them with
// go test -run Example -v. Each is named after what it shows:
//
//   - Example_orderService: a whole client, the README's (keys for one
//     host, an attempt timeout for another, a deadline, slog, Attempts,
//     Stats and Explain);
//   - Example, ExampleTransport, ExampleNewClient: wrapping a client;
//   - ExamplePolicy, ExampleTransport_hosts, ExampleTransport_policies,
//     ExampleWithPolicy_deadline, ExampleWithPolicy_noRetries: policies per
//     Transport, host and request;
//   - ExampleTransport_Explain: the policy a request gets, and from where;
//   - ExampleIdempotencyKeys, ExampleBudget, ExampleHedge,
//     ExampleThrottle, ExampleAdviceHandler: the opt-in features;
//   - ExampleError, ExampleTimeline, ExampleTransport_Stats,
//     ExampleTransport_HostStats, ExampleTransport_logger,
//     ExampleTransport_base: what a Transport tells its caller.
package retryhttp

// Glossary: the ten words a user of this package meets, each with one
// meaning in its code and docs.
//
//   - request: one call of RoundTrip. attempt: one sending of it to the
//     base (Attempts, AttemptNumber).
//   - retry: an attempt after a failed one (OnRetry, PrepareRetry).
//   - hedge: a copy of an attempt, sent while that attempt has not responded
//     yet (Hedge).
//   - budget: what bounds the retries to each host (Budget). credit: the
//     retries a host may pay for. line: where a retry waits while other
//     requests fail its host, no longer than its policy could have made
//     the request take.
//   - advice: a server's word on retrying, X-Should-Retry or
//     Stripe-Should-Retry (AdviceHandler passes a service's to its callers).
//   - above and beneath, the only words for layers: a layer above is a client
//     above the Transport that retries too, such as an SDK
//     (Stats.RetriesFromAbove); a Transport beneath is a retrying Transport
//     inside an attempt, which sends once.
//   - resend: net/http sending a request again by itself within one attempt
//     (Stats.NetHTTPResends); OpenTelemetry's resend_count is a retry's
//     number instead, and appears only as that attribute's name.
