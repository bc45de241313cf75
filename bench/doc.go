// Package bench measures retryhttp against the Go retry libraries users
// choose between it and: hashicorp/go-retryablehttp (through its
// RoundTripper adapter and its own client API), failsafe-go (its
// failsafehttp package) and PuerkitoBio/rehttp, plus the bare base
// transport as the floor. It is a module of its own so that users of
// retryhttp never download the peers.
//
// Equal returns the libraries configured as alike as their APIs allow, for
// the measured paths (Cases): the success path of a GET, of a PUT of 1 MiB
// and of a POST of 1 KiB, and the retry path, on an in-memory base
// (Canned), and GETs over loopback, HTTP/1.1 and HTTP/2, from 1, 16 and 64
// callers at once. Every answer is a realistic one: a few header fields and
// a small body, which the caller reads to its end and closes. Interleave
// runs the cases in rounds, in CPU time, every library once a round in a
// rotated order (cmd/measure); the Benchmark functions run the same cases
// for go test -bench.
//
// Defaults returns the libraries as a user gets them, for the scenarios,
// run in fake time: the storm (TestStorm: one busy client through a long
// outage), the fleet (TestFleet: many quiet clients through an outage), the
// blip (TestBlip: a crowd of callers through a short outage) and the
// overload (TestOverload: one client offering a dependency three times what
// it serves, then less, with OverloadLibs). go test runs quick variants;
// -scenarios.full runs them at the size BENCHMARKS.md reports.
//
// Waiting is what a request costs while it waits to be retried: many
// concurrent GETs through one client during an outage, and the heap and
// goroutine stacks they hold, in real time, each library in a process of
// its own (cmd/waiting, which writes WAITING.md; TestWaiting runs it small).
//
// run.sh runs all of it and writes BENCHMARKS.md at the repository root
// (cmd/report).
//
// cmd/resume, which run.sh does not run, measures a 256 MiB download cut 5
// times through retryhttp resuming the body (Policy.ResumeResponse),
// retrying it whole (Policy.BufferResponse) and a caller's restart; its
// table is in docs/retries.md.
package bench
