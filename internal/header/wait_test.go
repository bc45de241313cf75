package header

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

const raMax = time.Duration(math.MaxInt64)

// raNow is the instant the parser tables receive their values at.
var raNow = time.Date(2025, time.June, 1, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		name  string
		value string
		now   time.Time
		want  time.Duration
		ok    bool
	}{
		// delay-seconds: 1*DIGIT, nothing else.
		{"zero", "0", raNow, 0, true},
		{"two minutes", "120", raNow, 120 * time.Second, true},
		{"spaces and tabs around are ignored", "\t42 ", raNow, 42 * time.Second, true},
		{"leading zeros", "007", raNow, 7 * time.Second, true},
		{"negative", "-1", raNow, 0, false},
		{"explicit plus sign", "+1", raNow, 0, false},
		{"decimal", "1.0", raNow, 0, false},
		{"empty", "", raNow, 0, false},
		{"only blanks", " \t ", raNow, 0, false},
		{"letters", "abc", raNow, 0, false},
		{"digits then letters", "10s", raNow, 0, false},
		{"two numbers", " 1 2", raNow, 0, false},
		{"comma list", "1, 2", raNow, 0, false},
		{"newline is not a blank", "\n5", raNow, 0, false},
		{"arabic-indic digits", "١٢٠", raNow, 0, false},
		{"fullwidth digits", "１２", raNow, 0, false},
		{"ascii then non-ascii digit", "1٢", raNow, 0, false},
		{"superscript digit", "²", raNow, 0, false},
		{"largest whole duration", "9223372036", raNow, 9223372036 * time.Second, true},
		{"one second more saturates", "9223372037", raNow, raMax, true},
		{"a digit after the largest whole duration saturates", "92233720360", raNow, raMax, true},
		{"huge saturates", "99999999999999999999", raNow, raMax, true},
		{"hundreds of digits saturate", strings.Repeat("9", 300), raNow, raMax, true},

		// The three HTTP-date forms of RFC 9110 section 5.6.7, in the past.
		{"IMF-fixdate in the past", "Sun, 06 Nov 1994 08:49:37 GMT", raNow, 0, true},
		{"RFC 850 in the past", "Sunday, 06-Nov-94 08:49:37 GMT", raNow, 0, true},
		{"asctime in the past", "Sun Nov  6 08:49:37 1994", raNow, 0, true},

		// The same dates seen 37 s earlier: exactly 37 s to wait.
		{"IMF-fixdate ahead", "Sun, 06 Nov 1994 08:49:37 GMT", raDate(1994, 11, 6, 8, 49, 0), 37 * time.Second, true},
		{"RFC 850 ahead", "Sunday, 06-Nov-94 08:49:37 GMT", raDate(1994, 11, 6, 8, 49, 0), 37 * time.Second, true},
		{"asctime ahead", "Sun Nov  6 08:49:37 1994", raDate(1994, 11, 6, 8, 49, 0), 37 * time.Second, true},
		{"date now is no wait", "Sun, 06 Nov 1994 08:49:37 GMT", raDate(1994, 11, 6, 8, 49, 37), 0, true},
		{"a date a day ahead", "Mon, 02 Jun 2025 12:00:00 GMT", raNow, 24 * time.Hour, true},
		{"a date one second ahead", "Sun, 01 Jun 2025 12:00:01 GMT", raNow, time.Second, true},
		{"date with blanks around", " \tSun, 01 Jun 2025 12:00:01 GMT\t", raNow, time.Second, true},
		{"asctime ahead with two-digit day", "Sun Jun 01 12:00:05 2025", raNow, 5 * time.Second, true},
		{"asctime single digit day", "Sun Jun  1 12:00:05 2025", raNow, 5 * time.Second, true},

		// Malformed dates are ignored (more in TestParseRetryAfterIgnoresOtherDates).
		{"ISO 8601", "2025-06-01T12:00:05Z", raNow, 0, false},
		{"impossible day", "Mon, 31 Feb 2025 12:00:00 GMT", raNow, 0, false},
		{"truncated date", "Sun, 06 Nov", raNow, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tc.value, tc.now)
			assert.Equal(t, tc.ok, ok, "ok")
			assert.Equal(t, tc.want, got, "wait")
		})
	}
}

// A server that says "now" (Retry-After: 0, or a date not in the future)
// allows a retry at once and asks for no wait: ParseRetryAfter gives
// (0, true), and serverWait keeps its precedence over RateLimit, so the
// Transport waits its Backoff (TestServerWaitSourcesInTheRetryLoop).
func TestRetryAfterNowIsNoWait(t *testing.T) {
	for _, v := range []string{
		"0", "00", "000000000000000000000000",
		"Sun, 01 Jun 2025 12:00:00 GMT",   // now
		"Sun, 01 Jun 2025 11:59:59 GMT",   // a second ago
		"Sunday, 01-Jun-25 07:00:00 EST",  // now, in another zone
		"Sun Jun  1 12:00:00 2025",        // now, asctime
		"Sat, 31 May 2025 23:00:00 -1200", // 11:00 UTC: an hour ago
		"Thu, 01 Jan 1970 00:00:00 GMT",   // the Unix epoch
		"Mon, 01 Jan 0001 00:00:00 GMT",   // the earliest date
	} {
		t.Run(v, func(t *testing.T) {
			wait, ok := ParseRetryAfter(v, raNow)
			assert.True(t, ok, "a valid value")
			assert.Zero(t, wait)
			wait, source, ok := waitOf(http.Header{"Retry-After": {v}, "Ratelimit": {`"d";r=0;t=20`}}, raNow)
			assert.True(t, ok)
			assert.Zero(t, wait)
			assert.Equal(t, RetryAfter, source, "Retry-After wins over the RateLimit reset")
		})
	}
}

// A crowd of requests told "now" at the same instant does not come back at

func TestParseRateLimitReset(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"exhausted quota", `"default";r=0;t=30`, 30 * time.Second, true},
		{"parameters in any order", `"default";t=30;r=0`, 30 * time.Second, true},
		{"token name", `default;r=0;t=30`, 30 * time.Second, true},
		{"remaining absent", `"default";t=30`, 30 * time.Second, true},
		{"reset now", `"default";r=0;t=0`, 0, true},
		{"partition key byte sequence", `"default";r=0;t=12;pk=:cHJvamVjdDEyMw==:`, 12 * time.Second, true},
		{"boolean and decimal parameters", `"default";x=?1;r=0;y=2.25;t=12;z=-4`, 12 * time.Second, true},
		{"decimal reset ignores only its quota", `"a";r=0;t=1.5, "b";r=0;t=20`, 20 * time.Second, true},
		{"decimal remaining ignores only its quota", `"a";r=0.5;t=90, "b";r=0;t=20`, 20 * time.Second, true},
		{"unknown parameters ignored", `"default";q=100;r=0;t=12;w=60`, 12 * time.Second, true},
		{"longest of several exhausted quotas", `"minute";r=0;t=10, "day";r=0;t=400, "hour";r=0;t=40`, 400 * time.Second, true},
		{"quota with requests left is ignored", `"burst";r=5;t=90, "day";r=0;t=40`, 40 * time.Second, true},
		{"tabs and spaces around commas", "\"a\";r=0;t=10 ,\t \"b\";r=0;t=20", 20 * time.Second, true},
		{"leading spaces", `   "a";r=0;t=10`, 10 * time.Second, true},
		{"huge reset saturates", `"a";r=0;t=999999999999999`, raMax, true},
		// RFC 9651 added Dates and Display Strings: other parameters may be them.
		{"date parameter", `"default";r=0;t=12;at=@1748779200`, 12 * time.Second, true},
		{"display string parameter", `"default";r=0;t=12;note=%"caf%c3%a9"`, 12 * time.Second, true},
		{"minus zero remaining is the integer 0", `"default";r=-0;t=30`, 30 * time.Second, true},

		{"only quotas with requests left", `"default";r=1;t=30`, 0, false},
		{"no reset", `"default";r=0`, 0, false},
		{"empty", ``, 0, false},
		{"negative reset", `"default";r=0;t=-1`, 0, false},
		{"negative remaining", `"default";r=-1;t=30`, 0, false},
		{"decimal reset", `"default";r=0;t=1.5`, 0, false},
		{"string reset", `"default";r=0;t="30"`, 0, false},
		{"token reset", `"default";r=0;t=abc`, 0, false},
		{"boolean reset", `"default";r=0;t`, 0, false},
		{"sixteen digits", `"default";r=0;t=1234567890123456`, 0, false},
		{"trailing comma", `"default";r=0;t=30,`, 0, false},
		{"unterminated string", `"default;r=0;t=30`, 0, false},
		{"upper-case key", `"default";R=0;T=30`, 0, false},
		{"missing item", `;r=0;t=30`, 0, false},
		{"space before parameter", `"default"; r=0;t=30`, 30 * time.Second, true},
		{"space before semicolon", `"default" ;r=0;t=30`, 0, false},
		{"garbage after a good quota", `"default";r=0;t=30, !!`, 0, false},
		{"two items without comma", `"a";r=0;t=1 "b";r=0;t=2`, 0, false},
		{"non-ascii in string", "\"dé\";r=0;t=30", 0, false},
		{"bad escape in string", `"a\b";r=0;t=30`, 0, false},
		{"inner list", `("a" "b");r=0;t=30`, 0, false},
		{"inner list beside a good quota", `"a";r=0;t=10, ("b");r=0;t=20`, 0, false},
		{"date reset", `"default";r=0;t=@30`, 0, false},
		{"old draft form", `limit=100, remaining=0, reset=30`, 0, false},
		{"bad byte sequence", `"default";r=0;t=12;pk=:ab!c:`, 0, false},
		{"unterminated byte sequence", `"default";r=0;t=12;pk=:abc`, 0, false},
		{"bad boolean", `"default";r=0;t=12;x=?2`, 0, false},
		{"decimal with four fraction digits", `"default";r=0;t=12;y=1.2345`, 0, false},
		{"decimal with thirteen integer digits", `"default";r=0;t=12;y=1234567890123.5`, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseRateLimitReset(tc.value)
			assert.Equal(t, tc.ok, ok, "ok")
			assert.Equal(t, tc.want, got, "wait")
		})
	}
}

// serverWait reads Retry-After first and the RateLimit reset only when
// Retry-After is absent or unusable.
func TestServerWaitPrecedence(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		source Kind
		ok     bool
	}{
		{"Retry-After alone", http.Header{"Retry-After": {"7"}}, 7 * time.Second, RetryAfter, true},
		{"Retry-After wins over RateLimit", http.Header{"Retry-After": {"7"}, "Ratelimit": {`"d";r=0;t=20`}}, 7 * time.Second, RetryAfter, true},
		{"Retry-After 0 still wins", http.Header{"Retry-After": {"0"}, "Ratelimit": {`"d";r=0;t=20`}}, 0, RetryAfter, true},
		{"RateLimit when Retry-After is absent", http.Header{"Ratelimit": {`"d";r=0;t=20`}}, 20 * time.Second, RateLimit, true},
		// RateLimit only when Retry-After is absent; garbage means the backoff.
		{"garbage Retry-After beside RateLimit means backoff", http.Header{"Retry-After": {"soon"}, "Ratelimit": {`"d";r=0;t=20`}}, 0, RetryAfter, false},
		{"RateLimit with requests left", http.Header{"Ratelimit": {`"d";r=3;t=20`}}, 0, RateLimit, false},
		{"neither", http.Header{}, 0, None, false},
		{"garbage Retry-After alone", http.Header{"Retry-After": {"-5"}}, 0, None, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, source, ok := waitOf(tc.header, raNow)
			assert.Equal(t, tc.ok, ok, "ok")
			if tc.ok {
				assert.Equal(t, tc.want, got, "wait")
				assert.Equal(t, tc.source, source, "source")
			}
		})
	}
}

func raDate(y int, mo time.Month, d, h, mi, s int) time.Time {
	return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
}

func FuzzParseRateLimitReset(f *testing.F) {
	for _, v := range []string{
		`"default";r=0;t=30`, `"a";r=0;t=10, "b";r=0;t=40`, `"a";r=5;t=10`,
		`default;r=0;t=30`, `"default";r=0;t=1.5`, `"default";r=0;t=30,`, `"a\"b";r=0;t=1`,
		`"a";r=0;t=999999999999999`, `"a";r=-1;t=3`, `*;r=0;t=2`, ``, `,`, `"`, `"\`,
		`"a";r=0;t=5;pk=:YQ==:`, `"a";r=0;t=5;at=@1`, `%"a";r=0;t=5`, `("a");r=0;t=5`,
	} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		wait, ok := parseRateLimitReset(value)
		if wait < 0 {
			t.Fatalf("parseRateLimitReset(%q) = %v: negative", value, wait)
		}
		if !ok && wait != 0 {
			t.Fatalf("parseRateLimitReset(%q) = %v, false: a rejected value must give 0", value, wait)
		}
		if wait%time.Second != 0 && wait != raMax {
			t.Fatalf("parseRateLimitReset(%q) = %v: t is whole seconds", value, wait)
		}
		if !ok {
			return
		}
		// Adding a quota that still has requests left changes nothing; adding
		// an exhausted one with a longer reset makes that reset win.
		if w, ok2 := parseRateLimitReset(value + `, "extra";r=9;t=99999`); !ok2 || w != wait {
			t.Fatalf("parseRateLimitReset(%q) changed by a quota with requests left: %v, %v", value, w, ok2)
		}
		if w, ok2 := parseRateLimitReset(value + `, "extra";r=0;t=999999999999999`); !ok2 || w != raMax {
			t.Fatalf("parseRateLimitReset(%q) ignored a longer exhausted quota: %v, %v", value, w, ok2)
		}
	})
}

func TestParseMilliseconds(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"0": 0, "1500": 1500 * time.Millisecond, " 7 ": 7 * time.Millisecond,
		"0.001": time.Microsecond, "2.5": 2500 * time.Microsecond,
		"99999999999999999999": time.Duration(1<<63 - 1),
	} {
		got, ok := parseMilliseconds(v)
		assert.True(t, ok, v)
		assert.Equal(t, want, got, v)
	}
	for _, v := range []string{"", "-1", "+1", "1.", ".5", "1e3", "1,5", "soon", "1 2"} {
		_, ok := parseMilliseconds(v)
		assert.False(t, ok, v)
	}
}

func FuzzParseMilliseconds(f *testing.F) {
	for _, seed := range []string{"0", "1500", "20.5", " 7 ", "99999999999999999999.999", "-1", ".5", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseMilliseconds(v)
		if !ok && d != 0 {
			t.Fatalf("%q: not ok but %v", v, d)
		}
		if d < 0 {
			t.Fatalf("%q: negative %v", v, d)
		}
		h := http.Header{"X-Should-Retry": {v}}
		if got := adviceIn(h); got != AdviceNone && got != AdviceNo && got != AdviceYes {
			t.Fatalf("%q: verdict %v", v, got)
		}
	})
}

func FuzzParseXRateLimitReset(f *testing.F) {
	for _, seed := range []string{"7", "1767225600", "0", "", "x", "99999999999999999999", " 12 "} {
		f.Add(seed)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseXRateLimitReset(v, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("%q: %v, %v", v, d, ok)
		}
	})
}

// A valid millisecond field (Retry-After-Ms, X-Ms-Retry-After-Ms,
// X-Amz-Retry-After) wins over Retry-After; an invalid or empty one is
// passed over.
func TestWaitMillisecondFieldsBeforeRetryAfter(t *testing.T) {
	for _, name := range []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"} {
		t.Run(name, func(t *testing.T) {
			h := http.Header{name: {"1500"}, "Retry-After": {"7"}}
			for _, f := range []Fields{Scan(h), allFields} {
				d, kind, ok := Wait(h, f, raNow)
				assert.Equal(t, []any{1500 * time.Millisecond, RetryAfter, true}, []any{d, kind, ok})
			}
			h = http.Header{name: {"20.5"}}
			d, kind, ok := waitOf(h, raNow)
			assert.Equal(t, []any{20*time.Millisecond + 500*time.Microsecond, RetryAfter, true}, []any{d, kind, ok})
			for _, bad := range []string{"", "soon", "-1"} {
				h = http.Header{name: {bad}, "Retry-After": {"7"}}
				d, kind, ok = waitOf(h, raNow)
				assert.Equal(t, []any{7 * time.Second, RetryAfter, true}, []any{d, kind, ok}, "%s: %q", name, bad)
			}
		})
	}
}

// A rate limit is spent when X-RateLimit-Remaining is 0 (blanks around
// ignored) and an X-RateLimit-Reset is given; the wait is then that reset.
func TestRateLimitedNeedsNoneRemainingAndAReset(t *testing.T) {
	for _, tc := range []struct {
		name      string
		remaining []string
		reset     []string
		want      bool
	}{
		{"none remaining, a reset", []string{"0"}, []string{"30"}, true},
		{"none remaining with blanks", []string{" 0 "}, []string{"30"}, true},
		{"some remaining", []string{"5"}, []string{"30"}, false},
		{"remaining empty", []string{""}, []string{"30"}, false},
		{"empty reset", []string{"0"}, []string{""}, false},
		{"no reset field", []string{"0"}, nil, false},
		{"no remaining field", nil, []string{"30"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.remaining != nil {
				h["X-Ratelimit-Remaining"] = tc.remaining
			}
			if tc.reset != nil {
				h["X-Ratelimit-Reset"] = tc.reset
			}
			assert.Equal(t, tc.want, RateLimited(h, Scan(h)), "scanned")
			assert.Equal(t, tc.want, RateLimited(h, allFields), "looked up")
			d, kind, ok := waitOf(h, raNow)
			if tc.want {
				assert.Equal(t, []any{30 * time.Second, RateLimit, true}, []any{d, kind, ok})
			} else {
				assert.Equal(t, []any{time.Duration(0), None, false}, []any{d, kind, ok})
			}
		})
	}
}

// X-RateLimit-Reset is seconds up to 10^8, and a Unix time above: a time
// ahead is the wait until it, a past one no wait.
func TestParseXRateLimitResetSecondsOrUnixTime(t *testing.T) {
	ahead := raNow.Add(90 * time.Second).Unix()
	for _, tc := range []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"seconds", "60", 60 * time.Second, true},
		{"zero seconds", "0", 0, true},
		{"blanks around", " \t12 ", 12 * time.Second, true},
		{"10^8 is still seconds", "100000000", 1e8 * time.Second, true},
		{"over 10^8 is a Unix time, past", "100000001", 0, true},
		{"a Unix time ahead", strconv.FormatInt(ahead, 10), 90 * time.Second, true},
		{"a Unix time now", strconv.FormatInt(raNow.Unix(), 10), 0, true},
		{"empty", "", 0, false},
		{"letters", "soon", 0, false},
		{"negative", "-5", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := parseXRateLimitReset(tc.value, raNow)
			assert.Equal(t, tc.ok, ok, "ok")
			assert.Equal(t, tc.want, d, "wait")
		})
	}
}

// A 403 with a valid Retry-After, seconds or a date, is a rate limit
// (GitHub's secondary limit), unless X-RateLimit-Remaining says some are
// left; the wait is then the Retry-After.
func TestRateLimitedByA403sRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string
		remaining  []string
		want       bool
	}{
		{"seconds", "60", nil, true},
		{"a date", "Wed, 21 Oct 2015 07:28:00 GMT", nil, true},
		{"zero seconds", "0", nil, true},
		{"seconds, none remaining", "60", []string{"0"}, true},
		{"seconds, remaining empty", "60", []string{""}, true},
		{"seconds, some remaining", "60", []string{"5"}, false},
		{"malformed", "soon", nil, false},
		{"negative", "-1", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Retry-After": {tc.retryAfter}}
			if tc.remaining != nil {
				h["X-Ratelimit-Remaining"] = tc.remaining
			}
			assert.Equal(t, tc.want, RateLimited(h, Scan(h)), "scanned")
			assert.Equal(t, tc.want, RateLimited(h, allFields), "looked up")
		})
	}
	assert.False(t, RateLimited(http.Header{}, 0), "no field")
}
