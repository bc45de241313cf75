package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A line the demo prints: what it is, and a regular expression it must
// match whole.
type line struct{ what, want string }

// sceneLines are the lines of the scenes' table and its notes. The scenes
// run on loopback in real time: the waits are the backoff's draws.
func sceneLines() []line {
	const wait = `(0s|\d+ms)` // a backoff wait, rounded to the millisecond
	return []line{
		{"title", `retryhttp demo: requests to a local server that fails transiently`},
		{"", ``},
		{"intro", `Each request goes through its own retryhttp.Transport: up to 4 attempts, and before each`},
		{"intro", `retry a backoff \(a random wait, here under 50 ms before the first retry, doubling after\)`},
		{"intro", `or the wait the server asked for \(Retry-After\).`},
		{"", ``},
		{"header", `SCENE +REQUEST +ATTEMPTS +CONNS +OUTCOME`},
		{"rule", `----- +------- +-------- +----- +-------`},
		{"503s", `503s +GET /unavailable-twice +3 +1 +200 ok`},
		{"503s waits", ` +waited ` + wait + ` \(backoff\) after 503, ` + wait + ` \(backoff\) after 503`},
		{"reset", `reset +GET /reset-once +2 +2 +200 ok`},
		{"reset wait", ` +waited ` + wait + ` \(backoff\) after connection reset by peer`},
		{"429", `429 +GET /rate-limited +2 +1 +200 ok`},
		{"429 wait", ` +waited 1(\.\d{1,3})?s \(Retry-After\) after 429`},
		{"hung", `hung +GET /hang-once +2 +2 +200 ok`},
		{"hung wait", ` +waited ` + wait + ` \(backoff\) after attempt timeout \(200ms\)`},
		{"not found", `not found +GET /missing +1 +1 +404 no such endpoint`},
		{"POST, no key", `POST, no key +POST /charge-503 +1 +1 +503 try later`},
		{"POST, no key: why", ` +gave up: not idempotent`},
		{"POST, key", `POST, key +POST /charge +2 +2 +200 charged: 1 charge in all, key [0-9a-f]{8}…`},
		{"POST, key: wait", ` +waited ` + wait + ` \(backoff\) after connection reset by peer`},
		{"", ``},
		{"note", `CONNS counts the connections the server saw: a failed attempt's response is drained`},
		{"note", `so that the next attempt reuses its connection; a reset or hung attempt needs a new one.`},
		{"note", `POST is retried only with an idempotency key: POST /charge charges, then loses its`},
		{"note", `response; the retry carries the same key and is answered from the server's record.`},
		{"", ``},
	}
}

// outageLines are the lines of the outage scene, its figures as figures
// says: the shape of each, or what the scene in fake time gives.
func outageLines(figures map[string]string) []line {
	return []line{
		{"outage", `Outage: 200 GETs a second through each of two Transports; the endpoint answers 503 for`},
		{"outage", `1.5s, longer than a request's whole backoff schedule \(here at most 70ms\), then 200 again.`},
		{"budget", `One Transport has no budget. The other has the default budget, which bounds each host's`},
		{"budget", `retries: a retry spends one of its credit \(10 retries, earning 0.55 of one per success and`},
		{"budget", `refilling in 10 s\). While other requests to the host fail, a retry waits in the host's line`},
		{"budget", `instead: one goes now and then as a probe, and the host's first success lets the line go.`},
		{"budget", `A request alone gets its backoff, as in the scenes above.`},
		{"", ``},
		{"outage header", ` +NO BUDGET +DEFAULT BUDGET`},
		{"outage: sent while down", `requests sent while it was down +` + figures["sent"]},
		{"outage: attempts per request", `attempts it got while down, per request sent +` + figures["attempts"]},
		{"outage: served while down", `requests sent while down, served in the end +` + figures["served"]},
		{"outage: once back", `requests sent once it was back, served +` + figures["back"]},
	}
}

// The shape of the outage's figures in real time, where a busy machine
// slows the load and moves arrivals out of the outage's window.
var outageShape = map[string]string{
	"sent":     `\d+ +\d+`,
	"attempts": `\d+\.\d\d +\d+\.\d\d`,
	"served":   `\d+ +\d+`,
	"back":     `\d+/\d+ +\d+/\d+`,
}

// checkLines checks that text is lines, each matching its regular
// expression whole, and none wider than 100 columns.
func checkLines(t *testing.T, text string, lines []line) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		if i >= len(got) {
			t.Errorf("line %d (%s) missing", i+1, l.what)
			continue
		}
		assert.Regexp(t, "^"+l.want+"$", got[i], "line %d: %s", i+1, l.what)
	}
	assert.Len(t, got, len(lines), "lines printed")
	for i, line := range got {
		assert.LessOrEqual(t, len([]rune(line)), 100, "line %d is wider than 100 columns: %q", i+1, line)
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// TestDemoPrintsEachRow runs the demo as a user does, on loopback in real
// time, and checks every line it prints: each scene's attempts,
// connections, outcome, waits and give-up reason, and the outage scene's
// rows (their figures, which depend on time, TestOutageFigures checks in
// fake time).
func TestDemoPrintsEachRow(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out strings.Builder
	demo(&out)
	checkLines(t, out.String(), append(sceneLines(), outageLines(outageShape)...))
}

// TestOutageFigures runs the outage scene in fake time (testing/synctest),
// on an in-memory network: the load keeps to its schedule exactly, and the
// outage, the backoffs and the budget's waits last what they say.
func TestOutageFigures(t *testing.T) {
	var out strings.Builder
	synctest.Test(t, func(*testing.T) { outage(&out, &testutil.MemNet{}) })
	t.Log("\n" + out.String())
	checkLines(t, out.String(), outageLines(map[string]string{
		"sent": `300 +300`,
		// About 4 attempts each without a budget (a few of the last requests
		// meet the endpoint back on a retry), about 1 with it: the first
		// attempts, and a few probes.
		"attempts": `(\d\.\d\d) +(\d\.\d\d)`,
		// Without a budget the few requests sent in the outage's last
		// moments whose retries meet the endpoint back; with it, each one
		// whose retries waited in line for the endpoint's return (but, now
		// and then, the first, alone: it gets its backoff and gives up).
		"served": `\d{1,2} +(299|300)`,
		"back":   `100/100 +100/100`,
	}))
	m := regexp.MustCompile(`attempts it got while down, per request sent +(\S+) +(\S+)`).FindStringSubmatch(out.String())
	if assert.NotNil(t, m) {
		var none, budget float64
		fmt.Sscan(m[1], &none)
		fmt.Sscan(m[2], &budget)
		assert.InDelta(t, 3.95, none, 0.05, "without a budget: 4 attempts, but for the last requests'")
		assert.LessOrEqual(t, budget, 1.05, "with the default budget: the first attempts, and a few probes")
	}
}
