// Package bench measures retryhttp against the Go retry libraries users
// choose between it and: hashicorp/go-retryablehttp, failsafe-go (its
// failsafehttp package) and PuerkitoBio/rehttp, plus the bare base transport
// as the floor.
//
// It is a module of its own so that users of retryhttp never download the
// peers. Equal returns the libraries configured as alike as their APIs allow,
// for the benchmarks of the success path, the retry path and loopback;
// Defaults returns them as a user gets them, for the storm (TestStorm): a
// fleet of clients sending a steady stream of requests to a dependency that
// is down for a while, in fake time.
//
// run.sh runs everything and writes BENCHMARKS.md at the repository root.
package bench
