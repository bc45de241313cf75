package main

import "strings"

func (r *report) write(goVersion, cpu, cores, loadBefore, loadAfter, date, count, versions, commands string) {
	r.p(`# Benchmarks: retryhttp and its peers

<!-- Written by bench/run.sh; edit bench/cmd/report, not this file. -->

retryhttp measured against the Go retry libraries users choose between, on the same work, in
one run: [hashicorp/go-retryablehttp](https://github.com/hashicorp/go-retryablehttp),
[failsafe-go](https://github.com/failsafe-go/failsafe-go) (its failsafehttp package) and
[PuerkitoBio/rehttp](https://github.com/PuerkitoBio/rehttp), with the bare base transport as
the floor. The code is the `+"`bench/`"+` module (its own go.mod, so retryhttp's users never
download the peers).

Each figure is benchstat's median of %s runs with its 95 %% confidence interval, followed by
its ratio to retryhttp (below 1× means less than retryhttp: fewer nanoseconds, bytes,
allocations or attempts).

| | |
|---|---|
| date | %s |
| Go | %s |
| CPU | %s, %s cores |
| load average (1, 5, 15 min) | %s before the run, %s after it |
| modules | %s |

The machine was shared: time figures (ns/op, req/s) carry the noise of other processes, and
the load average above says how much; bytes, allocations and the figures of the budget
scenarios (storm, fleet, blip) do not depend on load.

`, count, date, goVersion, cpu, cores, loadBefore, loadAfter, strings.ReplaceAll(versions, "\n", "; "))

	r.targets()

	r.p(`## Success path: GET

One GET answered 200 by an in-memory base that allocates nothing; the same request is sent on
every iteration, so the figures are what each library adds to the bare base. retryhttp runs
with its default budget (every request is counted in it).

`)
	r.table(r.bench, "GET", equalLibs, "retryhttp", []unitCol{nsCol, bytesCol, allocsCol})

	r.p(`## Success path: PUT of 1 MiB

A PUT whose body is a ` + "`bytes.Reader`" + ` over 1 MiB, answered 200 by an in-memory base
that reads the body to the end. Every iteration builds a fresh request with
` + "`http.NewRequest`" + ` (which sets ` + "`GetBody`" + `) at the same cost for every
library, bare included, so the bare row is that cost. A library that copies the body shows it
as about 1 MiB (or 2 MiB, when the copy grows by doubling) per operation.

`)
	r.table(r.bench, "PUT1MiB", equalLibs, "retryhttp", []unitCol{nsCol, bytesCol, allocsCol})

	r.p(`## Retry path: 503, 503, then 200

The in-memory base answers 503 twice, then 200; every library retries at once (zero backoff)
and without a budget, so each operation is three attempts. The bare row is the floor: the
three attempts made by hand, each failed response drained and closed.

`)
	r.table(r.bench, "Retry", equalLibs, "retryhttp", []unitCol{nsCol, bytesCol, allocsCol})

	r.p(`## Loopback: concurrent GETs

GETs from GOMAXPROCS goroutines (` + "`b.RunParallel`" + `) through each library to an
` + "`httptest`" + ` server on 127.0.0.1 answering 128 bytes, over a pooled transport per
library. Requests per second, and their ratio to bare (1× is as fast as no library at all).

`)
	r.table(r.bench, "Loopback", equalLibs, "bare", []unitCol{
		{"req/s", "req/s", num},
		allocsCol,
	})

	r.scenarios()
	r.p(`## How each library was configured

The benchmarks above the budget scenarios use the libraries configured as alike as their APIs
allow (`+"`bench.Equal`"+`): at most 4 attempts (3 retries), exponential backoff from 100 ms
capped at 10 s with full jitter where the library can express it (zero waits in the retry
path), no logging.

| library | configuration | cannot do (so not configured) |
|---|---|---|
| retryhttp | `+"`Policy{MaxAttempts: 4, Backoff: FullJitter{100ms, 10s}}`"+`; default budget, except `+"`UnlimitedBudget()`"+` in the retry path (its budget would refuse most retries of a loop that retries every request) | – |
| go-retryablehttp | `+"`RoundTripper`"+` around a `+"`Client{HTTPClient: &http.Client{Transport: base}, RetryMax: 3, RetryWaitMin: 100ms, RetryWaitMax: 10s, CheckRetry: DefaultRetryPolicy, Backoff: DefaultBackoff}`"+`, Logger nil (its default logger writes a line per request) | no jitter in its exponential backoff (only a linear jitter one, or a function of your own); no budget; no cap on Retry-After (429/503); retries every method, POST included; sends through an inner http.Client, which follows redirects itself; copies request bodies it cannot rewind (any io.Reader, including an http.Request's body) |
| failsafe-go | `+"`failsafehttp.NewRoundTripper(base, NewRetryPolicyBuilder().WithMaxAttempts(4).ReturnLastFailure().WithBackoff(50ms, 5s).WithJitterFactor(1))`"+`: delays of 50 ms·2ⁿ scaled by a factor uniform in (0, 2], which is full jitter from 100 ms to 10 s | no full or decorrelated jitter by name; its budget is optional and counts retries in flight, not retries per request over time; Retry-After only as integer seconds, on 429/503, uncapped; retries every method; copies `+"`bytes.Reader`"+` and plain io.Reader bodies with io.ReadAll |
| rehttp | `+"`NewTransport(base, RetryAll(RetryMaxRetries(3), RetryHTTPMethods(idempotent), RetryAny(RetryStatuses(408, 429, 500, 502, 503, 504), any error but cancellation)), ExpJitterDelay(100ms, 10s))`"+` | no defaults at all; no budget; no Retry-After; copies every request body into a buffer and replaces the caller's `+"`req.Body`"+` |

retryhttp alone of the four also skips a wait that would end past the caller's deadline (the
others wait until the context ends), caps Retry-After (30 s), adds idempotency keys on request,
and keeps nested retrying transports to one layer.

## Reproduce

From the repository root:

`+"```"+`
%s
`+"```"+`

`+"`bench/run.sh`"+` waits (up to 15 minutes) for the 1-minute load average to fall to 1.5
or less before it starts, runs the commands above, and writes this file; the raw results stay
in `+"`bench/results/`"+` (not committed). benchstat is the version pinned by the
`+"`tool`"+` directive of `+"`bench/go.mod`"+`.
`, commands)
}
