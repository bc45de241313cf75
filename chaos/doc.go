// Package chaos runs retryhttp through real network faults: toxiproxy
// (in-process, on loopback) between an HTTP client and a loopback server
// that behaves like a payments API, over HTTP/1.1 and HTTP/2.
//
// Everything lives in the tests: TestChaos sends the same calls through the
// bare net/http client, retryhttp and go-retryablehttp under each fault and
// checks what retryhttp promises (no request applied twice, no truncated
// body accepted, no call past its deadline, at least the bare client's
// success rate). TestEverydayRealFaults runs four everyday faults
// (resets, a backend restarted behind a reverse proxy, HTTP/2
// connections reset, 429 bursts) through the bare client, retryhttp with and
// without its budget, go-retryablehttp, failsafe-go and rehttp.
// TestResumeThroughToxiproxyCuts has toxiproxy cut a download three times
// and checks that Policy.ResumeResponse continues it where it broke.
// README.md holds the tables the first two print and the commands that
// produced them.
//
// It is a module of its own so that users of retryhttp never download
// toxiproxy or the peers.
package chaos
