package header

import (
	"net/http"
	"testing"
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
