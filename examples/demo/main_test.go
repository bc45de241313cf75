package main

import (
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

// sceneLines are the lines of the introduction and of the scenes' table.
// The scenes run on loopback in real time: the waits are the backoff's
// draws, and the Retry-After's wait 1 s and up to 10 % more.
func sceneLines() []line {
	const wait = `(0s|\d+ms)` // a backoff wait, rounded to the millisecond
	return []line{
		{"title", `retryhttp demo: requests through retryhttp to a local server that fails on purpose`},
		{"", ``},
		{"intro", `A retryhttp\.Transport sends a request again when an attempt \(one sending of it\) fails in a way`},
		{"intro", `that may pass: a 503 or 429 status, a reset connection, no answer in time\. It makes up to 4`},
		{"intro", `attempts\. Before each retry it waits a backoff, a random wait \(here under 50 ms before the`},
		{"intro", `first retry, under twice as long before each next one\), or, if the server said how long in a`},
		{"intro", `Retry\-After header, that long and up to 10 % more, so that clients told the same time do not`},
		{"intro", `all come back at once\.`},
		{"", ``},
		{"intro", `A POST is sent again only if none of it reached the server, or with an idempotency key: a`},
		{"intro", `header, the same on each attempt, by which the server knows a repeat and answers it from its`},
		{"intro", `record instead of charging twice\. The last scene's Transport adds one \(Policy\.IdempotencyKeys\)\.`},
		{"", ``},
		{"intro", `Each scene is one request through a Transport of its own\. ATTEMPTS counts the attempts the`},
		{"intro", `server got, CONNS the connections they came on: a failed attempt's answer is read to its end so`},
		{"intro", `that the next attempt can reuse its connection; after a reset or a hang it needs a new one\.`},
		{"", ``},
		{"header", `SCENE +REQUEST +ATTEMPTS +CONNS +OUTCOME`},
		{"rule", `----- +------- +-------- +----- +-------`},
		{"503s", `503s +GET /unavailable-twice +3 +1 +200 ok`},
		{"503s: waits", ` +waited ` + wait + ` \(backoff\) after 503, ` + wait + ` \(backoff\) after 503`},
		{"reset", `reset +GET /reset-once +2 +2 +200 ok`},
		{"reset: wait", ` +waited ` + wait + ` \(backoff\) after connection reset by peer`},
		{"429", `429 +GET /rate-limited +2 +1 +200 ok`},
		{"429: wait", ` +waited 1(\.0\d{1,2}|\.1)?s \(Retry-After: 1, plus up to 10 %\) after 429`},
		{"hung", `hung +GET /hang-once +2 +2 +200 ok`},
		{"hung: note", ` +its Transport gives each attempt 200 ms \(Policy.AttemptTimeout\)`},
		{"hung: wait", ` +waited ` + wait + ` \(backoff\) after attempt timeout \(200ms\)`},
		{"not found", `not found +GET /missing +1 +1 +404 no such endpoint`},
		{"not found: note", ` +not retried: a 404 is an answer, not a failure that may pass`},
		{"POST, no key", `POST, no key +POST /charge-503 +1 +1 +503 try later`},
		{"POST, no key: note", ` +a POST without a key is sent once: sent again, it might charge twice`},
		{"POST, no key: why", ` +gave up: unsafe to send again`},
		{"POST, key", `POST, key +POST /charge +2 +2 +200 charged: 1 charge in all, key [0-9a-f]{8}…`},
		{"POST, key: note", ` +the server charged, then reset the connection before answering`},
		{"POST, key: wait", ` +waited ` + wait + ` \(backoff\) after connection reset by peer`},
		{"", ``},
		{"timeline", `The last scene's request, POST /charge, as retryhttp\.Timeline tells it \(Policy\.Timeline\):`},
		{"timeline: header", `  ATTEMPT +START +WAIT BEFORE +TOOK +OUTCOME +KEY`},
		{"timeline: 1", `  1 +\+0s +- +` + wait + ` +connection reset by peer +[0-9a-f]{8}…`},
		{"timeline: 2", `  2 +\+` + wait + ` +` + wait + ` \(backoff\) +` + wait + ` +200 +[0-9a-f]{8}…`},
		{"", ``},
	}
}

// outageLines are the lines of the outage scene, its figures as figures
// says: the shape of each, or what the scene in fake time gives.
func outageLines(figures map[string]string) []line {
	return []line{
		{"outage", `Outage: 200 GETs a second for 2\.2 s through each of two Transports, to an endpoint that`},
		{"outage", `answers 503 from 0\.2 s to 1\.7 s, longer than a request's 3 backoffs \(here under 10, 20 and 40 ms\)\.`},
		{"outage", `One Transport has no budget: it retries every failure \(UnlimitedBudget\)\. The other has the`},
		{"outage", `default retry budget, which keeps retries from piling onto a host \(URL host and port\) that fails:`},
		{"outage", ` \- A request alone \(no other to its host in flight\), as each scene above, gets its retries,`},
		{"outage", `   paid from the host's credit: 10 retries, refilled in 10 s; a retry that succeeds gives its`},
		{"outage", `   one back, any other success earns 0\.55 of one; a wait a server asked for costs nothing\.`},
		{"outage", ` \- Once another request has failed the host, a retry waits in the host's line instead of going`},
		{"outage", `   after its backoff; each success of the host lets go the retries the credit pays for\. With no`},
		{"outage", `   news of the host, the oldest goes as a probe after a silence of its longest backoff \(here 10,`},
		{"outage", `   20 or 40 ms; none goes here: a failure every 5 ms is news\)\.`},
		{"outage", ` \- A retry waits in line only while its request's schedule lasts: the longest the backoffs of`},
		{"outage", `   its retries left could be \(here 10 \+ 20 \+ 40 = 70 ms from its first failure\), plus its`},
		{"outage", `   attempts' time, or the wait a server asked for in Retry-After; and never past its deadline\.`},
		{"outage", `   Then it goes if the host's last answer was a success; if not, the request ends, and its`},
		{"outage", `   caller gets its last failure \(here a 503\)\.`},
		{"", ``},
		{"outage: header", ` +NO BUDGET +DEFAULT BUDGET`},
		{"outage: sent during", `requests sent during the outage +` + figures["sent"]},
		{"outage: attempts during", `  attempts the endpoint got during it, per request +` + figures["during"]},
		{"outage: attempts after", `  attempts it got after the outage, per request +` + figures["after"]},
		{"outage: served", `  served in the end +` + figures["served"]},
		{"outage: longest wait", `  longest a request waited for its answer +` + figures["wait"]},
		{"outage: sent after", `requests sent after the outage, served +` + figures["back"]},
		{"", ``},
		{"summary", `So the budget kept the failing endpoint to about one attempt per request, and it did not hold`},
		{"summary", `the callers: each request ended within its schedule, no later than it could have without a`},
		{"summary", `budget, so callers do not pile up on a dead host\. Either way, few requests sent during the`},
		{"summary", `outage were served: those sent in its last 70 ms or so, whose schedules outlasted it \(with`},
		{"summary", `the budget, those still in line at the endpoint's first success, which let them go\)\.`},
	}
}

// The shape of the outage's figures in real time, where a busy machine
// slows the load and moves arrivals out of the outage's window.
var outageShape = map[string]string{
	"sent":   `\d+ +\d+`,
	"during": `\d+\.\d\d +\d+\.\d\d`,
	"after":  `\d+\.\d\d +\d+\.\d\d`,
	"served": `\d+ +\d+`,
	"wait":   `\d+\.\d\ds +\d+\.\d\ds`,
	"back":   `\d+/\d+ +\d+/\d+`,
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

// lagNote is the line the outage scene adds under its table when a busy
// machine held its load up.
var lagNote = regexp.MustCompile(`^\(the machine held the load up for \S+ at once, which may skew these figures\)$`)

// TestDemoPrintsEachRow runs the demo as a user does, on loopback in real
// time, and checks every line it prints: the introduction, each scene's
// attempts, connections, outcome, note, waits and give-up reason, and the
// outage scene's text and rows (their figures, which depend on time,
// TestOutageFigures checks in fake time; a busy machine may add a note).
func TestDemoPrintsEachRow(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out strings.Builder
	demo(&out)
	var kept []string
	for _, l := range strings.SplitAfter(out.String(), "\n") {
		if !lagNote.MatchString(strings.TrimSuffix(l, "\n")) {
			kept = append(kept, l)
		}
	}
	checkLines(t, strings.Join(kept, ""), append(sceneLines(), outageLines(outageShape)...))
}

// TestOutageFigures runs the outage scene in fake time (testing/synctest),
// on an in-memory network: the load keeps to its schedule exactly, and the
// outage, the backoffs and the budget's waits last what they say.
func TestOutageFigures(t *testing.T) {
	var out strings.Builder
	synctest.Test(t, func(*testing.T) { outage(&out, &testutil.MemNet{}) })
	t.Log("\n" + out.String())
	checkLines(t, out.String(), outageLines(map[string]string{
		// 1.5 s of outage at 200 a second, each sent on time in fake time.
		"sent": `300 +300`,
		// Without a budget, each request makes its 4 attempts during the
		// outage, but for those served (see "served"): one sent 5j ms before
		// its end makes only 1 to 3 of them in it, as its backoffs (under 10,
		// 20 and 40 ms) reach past the end: 3 short at most for j = 1, 2 for
		// j <= 5 (the first two waits are under 30 ms), 1 for j <= 13; 19 in
		// all, so 3.94 (1181 of 300) to 4.00. With the budget, the 300 first
		// attempts and the retries of requests alone, paid from the credit:
		// the outage's first request (the one before it was served) gets a
		// retry, and another each time it fails again before the next request
		// fails, 5 ms later: 1 to 3; should it end within those 5 ms (a chance
		// of 1 in 400), the next one is alone too. Every other retry waits in
		// line, and no probe goes (a failure every 5 ms is news). So 301 to
		// 310 of 300, the credit's 10 retries at most: 1.00 to 1.03.
		"during": `(3\.9[4-9]|4\.00) +1\.0[0-3]`,
		// One attempt after the outage for each request served (its first one
		// there succeeds), none for the others: without a budget 0 to 13 (up
		// to 0.043 a request), with it 13 or 14 (0.043 or 0.047): see "served".
		"after": `0\.0[0-4] +0\.0[45]`,
		// A request is served if an attempt of it comes after the outage.
		// Without a budget its 3 backoffs take under 70 ms, so only one sent
		// in the outage's last 65 ms (1.635 to 1.695 s: 13) may be, if its
		// draws reach past the end (about half do). With the budget, each of
		// those 13: its first retry waits in line until 70 ms after its first
		// failure, so it is still there at 1.7 s, when the first success (a
		// first attempt) lets go the retries in line the host's credit pays
		// for (8.5 retries or more left), and each retry that succeeds gives
		// its retry back. The one sent at
		// 1.630 s leaves the line at 1.7 s too: it is served only if that
		// first success is heard first (14).
		"served": `([0-9]|1[0-3]) +1[34]`,
		// Attempts take no time in fake time. Without a budget, a failing
		// request ends after its 3 backoffs, under 70 ms in all; of the 287
		// or more that draw all three, one comes past 55 ms but for a chance
		// of about 2e-9. With the budget, a retry waiting in line leaves it
		// when its request's schedule ends, 10 + 20 + 40 = 70 ms after its
		// first failure (for the outage's first request too: what its retries
		// from the credit left unused of their longest waits counts in), and
		// its request ends then (69.999997 ms: each longest draw is truncated
		// to the nanosecond); the served ones end sooner: 0.07 s.
		"wait": `0\.0[67]s +0\.07s`,
		// The endpoint is back: each first attempt is served, with the
		// budget too (a first attempt never waits for it).
		"back": `100/100 +100/100`,
	}))
}
