// Package bench measures retryhttp against the Go retry libraries users
// choose between it and: hashicorp/go-retryablehttp (through its
// RoundTripper adapter and its own client API), failsafe-go (its
// failsafehttp package) and PuerkitoBio/rehttp, plus the bare base
// transport as the floor.
//
// It is a module of its own so that users of retryhttp never download the
// peers. Equal returns the libraries configured as alike as their APIs
// allow, for the measured paths (Cases): the success path of a GET, of a
// PUT of 1 MiB and of a POST of 1 KiB (not retried), and the retry path, on
// an in-memory base, and GETs over loopback from 1, 16 and 64 callers at
// once. OptIns returns retryhttp with hedging or adaptive throttling on,
// and failsafe-go's policies that do the same, for one more in-memory path
// (PathOptIns): what those policies cost a GET they do not act on. Every
// path is measured on realistic answers (Realistic: about six header
// fields and a small body, which the caller reads to its end and closes,
// and which the failed answers of the retry path carry too) and on empty
// ones (Empty), as two paths (Variant).
// Interleave runs them in rounds, in CPU time, every library once a round
// in a rotated order (cmd/measure); ProfileCPU runs one with the CPU
// profiler on (cmd/profile, for retryhttp's rows); the Benchmark functions
// run the same cases for go test -bench.
//
// Defaults returns the libraries as a user gets them, for the scenarios,
// run in fake time, on realistic answers: the storm (TestStorm: one busy
// client through a long outage), the fleet (TestFleet: many quiet clients through an outage),
// the blip (TestBlip: a crowd of callers through a short outage) and the
// overload (TestOverload: one client offering a dependency three times
// what it serves, then less, with OverloadLibs: Defaults' libraries plus
// retryhttp with adaptive throttling and failsafe-go with its circuit
// breaker). go test runs quick variants of the scenarios; -scenarios.full
// runs them at the size BENCHMARKS.md reports.
//
// Waiting is what a request costs while it waits to be retried: many
// concurrent GETs through one client during an outage, the heap and the
// goroutine stacks they hold while they wait, and the time to serve them
// all after the recovery, in real time, each library in a process of its
// own (cmd/waiting, which writes WAITING.md with WriteWaitingReport;
// TestWaiting runs it small).
//
// run.sh runs everything else and writes BENCHMARKS.md at the repository
// root.
package bench
