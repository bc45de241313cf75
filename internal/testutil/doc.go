// Package testutil holds the helpers that the tests of the core and of its
// companion modules share: an in-memory base transport and the answers it
// is scripted with (base.go), request and response helpers (request.go),
// bodies that record how they are closed (body.go), loopback servers and
// transports (loopback.go), a scripted HTTP/2 server (h2server.go), the
// real errors of connections closed under a request and a proxy that cuts
// connections (neterrors.go), an in-memory network for real servers and
// clients in fake time (memnet.go), a backend that restarts under a
// ledger of POSTs (backend.go), a load on a schedule with a monitor of the
// scheduler's lag (schedule.go), the loop of a RoundTrip benchmark
// (bench.go), and the order a report lists failures in (report.go). Only
// tests import it; it imports nothing of the core but its public test
// server, package retryhttptest, so that the core's own tests may import
// it too.
package testutil
