// Package bench measures retryhttp against the Go retry libraries users
// choose between it and: hashicorp/go-retryablehttp, failsafe-go (its
// failsafehttp package) and PuerkitoBio/rehttp, plus the bare base transport
// as the floor.
//
// It is a module of its own so that users of retryhttp never download the
// peers. Equal returns the libraries configured as alike as their APIs allow,
// for the benchmarks of the success path, the retry path and loopback;
// Defaults returns them as a user gets them, for the budget scenarios, run in
// fake time: the storm (TestStorm: one busy client through a long outage),
// the fleet (TestFleet: many quiet clients through an outage) and the blip
// (TestBlip: a crowd of callers through a short outage). go test runs quick
// variants of the scenarios; -scenarios.full runs them at the size
// BENCHMARKS.md reports.
//
// run.sh runs everything and writes BENCHMARKS.md at the repository root.
package bench
