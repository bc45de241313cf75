package retryhttp

// A layer above that retries too (an SDK): its retries with one
// idempotency key add up with the Transport's instead of multiplying, and
// its attempt headers make the Transport stand down. The Transport
// remembers the keys it sent lately at a fixed cost per key, whatever its
// length.

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// sdkCharge is an SDK's retry loop, as stripe-go's: up to tries POSTs with
// one idempotency key, while the answer is a 429.
func sdkCharge(t *testing.T, client *http.Client, url string, tries int) {
	t.Helper()
	for range tries {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("amount=100"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "charge-42")
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			return
		}
	}
}

// An SDK that tries 3 times with one key over a Transport that makes up to
// 4 attempts: the Transport knows the key's second and third tries for the
// SDK's retries and stands down, so the server sees 4+1+1 attempts, not 12.
func TestSDKRetriesWithOneKeyAddUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   func(*Transport)
		want int
	}{
		{"one Transport", func(*Transport) {}, 6},
		// A Transport per try (a client made per call) cannot know.
		{"a Transport per try", nil, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testutil.NewServer(t, retryhttptest.Status(http.StatusTooManyRequests))
			base := testutil.LoopbackBase(t)
			p := Policy{Backoff: Constant(time.Millisecond)}
			tr := &Transport{Base: base, Policy: p, Budget: UnlimitedBudget()}
			client := &http.Client{Transport: tr}
			if tc.tr == nil {
				for range 3 {
					c := &http.Client{Transport: &Transport{Base: base, Policy: p, Budget: UnlimitedBudget()}}
					sdkCharge(t, c, srv.URL, 1)
				}
			} else {
				sdkCharge(t, client, srv.URL, 3)
				assert.EqualValues(t, 2, tr.Stats().RetriesFromAbove)
			}
			assert.Len(t, srv.Requests(), tc.want)
		})
	}
}

// A request whose SDK attempt header says it is a retry is sent once; a
// first try is retried as usual.
func TestSDKAttemptHeadersStandDown(t *testing.T) {
	for _, tc := range []struct {
		header, value string
		attempts      int
	}{
		{"Amz-Sdk-Request", "attempt=1; max=3", 4},
		{"Amz-Sdk-Request", "attempt=2; max=3", 1},
		{"amz-sdk-request", "max=3;attempt=3", 1},
		{"Amz-Sdk-Request", "attempt=x; max=3", 4},
		{"X-Stainless-Retry-Count", "0", 4},
		{"X-Stainless-Retry-Count", "1", 1},
		{"X-Stainless-Retry-Count", "-1", 4},
	} {
		t.Run(fmt.Sprintf("%s: %s", tc.header, tc.value), func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.Statuses(503)}
			tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
			req := testutil.NewRequest(t, http.MethodGet, "http://api.test/", nil)
			req.Header.Set(tc.header, tc.value)
			sendOK(t, tr, req)
			assert.Equal(t, tc.attempts, base.Attempts())
		})
	}
}

// No key where no retry can follow: a POST that an SDK marks as its
// retry is sent once (the SDK does the retrying), and gets no generated
// key, as under MaxAttempts 1; the SDK's first try gets one. Found by
// review, then by the simulation's key check (internal/sim).
func TestAnSDKsRetryGetsNoGeneratedKey(t *testing.T) {
	for _, tc := range []struct {
		value string
		key   bool
	}{{"attempt=1; max=3", true}, {"attempt=2; max=3", false}} {
		t.Run(tc.value, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.Statuses(http.StatusCreated)}
			tr, _ := fakeTransport(base, Policy{Backoff: Constant(0), IdempotencyKeys: &IdempotencyKeys{}}, 0)
			req := testutil.NewRequest(t, http.MethodPost, "http://api.test/charges", strings.NewReader("amount=100"))
			req.Header.Set("Amz-Sdk-Request", tc.value)
			sendOK(t, tr, req)
			require.Equal(t, 1, base.Attempts())
			assert.Equal(t, tc.key, base.Request(1).Header.Get(defaultKeyHeader) != "", "a generated key")
		})
	}
}

// A request that may make one attempt is not "attempts exhausted": retries
// are off for it, by MaxAttempts 1 or because an SDK above retries it.
func TestOneAttemptReasons(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(503)}
	tr, ev := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	send := func(req *http.Request) {
		sendOK(t, tr, req)
	}
	send(testutil.Get(t, WithPolicy(t.Context(), Policy{MaxAttempts: 1})))
	req := testutil.Get(t, t.Context())
	req.Header.Set("X-Stainless-Retry-Count", "2")
	send(req)
	send(testutil.Get(t, t.Context()))
	assert.Equal(t, []Reason{ReasonNoRetries, ReasonNoRetries, ReasonExhausted}, ev.reasons())
	s := tr.Stats()
	assert.EqualValues(t, 1, s.GiveUps[ReasonExhausted], "only the request that used its 4 attempts")
}

// An SDK's retry marked by its attempt header, carrying a key the
// Transport sent lately, is sent once and counts for the key: the key's
// next request gets only the attempts left, not MaxAttempts again. Found
// by the simulation (internal/sim).
func TestSDKAttemptHeaderKeepsTheKeysCount(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(http.StatusServiceUnavailable)}
	tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	send := func(sdkAttempt string) {
		req := testutil.NewRequest(t, http.MethodPost, "http://api.test/charges", strings.NewReader("amount=100"))
		req.Header.Set("Idempotency-Key", "charge-7")
		if sdkAttempt != "" {
			req.Header.Set("Amz-Sdk-Request", sdkAttempt)
		}
		sendOK(t, tr, req)
	}
	send("")                 // 4 attempts
	send("attempt=2; max=3") // the SDK's retry: 1
	send("")                 // the key had 5: 1 more
	assert.Equal(t, 6, base.Attempts())
}

// An SDK's tries with one key add up whatever the method: a keyed PUT or
// DELETE that a layer above sends again gets only the attempts its key has
// left, as a keyed POST does, with or without IdempotencyKeys on (before
// the fix, a PUT whose key had made 4 attempts got 4 more).
func TestSDKRetriesOfAnIdempotentMethodWithOneKeyAddUp(t *testing.T) {
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		for _, keys := range []*IdempotencyKeys{nil, {}} {
			t.Run(fmt.Sprintf("%s, keys on %v", method, keys != nil), func(t *testing.T) {
				base := &testutil.Base{Answer: testutil.Statuses(http.StatusServiceUnavailable)}
				tr := &Transport{Base: base, Budget: UnlimitedBudget(),
					Policy: Policy{Backoff: Constant(0), IdempotencyKeys: keys}}
				for range 3 { // the SDK's tries
					req := testutil.NewRequest(t, method, "http://api.test/things/7", strings.NewReader("name=x"))
					req.Header.Set("Idempotency-Key", "put-7")
					sendOK(t, tr, req)
				}
				assert.Equal(t, 4+1+1, base.Attempts(), "the key's attempts add up")
				assert.EqualValues(t, 2, tr.Stats().RetriesFromAbove)
			})
		}
	}
}

// A gateway forwarding its clients' keys, here of 1 MiB each, keeps none of
// them whole: 32 such requests leave the Transport holding far less than
// the 32 MiB of their keys.
func TestOuterMemoryDoesNotKeepLongKeysWhole(t *testing.T) {
	tr := &Transport{Base: testutil.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		return testutil.Response(req, http.StatusCreated, nil, "created"), nil
	})}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	for i := range 32 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://api.test/orders", nil)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", fmt.Sprint(i, strings.Repeat("k", 1<<20)))
		sendOK(t, tr, req)
	}

	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, held, int64(4<<20), "bytes the Transport holds")
	runtime.KeepAlive(tr)
}
