package main

import "strings"

func (r *report) write(goVersion, cpu, cores, loadBefore, loadAfter, date, count, rounds, target, versions, commands string) {
	r.p(`# Benchmarks: retryhttp and its peers

<!-- Written by bench/run.sh; edit bench/cmd/report, not this file. -->

retryhttp measured against the Go retry libraries users choose between, on the same work, in
one run: [hashicorp/go-retryablehttp](https://github.com/hashicorp/go-retryablehttp) (through
its RoundTripper adapter and through its own client API), [failsafe-go](https://github.com/failsafe-go/failsafe-go)
(its failsafehttp package) and [PuerkitoBio/rehttp](https://github.com/PuerkitoBio/rehttp),
with the bare base transport as the floor. The code is the `+"`bench/`"+` module (its own
go.mod, so retryhttp's users never download the peers). What hedging and adaptive throttling
cost a request they do not act on is one of the paths below.

| | |
|---|---|
| date | %s |
| Go | %s |
| CPU | %s, %s cores |
| load average (1, 5, 15 min) | %s at the start of the run, %s at its end |
| modules | %s |

## Method

The machine is shared, and wall-clock benchmark times on it swing by 50 to 150 %% from one run
to the next as other processes come and go; a library measured while the machine is busy would
look slower than one measured a minute later. So the time figures of the success, retry,
opt-ins and loopback paths are CPU time: the process's user and system time (`+"`getrusage`"+`) around each
sample, which does not grow while the process waits for a CPU another process holds. It counts
every thread: the garbage collection a library's allocations cause, and on loopback the
server's and net/http's work too. The in-memory paths (one caller) run with GOMAXPROCS 1, so
that the garbage collector works on the caller's CPU: with a second, idle one it would also run
idle-time mark workers there, CPU time that depends on how idle the machine is, not on the
library (the copying libraries' 1 MiB PUT measured 3 to 6 times slower that way). The
libraries are interleaved: in each of %s rounds every
library runs each path once, for about %s of CPU time (the number of operations is calibrated
per library before the first round, which also warms it up), and the order of the libraries
is rotated by one from round to round, so that a drift of the machine's speed falls on all of
them alike. Each figure is the median over the rounds, given with its spread: the middle half
of the rounds (from the first to the third quartile) and the extremes. Ratios are medians of
per-round ratios, each taken between two samples of the same round. Bytes and allocations per
operation are counted (`+"`runtime.MemStats`"+`), not timed: they do not depend on the machine's
load. Loopback throughput (req/s) is wall-clock by nature; its ratio to bare, taken round by
round, is what carries over to another machine. CPU time is not immune to a busy machine either:
a core whose other hardware thread or caches another process uses runs slower, so the samples
still spread (the middle-half columns say how far), but the median of many interleaved rounds
moves far less from run to run than one run's wall-clock time. The scenarios (budget and
overload) run in fake time and do not depend on load at all.

### Answers: realistic, and empty

Every measured path (GET, PUT, POST, retry, opt-ins, loopback) runs twice, on two kinds of
answer, as two paths interleaved in the same rounds, and every table and target shows both: no
path is measured on the empty answer alone. The figures first in each table, and those marked
*realistic* in the targets, are on *realistic* answers; the columns headed *empty*, and the
figures marked so, are on *empty* ones.

A realistic answer is what a real API sends: six header fields (Content-Type, Date, Server,
X-Request-Id, Content-Length unless the body is chunked, and one or two of Cache-Control, ETag,
Vary and the like) and a body of 20 to 200 bytes, in turn JSON, plain text, HTML and JSON again,
two of the four chunked. The failed answers of the retry path (503) carry a body too, in turn a
JSON problem and a proxy's HTML page, which a library that retries has to read and close: the
retry path pays for that. The caller reads the body of every answer it gets to its end, through
a buffer of its own, and closes it, as a caller must, and each run checks that the base's every
answer 200 was read to its end and closed. The in-memory base (`+"`bench.Canned`"+`) builds its
header maps once and hands the same ones out again, rather than a copy per answer: a copy would
cost every row, bare included, the same allocations, drowning what the libraries add; a run
fails if a library wrote to one. Each answer's body is a reader over canned bytes, reset for
each answer. So on the in-memory paths the bare row allocates nothing on either kind of answer,
and what a row adds to it is the library's. Over loopback the server sends the same answers,
with its own Date, the chunked ones chunked, and net/http parses them as it would any server's.

An *empty* answer has no header field and `+"`http.NoBody`"+` (over loopback, net/http's
Content-Length: 0 alone): the least an answer can cost a library, which some libraries have
shortcuts for (nothing to drain, nothing to wrap).

`, date, goVersion, cpu, cores, loadBefore, loadAfter, strings.ReplaceAll(versions, "\n", "; "), rounds, target)

	r.profileMethod()
	r.targets()

	r.p(`## Success path: GET

One GET answered 200 by an in-memory base that allocates nothing; the same request is sent on
every iteration, and the caller reads the answer's body to its end and closes it, so the
figures are what each library adds to the bare base. The columns headed *empty* are the same on
empty answers (see Answers above). retryhttp runs
with its default budget (every request is counted in it). *retryablehttp* is go-retryablehttp's
RoundTripper adapter; *retryablehttp-client* its own API: ` + "`Client.Do`" + ` with a
` + "`retryablehttp.Request`" + ` made once (` + "`retryablehttp.NewRequest`" + `). Below 1× in a
ratio column means less CPU time than bare, or than retryhttp.

`)
	r.pathTable("GET", perfLibs)
	r.profileNote("GET", "retryhttp")

	r.p(`## Success path: PUT of 1 MiB

A PUT whose body is a ` + "`bytes.Reader`" + ` over 1 MiB, answered 200 by an in-memory base
that reads the body to the end, realistically or, in the columns headed *empty*, empty. Every iteration builds a fresh request with
` + "`http.NewRequest`" + ` (which sets ` + "`GetBody`" + `), or with ` + "`retryablehttp.NewRequest`" + `
for retryablehttp-client (which replays a ` + "`bytes.Reader`" + ` from its bytes), at the same
cost for every library, bare included, so the bare row is that cost. A library that copies the
body shows it as about 1 MiB (or 2 MiB, when the copy grows by doubling) per operation:
go-retryablehttp's RoundTripper adapter reads every body into a buffer of its own, its client
API does not.

`)
	r.pathTable("PUT1MiB", perfLibs)
	r.profileNote("PUT1MiB", "retryhttp")

	r.p(`## Success path: POST of 1 KiB, not retried

A POST whose body is a ` + "`bytes.Reader`" + ` over 1 KiB, with no ` + "`Idempotency-Key`" + `,
answered 200 by the in-memory base, which reads the body to its end: a request that is sent
once and not retried. The answers are realistic or, in the columns headed *empty*, empty. As
on the PUT, every iteration builds a fresh request with ` + "`http.NewRequest`" + ` (which sets
` + "`GetBody`" + `), or with ` + "`retryablehttp.NewRequest`" + ` for retryablehttp-client, at
the same cost for every library, bare included, so the bare row is that cost. retryhttp and
rehttp would not retry this POST once answered, whatever the status (it is not idempotent and
has no key); go-retryablehttp and failsafe-go retry every method. A library that copies the
body before the first attempt (see how each library was configured, below) shows the copy in
its bytes per operation.

`)
	r.pathTable("POST1KiB", perfLibs)
	r.profileNote("POST1KiB", "retryhttp")

	r.p(`## Retry path: 503, 503, then 200

The in-memory base answers 503 twice, then 200; every library retries at once (zero backoff)
and without a budget, so each operation is three attempts. On realistic answers each 503
carries a body (a JSON problem, or a proxy's HTML page): bare (by hand), retryhttp,
go-retryablehttp and rehttp read each to its end and close it before the next attempt, as a
connection's reuse needs; failsafe-go (its version above) neither reads nor closes them, so it
does not pay for that work here, and over a network would leave each failed attempt's
connection unusable. The bare row is the floor: the three attempts made by hand, each failed
answer's body read through a buffer of its own and closed. The columns headed *empty* are the
same on empty answers, with nothing to drain.

`)
	r.pathTable("Retry", perfLibs)
	r.profileNote("Retry", "retryhttp")
	r.optInSection()

	r.p(`## Loopback: concurrent GETs

GETs through each library to an ` + "`httptest`" + ` server on 127.0.0.1 sending the realistic
answers (six header fields, its own Date among them, and 20 to 200 bytes, some chunked) or, in
the columns headed *empty*, empty ones (no body, Content-Length: 0 alone), from 1, 16 and 64
callers at once, over keep-alive connections, each body read to its end and closed: every
library sends through one
pooled transport (go-cleanhttp's, keeping up to 64 idle connections, so every caller keeps
its connection). The bare row is that net/http transport alone. Requests per second
(wall-clock) and their ratio to bare in the same round (1× is as fast as no library at all);
CPU time per request is the whole process's, the server's included.

`)
	r.loopbackTable([]int{1, 16, 64})

	r.runs = count
	r.scenarios()
	r.overload()
	r.everyday(r.everydayReadme, r.anchorsOut)
	r.waiting(r.waitingMD)
	r.fleet(r.fleetTxt)
	r.p(`## How each library was configured

The success, retry and loopback paths use the libraries configured as alike as their APIs
allow (`+"`bench.Equal`"+`): at most 4 attempts (3 retries), exponential backoff from 100 ms
capped at 10 s with full jitter where the library can express it (zero waits in the retry
path), no logging.

| library | configuration | cannot do (so not configured) |
|---|---|---|
| retryhttp | `+"`Policy{MaxAttempts: 4, Backoff: FullJitter{100ms, 10s}}`"+`; default budget, except `+"`UnlimitedBudget()`"+` in the retry path (every request of that loop fails first: each retry spends one of the credit and each success earns 0.55 back, so the budget would refuse most of them) | – |
| go-retryablehttp | retryablehttp: `+"`RoundTripper`"+` around a `+"`Client{HTTPClient: &http.Client{Transport: base}, RetryMax: 3, RetryWaitMin: 100ms, RetryWaitMax: 10s, CheckRetry: DefaultRetryPolicy, Backoff: DefaultBackoff}`"+`, Logger nil (its default logger writes a line per request); retryablehttp-client: the same `+"`Client`"+`, called with `+"`Do`"+` | no jitter in its exponential backoff (only a linear jitter one, or a function of your own); no budget; no cap on Retry-After (429/503); retries every method, POST included; sends through an inner http.Client, which follows redirects itself; copies request bodies it cannot rewind (any io.Reader, including an http.Request's body) |
| failsafe-go | `+"`failsafehttp.NewRoundTripper(base, NewRetryPolicyBuilder().WithMaxAttempts(4).ReturnLastFailure().WithBackoff(50ms, 5s).WithJitterFactor(1))`"+`: delays of 50 ms·2ⁿ scaled by a factor uniform in (0, 2], which is full jitter from 100 ms to 10 s | no full or decorrelated jitter by name; its budget is optional and counts retries in flight, not retries per request over time; Retry-After only as integer seconds, on 429/503, uncapped; retries every method; copies `+"`bytes.Reader`"+` and plain io.Reader bodies with io.ReadAll |
| rehttp | `+"`NewTransport(base, RetryAll(RetryMaxRetries(3), RetryHTTPMethods(idempotent), RetryAny(RetryStatuses(408, 429, 500, 502, 503, 504), any error but cancellation)), ExpJitterDelay(100ms, 10s))`"+` | no defaults at all; no budget; no Retry-After; copies every request body into a buffer and replaces the caller's `+"`req.Body`"+` |

The opt-ins path has libraries of its own (`+"`bench.OptIns`"+`), described in its section.

retryhttp alone of the four also skips a wait that would end past the caller's deadline (the
others wait until the context ends), caps Retry-After (30 s), adds idempotency keys on request,
and keeps nested retrying transports to one layer.

## Reproduce

From the repository root:

`+"```"+`
%s
`+"```"+`

`+"`bench/run.sh`"+` runs the commands above and writes this file (about 5 minutes on 2 cores,
longer on a busy machine); the raw results stay in `+"`bench/results/`"+` (not committed), the CPU profiles in
`+"`bench/results/profiles/`"+` (`+"`PROFILE_CPU`"+` sets the CPU time of each, 3 s by default; 0
skips them).
With `+"`MAX_LOAD`"+` set it first waits, up to `+"`MAX_WAIT`"+` seconds, for the 1-minute load
average to fall to that. benchstat, which summarises the scenarios' runs, is the version pinned
by the `+"`tool`"+` directive of `+"`bench/go.mod`"+`.
`, commands)
}
