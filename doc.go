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
//     retries wait in the host's line for news of it (a success lets go
//     what the credit pays for; a probe goes after a silence of its
//     backoff), but only while the request's schedule lasts: the budget
//     never makes a request end later than its policy allows. So a long outage meets barely more than the
//     first attempts, for one client as for a fleet, callers do not pile up
//     on a dead host, and it never holds up a healthy one's retries.
//   - Retries stay at one layer of the stack: a Transport beneath
//     another does not retry again, one beneath an SDK that
//     retries stands down, and AdviceHandler tells a service's callers not
//     to retry what it already retried.
//   - Opt-in, per host: adaptive throttling of a host that rejects most
//     requests (Throttle), hedged requests against tail latency (Hedge),
//     and response bodies read inside the attempt so that a cut body is
//     retried (BufferResponse).
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
//   - ExampleError, ExampleTransport_Stats, ExampleTransport_HostStats,
//     ExampleTransport_logger, ExampleTransport_base: what a Transport
//     tells its caller.
package retryhttp

// Glossary. Each word has one meaning in this module's code and docs.
//
//   - request: one call of RoundTrip. attempt: one sending of it to the
//     base. retry: an attempt after a failed one. hedge: a copy of an
//     attempt sent while that attempt has not answered; hedging: a
//     request's first attempt with its hedges (hedging.go).
//   - verdict: whether an attempt's outcome is worth another attempt
//     (judge; Attempt.Retry is the default verdict). advice: a server's
//     word on retrying, X-Should-Retry or Stripe-Should-Retry
//     (AdviceHandler passes a service's verdict to its callers as advice).
//   - plan: what follows a failed attempt worth another: its delay, or the
//     reason to give up (decide). delay: the wait before a retry, set by
//     the backoff or by a server's wait (Retry-After, RateLimit).
//     schedule: the longest a request's retries could take by its policy
//     (the longest waits its Backoff can draw, or the server's, and its
//     attempts' time); the budget's line holds a retry only inside it.
//   - budget: bounds retries per host; account: a host's part of it; credit:
//     the retries an account may pay for; line: the retries waiting for news
//     of a failing host. news: what the budget hears of a host (an
//     attempt's success or failure, a probe's going). release: the line
//     letting a retry go. probe: the retry at the head of the line, let go
//     after a silence of its own longest backoff. failure: an attempt's
//     failure that the budget hears of.
//   - gate: a per-host mechanism that may hold an attempt back (adaptive
//     throttling, the hedge fraction: internal/hostgate).
//   - layer above: a client over the Transport that retries too, such as
//     an SDK (Stats.RetriesFromAbove). Transport beneath: a retrying
//     Transport inside an attempt (the one above gives up with
//     ReasonNoRetries).
//   - mark: an attempt's number on its request's context (internal/mark).
//   - drain: a failed attempt's body read and closed, so that its
//     connection carries the next attempt; keep: read into memory while a
//     retry waits in line.
//   - resend: net/http sending a request again by itself within one
//     attempt (Stats.NetHTTPResends); OpenTelemetry's resend_count is a retry's
//     number instead, and appears only as that attribute's name.
//   - call: a request on its way through the Transport (call.go).
//     finish: a request ends (giveUp: with a failure; answer: with an
//     outcome not to be retried). closeHeld: a request that did not return
//     (a hook panicked) closes what it holds.
//   - above and beneath, the only words for layers: a layer above, a
//     Transport beneath; an override (WithPolicy) lies over the one under
//     it.
