package header

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// SDKAttempt reads any value without a panic, and gives an attempt within
// its bounds.
func FuzzSDKAttempt(f *testing.F) {
	for _, seed := range []string{"attempt=2; max=3", "max=3;attempt=1", "attempt=", ";;", "attempt=99999999999", "0", "3"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, name := range []string{"Amz-Sdk-Request", "X-Stainless-Retry-Count"} {
			n := SDKAttempt(http.Header{name: {v}})
			if n < 0 || n > 1<<20 {
				t.Fatalf("%s: %q: attempt %d", name, v, n)
			}
		}
	})
}

// The AWS SDKs send amz-sdk-request: "attempt=N; max=M", N counting from 1
// for the first attempt; the pairs may come in any order. A value without
// a positive attempt says nothing.
func TestSDKAttemptReadsAmzSdkRequest(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
	}{
		{"attempt=1; max=3", 1},
		{"attempt=2; max=3", 2},
		{"max=3; attempt=3", 3},
		{"ttl=20250601T120000Z; attempt=4; max=5", 4},
		{" attempt = 2 ;max=3", 2},
		{"attempt=0; max=3", 0},
		{"attempt=-1; max=3", 0},
		{"attempt=two; max=3", 0},
		{"attempt; max=3", 0},
		{"max=3", 0},
		{"", 0},
	} {
		assert.Equal(t, tc.want, SDKAttempt(http.Header{"Amz-Sdk-Request": {tc.value}}), "%q", tc.value)
	}
}

// The Stainless SDKs send x-stainless-retry-count: the retries made before
// this request, 0 on the first: the attempt is one more. Anything but a
// non-negative integer says nothing.
func TestSDKAttemptReadsStainlessRetryCount(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
	}{
		{"0", 1},
		{"1", 2},
		{" 2 ", 3},
		{"-1", 0},
		{"1.0", 0},
		{"one", 0},
		{"", 0},
	} {
		assert.Equal(t, tc.want, SDKAttempt(http.Header{"X-Stainless-Retry-Count": {tc.value}}), "%q", tc.value)
	}
}

// A header with neither field, or none at all, says nothing; an
// amz-sdk-request without a usable attempt leaves the Stainless count to
// say it.
func TestSDKAttemptWithoutOrWithUnusableAmzSdkRequest(t *testing.T) {
	assert.Zero(t, SDKAttempt(nil))
	assert.Zero(t, SDKAttempt(http.Header{}))
	assert.Zero(t, SDKAttempt(http.Header{"Content-Type": {"application/json"}}))
	for _, amz := range []string{"attempt=0", "max=3", "attempt=x", ""} {
		h := http.Header{"Amz-Sdk-Request": {amz}, "X-Stainless-Retry-Count": {"1"}}
		assert.Equal(t, 2, SDKAttempt(h), "amz-sdk-request %q", amz)
	}
}

// However large the count an SDK claims, the attempt stays within the
// bound FuzzSDKAttempt checks (at most 1<<20).
func TestSDKAttemptStaysWithinItsBound(t *testing.T) {
	for _, n := range []int{1<<20 - 1, 1 << 20, 1<<20 + 1, 1 << 40} {
		s := strconv.Itoa(n)
		for name, v := range map[string]string{"Amz-Sdk-Request": "attempt=" + s, "X-Stainless-Retry-Count": s} {
			got := SDKAttempt(http.Header{name: {v}})
			assert.GreaterOrEqual(t, got, 0, "%s: %q", name, v)
			assert.LessOrEqual(t, got, 1<<20, "%s: %q", name, v)
		}
	}
}

// Both headers name the same attempts, up to 1<<20: "attempt=N" and a
// retry count of N-1 agree.
func TestSDKAttemptSameForBothHeaders(t *testing.T) {
	for _, n := range []int{1, 2, 1<<20 - 1, 1 << 20, 1<<20 + 1} {
		amz := SDKAttempt(http.Header{"Amz-Sdk-Request": {"attempt=" + strconv.Itoa(n)}})
		st := SDKAttempt(http.Header{"X-Stainless-Retry-Count": {strconv.Itoa(n - 1)}})
		assert.Equal(t, st, amz, "attempt %d", n)
	}
}
