package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"
)

// TestDemoPrintsEachRow runs the demo and checks every line it prints:
// each scene's attempts, connections, outcome, waits and give-up reason,
// and the outage scene's figures for each budget.
func TestDemoPrintsEachRow(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out strings.Builder
	demo(&out)
	text := out.String()

	const wait = `(0s|\d+ms)` // a backoff wait, rounded to the millisecond
	lines := []struct{ what, want string }{
		{"title", `retryhttp demo: requests to a local server that fails transiently`},
		{"", ``},
		{"header", `SCENE +REQUEST +ATTEMPTS +CONNS +OUTCOME`},
		{"rule", `----- +------- +-------- +----- +-------`},
		{"503s", `503s +GET /unavailable-twice +3 +1 +200 ok`},
		{"503s waits", ` +waited ` + wait + ` in line after 503, ` + wait + ` in line after 503`},
		{"reset", `reset +GET /reset-once +2 +2 +200 ok`},
		{"reset wait", ` +waited ` + wait + ` in line after connection reset by peer`},
		{"429", `429 +GET /rate-limited +2 +1 +200 ok`},
		{"429 wait", ` +waited 1(\.\d{1,3})?s Retry-After after 429`},
		{"hung", `hung +GET /hang-once +2 +2 +200 ok`},
		{"hung wait", ` +waited ` + wait + ` in line after attempt timeout \(200ms\)`},
		{"not found", `not found +GET /missing +1 +1 +404 no such endpoint`},
		{"POST, no key", `POST, no key +POST /charge-503 +1 +1 +503 try later`},
		{"POST, no key: why", ` +gave up: not idempotent`},
		{"POST, key", `POST, key +POST /charge +2 +2 +200 charged: 1 charge in all, key [0-9a-f]{8}…`},
		{"POST, key: wait", ` +waited ` + wait + ` in line after connection reset by peer`},
		{"", ``},
		{"note", `CONNS counts the connections the server saw: a failed attempt's response is drained`},
		{"note", `so that the next attempt reuses its connection; a reset or hung attempt needs a new one.`},
		{"note", `POST /charge charges, then loses its response; the retry carries the same key and is`},
		{"note", `answered from the server's record. After a failure, a retry waits in the budget's line`},
		{"note", `for news of the server: another request's success, or 100-200 ms without news \(then twice\),`},
		{"note", `when it goes as a probe; a server's Retry-After is no failure, and is waited as it asks.`},
		{"", ``},
		{"outage", `Outage: 200 GETs a second through each Transport; the endpoint answers 503 for 1.5s, over`},
		{"outage", `20 times a request's whole backoff schedule \(MaxAttempts 4, full jitter 10ms..100ms\), then 200.`},
		{"", ``},
		{"outage header", ` +NO BUDGET +DEFAULT BUDGET`},
		{"outage: sent while down", `requests sent while it was down +300 +300`},
		// About 4 attempts each without a budget (a few of the last requests
		// meet the endpoint back on a retry), about 1 with it: the first
		// attempts and a few probes.
		// A busy machine (or -race) slows the load and moves arrivals out
		// of the outage's window, so the figures are checked as bounds
		// below: at most 4 without a budget, at most 1.2 with the default
		// budget, and fewer with it than without.
		{"outage: attempts per request", `attempts per request while it was down +(\d\.\d\d) +(\d\.\d\d)`},
		// Without a budget the few requests sent in the outage's last
		// moments whose retries meet the endpoint back; with it, each one
		// whose retries waited in line for the endpoint's return.
		{"outage: served while down", `  of them served +\d{1,3} +(29\d|300)`},
		{"outage: sent once back", `requests sent once it was back +100 +100`},
		{"outage: served once back", `  of them served +100 +100`},
		{"outage: served again within a second", `every caller served again, once it was back, within +0\.\d\ds +0\.\d\ds`},
		{"", ``},
		{"budget note", `The default budget holds 10 retries of credit and earns 0.55 of one per success. An outage`},
		{"budget note", `spends little: a failure marks the server down, and its retries then wait in line \(within`},
		{"budget note", `their deadline, or 10 s\) instead of reaching it; a probe tests it at backoff pace, and its`},
		{"budget note", `first success lets the line go as a ramp.`},
	}
	got := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		if i >= len(got) {
			t.Errorf("line %d (%s) missing", i+1, l.what)
			continue
		}
		assert.Regexp(t, "^"+l.want+"$", got[i], "line %d: %s", i+1, l.what)
	}
	assert.Len(t, got, len(lines), "lines printed:\n%s", text)
	for _, line := range got {
		var none, budget float64
		if _, err := fmt.Sscanf(line, "attempts per request while it was down %f %f", &none, &budget); err == nil {
			assert.LessOrEqual(t, none, 4.0, "without a budget")
			assert.LessOrEqual(t, budget, 1.2, "with the default budget")
			assert.Less(t, budget, none, "fewer attempts with the budget")
		}
	}
	for i, line := range got {
		assert.LessOrEqual(t, len([]rune(line)), 100, "line %d is wider than 100 columns: %q", i+1, line)
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}
