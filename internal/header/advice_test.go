package header

import (
	"net/http"
	"strings"
	"testing"
)

// X-Should-Retry's verdict wins; Stripe-Should-Retry's counts only where
// X-Should-Retry gives none (absent, empty, or neither true nor false).
func FuzzShouldRetry(f *testing.F) {
	for _, seed := range [][2]string{{"false", ""}, {"", "false"}, {"maybe", "false"}, {" TRUE ", "false"},
		{"true", "true"}, {"  ", "True"}, {"no", "no"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, x, stripe string) {
		h := http.Header{"X-Should-Retry": {x}, "Stripe-Should-Retry": {stripe}}
		got := adviceIn(h)
		xv := adviceIn(http.Header{"X-Should-Retry": {x}})
		sv := adviceIn(http.Header{"Stripe-Should-Retry": {stripe}})
		want := sv
		if xv != AdviceNone {
			want = xv
		}
		if got != want {
			t.Fatalf("X-Should-Retry %q, Stripe-Should-Retry %q: verdict %v, want %v", x, stripe, got, want)
		}
		for _, v := range []string{x, stripe} {
			norm := strings.ToLower(strings.Trim(v, " \t"))
			if (norm == "true" || norm == "false") != (adviceIn(http.Header{"Stripe-Should-Retry": {v}}) != AdviceNone) {
				t.Fatalf("%q: a verdict is exactly true or false, trimmed, in any letter case", v)
			}
		}
	})
}
