package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

const defaultMaxAttempts = 4 // a zero Policy's MaxAttempts

// TestMain fails the tests if a server, connection or call of the run
// outlives it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The tests of the rows run each scenario in fake time (testing/synctest),
// its servers and clients on an in-memory network (testutil.MemNet): the
// load keeps to its schedule exactly, and each deadline, backoff, wait in
// line and throttle window lasts what it says, however busy the machine.
// The test of the output runs the program as a user does, on loopback in
// real time, and checks what it prints, not its figures.

// testScale runs the overload 10 times faster than real time, as the
// program does by default: 6 s at 300/s, 2 s at 80/s, a throttle window
// of 1 s. (The backoffs and the budget's waits are not scaled: at 30 times,
// a window of 333 ms, the retries of the 300/s phase still meet the
// throttle after one window at 80/s in about one run in 80.)
const testScale = 10

// inFakeTime runs the variants of rows side by side with run, in a
// testing/synctest bubble, with a 1 ms backoff, the overload scaled by
// testScale, on an in-memory network.
func inFakeTime[R any](t *testing.T, rows []R, run func(*R, config)) {
	t.Helper()
	synctest.Test(t, func(*testing.T) {
		cfg := config{Backoff: retryhttp.Constant(time.Millisecond), Scale: testScale, net: &testutil.MemNet{}}
		var wg sync.WaitGroup
		for i := range rows {
			wg.Go(func() { run(&rows[i], cfg) })
		}
		wg.Wait()
	})
}

// Each service makes the default 4 attempts: without a budget and
// without AdviceHandler the attempts multiply; with AdviceHandler, only
// the service right above the one that is down retries. With the default
// budget, each call of the middle service is alone and gets its retries
// while its credit lasts: the last service sees at most one layer's
// attempts and the credit's retries, and with AdviceHandler one layer's.
// Every request is answered (503) within its 2 s deadline.
func TestChainRowsRetryAtOneLayer(t *testing.T) {
	rows := newReport().Chain
	inFakeTime(t, rows, runChain)
	const n = defaultMaxAttempts
	require.Len(t, rows, 4)
	for _, row := range rows {
		name := fmt.Sprintf("verdict %v, unlimited %v", row.Verdict, row.Unlimited)
		t.Logf("%s: %+v", name, row)
		require.NoError(t, row.Err, name)
		assert.Equal(t, 503, row.Status, name)
		assert.Less(t, row.Took, chainDeadline, name)
		if !row.Unlimited {
			// The middle service's calls come one at a time, each alone:
			// the first attempts, and the retries its credit pays for.
			limit := int32(n + 10) // 10: the default Budget's credit
			if row.Verdict {
				limit = n
			}
			assert.LessOrEqual(t, row.AtLast, limit, "%s: requests at the last service", name)
			assert.Positive(t, row.AtLast, name)
			continue
		}
		want := int32(n * n)
		if row.Verdict {
			want = n
			assert.Equal(t, "false", row.ShouldRetry, "the first service's 503 follows a call that gave up")
		} else {
			assert.Empty(t, row.ShouldRetry)
		}
		assert.Equal(t, want, row.AtLast, "%s: requests at the last service", name)
	}
}

// A host that serves 100/s offered 300/s: without throttling it receives
// over twice what it accepts (2.5 times); with it, about K = 2 times, at the same
// goodput, and once the load is back within its capacity, every call
// after one window succeeds.
func TestOverloadRowsThrottleToK(t *testing.T) {
	rows := newReport().Overload
	inFakeTime(t, rows, runOverload)
	require.Len(t, rows, 2)
	for _, row := range rows {
		name := map[bool]string{false: "no throttling", true: "throttling"}[row.Throttle]
		t.Logf("%s: %+v", name, row)
		assert.Equal(t, hotRate*int(hotFor/time.Second)/testScale, row.Offered, name)
		assert.LessOrEqual(t, row.Goodput(), float64(capacity), "%s: the dependency serves at most its capacity", name)
		assert.GreaterOrEqual(t, row.Goodput(), 0.9*capacity, "%s: and is kept busy", name)
		assert.GreaterOrEqual(t, row.Received, row.Accepted, name)
		assert.Zero(t, row.Lag, "%s: the load kept to its schedule", name)
		require.Positive(t, row.LateCalls, name)
		assert.GreaterOrEqual(t, float64(row.LateOK)/float64(row.LateCalls), 0.95, "%s: after a window at 80/s", name)
		if row.Throttle {
			// About K = 2, and the budget's retries beside (1.96 to 2.19
			// over 100 runs; 2.54 without throttling).
			assert.LessOrEqual(t, row.Ratio(), 2.4, "%s: received per accepted", name)
			assert.Less(t, row.Received, rows[0].Received, "%s: the host receives less than without throttling", name)
			assert.Positive(t, row.Rejected, name)
			assert.GreaterOrEqual(t, row.Denied, uint64(row.Rejected), "%s: every call never sent was an attempt rejected", name)
		} else {
			assert.Greater(t, row.Ratio(), 2.0, "%s: received per accepted", name)
			assert.Zero(t, row.Rejected, name)
			assert.Zero(t, row.Denied, name)
		}
	}
}

// An SDK's 3 tries with one key over one Transport reach the server at
// most 4+2 times (4: the default MaxAttempts): the Transport stands down for the SDK's
// retries (and the budget may hold a try's last attempt, the host being
// down). Over a Transport per try they multiply: each try's Transport,
// alone, makes its 4.
func TestSDKRowsAddUpOverOneTransport(t *testing.T) {
	rows := newReport().SDK
	inFakeTime(t, rows, runSDK)
	require.Len(t, rows, 2)
	for _, row := range rows {
		require.Len(t, row.PerCharge, charges)
		for i, a := range row.PerCharge {
			if row.Shared {
				assert.LessOrEqual(t, a, defaultMaxAttempts+sdkTries-1, "shared: charge %d", i+1)
				assert.GreaterOrEqual(t, a, sdkTries, "shared: charge %d", i+1)
			} else {
				assert.Equal(t, sdkTries*defaultMaxAttempts, a, "a Transport per try: charge %d", i+1)
			}
		}
		outer := 0
		if row.Shared {
			outer = charges * (sdkTries - 1)
		}
		assert.EqualValues(t, outer, row.RetriesFromAbove, "shared %v", row.Shared)
	}
}

// The program, run on loopback in real time (the overload 60 times
// faster: 1 s at 300/s), prints each table with a line above saying what
// it shows, a lesson below, every row, the notes on the shortened backoff
// and the scaled time, and no line over 100 columns.
func TestOutputFitsAndShowsEveryRow(t *testing.T) {
	var b strings.Builder
	r, err := run(&b, config{Backoff: retryhttp.Constant(time.Millisecond), Scale: 60})
	require.NoError(t, err)
	out := b.String()
	t.Log("\n" + out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		assert.LessOrEqual(t, utf8.RuneCountInString(l), 100, "line %d: %q", i+1, l)
	}
	for _, title := range []string{"1. ", "2. ", "3. "} {
		assert.Contains(t, out, "\n\n"+title)
	}
	assert.Equal(t, 3, strings.Count(out, "\nLesson: "))
	assert.Equal(t, 2, strings.Count(out, "(backoff shortened to a constant 1ms"), "the chain's and the SDK's")
	assert.Contains(t, out, "time runs 60x fast: 1s at 300/s stand for 60s")
	assert.Contains(t, out, "&Throttle{Window: 167ms}")

	rowsStarting := func(prefix string) int {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				n++
			}
		}
		return n
	}
	assert.Equal(t, len(r.Chain), rowsStarting("plain handlers")+rowsStarting("AdviceHandler"))
	assert.Equal(t, len(r.Overload), rowsStarting("no throttling")+rowsStarting("throttling "))
	assert.Equal(t, len(r.SDK), rowsStarting("one shared Transport")+rowsStarting("a Transport per try"))
}

func TestBadScaleIsRefused(t *testing.T) {
	for _, s := range []float64{0, -1, 61, math.NaN(), math.Inf(1)} {
		_, err := run(io.Discard, config{Scale: s})
		assert.Error(t, err, "scale %v", s)
	}
}
