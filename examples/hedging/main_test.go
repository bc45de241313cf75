package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestHedgingCutsTheTail runs the example for 1.5 s each way and checks
// what it prints: without hedging, more than 1 % of the requests meet the
// 500 ms answers, so the p99 is one of them; with hedging, a copy rescues
// them and the p99 falls well below, for at most 5 % more requests (6 %
// with the first hedge, free, on a short run). Both runs are compared
// within the same process, with margins wide enough for a loaded machine.
func TestHedgingCutsTheTail(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out strings.Builder
	plain, hedged := compare(&out, 1500*time.Millisecond)
	text := out.String()
	t.Logf("output:\n%s", text)

	require.GreaterOrEqual(t, len(plain.latencies), 200, "requests without hedging")
	require.GreaterOrEqual(t, len(hedged.latencies), 200, "requests with hedging")
	assert.GreaterOrEqual(t, plain.quantile(0.99), slow, "without hedging, 2 of every 100 requests take 500 ms")
	assert.Less(t, hedged.quantile(0.99), slow/2, "hedging's p99 is well below the slow answers")
	assert.Zero(t, plain.stats.Hedges)
	assert.Zero(t, plain.extra(), "no extra request without hedging")
	assert.Positive(t, hedged.stats.Hedges)
	assert.Positive(t, hedged.stats.HedgeWins, "some hedges answered first")
	assert.Less(t, hedged.extra(), 0.06, "hedges are at most 5 % of the requests")
	assert.Equal(t, hedged.stats.Hedges, hedged.stats.Attempts-hedged.stats.Requests, "every extra request is a hedge")
	assert.Greater(t, hedged.delay, fast, "the hedge delay is above the usual latency")
	assert.Less(t, hedged.delay, slow, "and below the slow one")

	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	want := []string{
		`^retryhttp hedging: 8 callers for 1\.5s each way against a local server answering in 5ms,$`,
		`^but in 500ms for 2 of every 100 requests$`,
		`^$`,
		`^ +REQUESTS +P50 +P99 +P99\.9 +EXTRA REQUESTS +HEDGES WON$`,
		`^no hedging +\d+ +\d+\.\d ms +\d+ ms +\d+ ms +0\.0 % +0$`,
		`^hedging +\d+ +\d+\.\d ms +\d+(\.\d)? ms +\d+(\.\d)? ms +\d\.\d % +\d+$`,
		`^$`,
		`^Hedging sent a second copy of each request unanswered after \d+\.\d ms \(the p95 of the host's$`,
		`^latencies\) and took the first answer: the p99 went from \d+ ms to \d+(\.\d)? ms for \d\.\d % more requests\.$`,
	}
	require.Len(t, lines, len(want))
	for i, re := range want {
		assert.Regexp(t, regexp.MustCompile(re), lines[i], "line %d", i+1)
	}
}
