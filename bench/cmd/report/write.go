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
the load average above says how much; bytes, allocations and the storm's figures do not
depend on load.

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

	r.p(`## Storm: a fleet through an outage

A fleet of 4 clients, each one RoundTripper of the library (so one budget, where the library
has one), each sending 300 GETs per second at a steady pace (1 200/s in all, 120 per 100 ms),
to an in-memory dependency that takes 10 ms to answer each attempt. The dependency is healthy
for 3 s, answers 503 to every attempt for 20 s, then is healthy again; the load goes on for
5 s after the recovery, and every call is followed to its end. It runs in fake time
(` + "`testing/synctest`" + `), so 28 s of traffic take about a second and no timer is late;
between runs only the libraries' random jitter differs (and the order in which goroutines
woken at the same instant run), and the confidence intervals show how much.

Each library runs as a user gets it: its own default backoff and budget, at most 4 attempts.
retryhttp: full jitter 100 ms–10 s, default budget (20 %% of requests plus 10 retries/s over
10 s). go-retryablehttp: exponential 1 s, 2 s, 4 s, no budget. failsafe-go: no delay between
attempts (its default), no budget; failsafe-go-budget adds its ` + "`budget.New()`" + `
(retries may be 20 %% of executions in flight, at least 3 at a time). rehttp has no defaults:
its exponential full jitter helper, 100 ms–10 s. retryhttp-nobudget is retryhttp with
` + "`UnlimitedBudget()`" + `, to show what the budget does.

- *attempts per call, outage*: attempts the dependency received during the outage, per
  logical request started during it. *steady outage*: the same over the outage's last 10 s,
  once the calls made before it are over; without a budget it tends to 4.
- *peak attempts per 100 ms*: the most attempts in any 100 ms of the run (the fleet offers
  120).
- *outage calls that succeeded*: calls started during the outage whose retries reached the
  dependency after it recovered. *calls after recovery that succeeded*: 100 %% for every
  library (none holds back first attempts).

`)
	r.stormTable()
	r.p(`With a budget of ratio *r* and floor *f* retries per second, a client sending *R* requests
per second into a full outage makes at most 1 + *r* + *f*/*R* attempts per request over any
window: 1.2 + 10/300 ≈ 1.233 here. A client sending under 200 requests per second gets more
than 1.25 from the floor alone (1.3 at 100/s). The budget bounds the average, not the onset:
what it earned in the last 10 s of healthy traffic (20 %% of it, plus the floor) can be spent at
once when the outage begins, which is where retryhttp's peak comes from.

## How each library was configured

The benchmarks above the storm use the libraries configured as alike as their APIs allow
(`+"`bench.Equal`"+`): at most 4 attempts (3 retries), exponential backoff from 100 ms
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
