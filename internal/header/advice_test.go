package header

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

// X-Should-Retry gives the verdict, true or false in any letter case and
// with blanks around; Stripe-Should-Retry gives it only where
// X-Should-Retry gives none.
func TestShouldRetryReadsTheServersVerdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
		want Advice
	}{
		{"no field", http.Header{"Content-Type": {"text/plain"}}, AdviceNone},
		{"X-Should-Retry false", http.Header{"X-Should-Retry": {"false"}}, AdviceNo},
		{"X-Should-Retry TRUE with blanks", http.Header{"X-Should-Retry": {" TRUE\t"}}, AdviceYes},
		{"X-Should-Retry neither", http.Header{"X-Should-Retry": {"maybe"}}, AdviceNone},
		{"Stripe-Should-Retry true", http.Header{"Stripe-Should-Retry": {"true"}}, AdviceYes},
		{"Stripe-Should-Retry False", http.Header{"Stripe-Should-Retry": {"False"}}, AdviceNo},
		{"X-Should-Retry wins", http.Header{"X-Should-Retry": {"false"}, "Stripe-Should-Retry": {"true"}}, AdviceNo},
		{"Stripe's where X- gives none", http.Header{"X-Should-Retry": {"maybe"}, "Stripe-Should-Retry": {"false"}}, AdviceNo},
		{"empty X- and Stripe's", http.Header{"X-Should-Retry": {""}, "Stripe-Should-Retry": {"true"}}, AdviceYes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ShouldRetry(tc.h, Scan(tc.h)), "scanned")
			assert.Equal(t, tc.want, ShouldRetry(tc.h, allFields), "looked up")
		})
	}
}
