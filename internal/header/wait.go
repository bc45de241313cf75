package header

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// A Kind says which field set a server's wait.
type Kind uint8

// The kinds of a server's wait.
const (
	None       Kind = iota // no field asked for a wait
	RetryAfter             // Retry-After, or a millisecond form of it
	RateLimit              // RateLimit's t, or X-RateLimit-Reset
)

// Wait returns the wait a retryable response asks for, from the first
// of: a valid millisecond field (Retry-After-Ms, X-Ms-Retry-After-Ms,
// X-Amz-Retry-After); Retry-After when present (an invalid one is ignored:
// the backoff applies); the reset of an exhausted RateLimit quota; the
// X-RateLimit-Reset of a spent limit (see rateLimited). A zero wait
// (Retry-After: 0, a date not in the future, a reset now) is returned with
// ok true: the server asks for no wait, and the caller waits its backoff
// instead. f holds the fields of h that the Transport reads (Scan).
func Wait(h http.Header, f Fields, now time.Time) (time.Duration, Kind, bool) {
	if f&waitFields == 0 {
		return 0, None, false // the usual failure: no field to look up
	}
	// The millisecond forms are more precise than Retry-After's seconds:
	// the Stainless SDKs' and Azure's, and AWS's x-amz-retry-after.
	for i, name := range [...]string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"} {
		if f&(fRetryAfterMs<<i) == 0 {
			continue
		}
		if v := Value(h, name); v != "" {
			if d, ok := parseMilliseconds(v); ok {
				return d, RetryAfter, true
			}
		}
	}
	if f&fRetryAfter != 0 {
		if v := Value(h, "Retry-After"); v != "" {
			d, ok := ParseRetryAfter(v, now)
			return d, RetryAfter, ok
		}
	}
	if f&fRateLimit != 0 {
		if v := Value(h, "Ratelimit"); v != "" {
			if d, ok := parseRateLimitReset(v); ok {
				return d, RateLimit, true
			}
		}
	}
	if RateLimited(h, f) {
		if d, ok := parseXRateLimitReset(Value(h, "X-Ratelimit-Reset"), now); ok {
			return d, RateLimit, true
		}
	}
	return 0, None, false
}

// ParseRetryAfter parses a Retry-After field value (RFC 9110 section
// 10.2.3) received at now and returns how long the server asked to wait.
//
// The value is either delay-seconds, one or more ASCII digits (huge values
// saturate at the largest time.Duration), or an HTTP-date. The three forms
// of RFC 9110 section 5.6.7 are read: IMF-fixdate
// ("Sun, 06 Nov 1994 08:49:37 GMT"), RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT")
// and asctime ("Sun Nov  6 08:49:37 1994"); and, as that section asks of a
// recipient, leniently, as widely used clients (curl, Python's urllib3)
// read them:
//   - the zone may be GMT, UT, UTC or Z, a numeric offset such as +0000
//     or -0500 (the date is converted to UTC), or one of the North American
//     names of RFC 5322 section 4.3 (EST, EDT, CST, CDT, MST, MDT, PST,
//     PDT); a date without a zone is in GMT, as every HTTP-date is;
//   - the day and the hour may have one digit, the seconds may be left out,
//     and a leap second (60) is the first second of the next minute;
//   - the day name may be full or abbreviated in any form, or left out; it
//     is not checked against the date, and the comma after it is optional;
//   - day, month and year may be separated by blanks or by dashes, the
//     year may have two digits in any form (read by the RFC 850 rule: the
//     latest such year not more than 50 years ahead), the month may be
//     named in full, and names may be in any letter case;
//   - runs of spaces and tabs count as one blank.
//
// Anything else is not a date: an unknown or ambiguous zone name (IST,
// CEST), fractional seconds, a comment, ISO 8601, an impossible date or
// time. Surrounding spaces and tabs are ignored. ok is false for anything
// that is neither delay-seconds nor a date ("+1", "-1", "1.0", ""): such a
// value is to be ignored.
//
// Zero delay-seconds, and a date not in the future, mean no wait: (0, true).
// A Transport told so waits its Policy's Backoff, as after a failure without
// Retry-After (by default a random wait of up to 100 ms before the first
// retry), so that clients told "now" together do not return together.
func ParseRetryAfter(value string, now time.Time) (wait time.Duration, ok bool) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) && strings.Trim(v, "0123456789") == "" {
		return parseDelaySeconds(v)
	}
	t, ok := parseHTTPDate(v, now)
	if !ok {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseDelaySeconds parses 1*DIGIT as seconds, saturating on overflow.
func parseDelaySeconds(v string) (time.Duration, bool) {
	const maxSeconds = int64(math.MaxInt64 / int64(time.Second))
	var n int64
	for i := 0; i < len(v); i++ {
		if !isDigit(v[i]) {
			return 0, false
		}
		if n <= maxSeconds {
			n = n*10 + int64(v[i]-'0')
		}
	}
	return SecondsSaturated(n), true
}

// parseRateLimitReset returns the reset time of an exhausted quota from a
// RateLimit field value (IETF draft-ietf-httpapi-ratelimit-headers): a
// Structured Field List (RFC 9651) of items such as `"default";r=0;t=30`,
// whose `t` parameter is the seconds until the quota resets. Only quotas
// whose remaining `r` is 0 or absent and whose `t` is a non-negative Integer
// count; of several, the longest reset wins. ok is false when the field is
// malformed, holds an inner list (RateLimit is a List of Items: the whole
// field is unusable), or names no such quota.
func parseRateLimitReset(v string) (wait time.Duration, ok bool) {
	list, err := httpsfv.UnmarshalList([]string{v})
	if err != nil {
		return 0, false
	}
	for _, member := range list {
		item, isItem := member.(httpsfv.Item)
		if !isItem {
			return 0, false
		}
		if d, exhausted := quotaReset(item.Params); exhausted && (d > wait || !ok) {
			wait, ok = d, true
		}
	}
	return wait, ok
}

// quotaReset returns the reset t of a quota given its parameters, and
// whether the quota counts: t is a non-negative Integer and r is absent or
// the Integer 0.
func quotaReset(params *httpsfv.Params) (time.Duration, bool) {
	v, _ := params.Get("t")
	t, isInt := v.(int64)
	if !isInt || t < 0 {
		return 0, false
	}
	if r, present := params.Get("r"); present && r != int64(0) {
		return 0, false
	}
	return SecondsSaturated(t), true
}

// SecondsSaturated returns n seconds, or the largest Duration if that overflows.
func SecondsSaturated(n int64) time.Duration {
	if n > int64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(n) * time.Second
}

// RateLimited reports whether h, the header of a 403 whose fields the
// Transport reads are f, says a rate limit is spent, as APIs say it with a
// 403 (GitHub, for one): X-RateLimit-Remaining: 0 and an X-RateLimit-Reset
// (a primary limit), or a valid Retry-After, seconds or a date (a
// secondary limit), unless X-RateLimit-Remaining says some are left.
func RateLimited(h http.Header, f Fields) bool {
	remaining := strings.TrimSpace(Value(h, "X-Ratelimit-Remaining"))
	if f&fXRateLimitRemaining != 0 && remaining == "0" && f&fXRateLimitReset != 0 && Value(h, "X-Ratelimit-Reset") != "" {
		return true
	}
	if f&fRetryAfter == 0 || f&fXRateLimitRemaining != 0 && remaining != "0" && remaining != "" {
		return false
	}
	// Whether it is valid does not depend on the time it is read at.
	_, ok := ParseRetryAfter(Value(h, "Retry-After"), time.Unix(0, 0))
	return ok
}

// Value returns the first value of the field whose canonical name is
// name: Header.Get without canonicalizing a name already canonical (which
// allocates for some names).
func Value(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// parseXRateLimitReset parses an X-RateLimit-Reset value received at now:
// digits, either the Unix time the limit resets at (GitHub, X) or the
// seconds until it does (others). A value over 10^8 (1973, and three years
// of seconds) is taken for a Unix time. A past time means no
// wait. ok is false for anything but digits.
func parseXRateLimitReset(v string, now time.Time) (time.Duration, bool) {
	v = strings.Trim(v, " \t")
	if v == "" || !isDigit(v[0]) {
		return 0, false
	}
	d, ok := parseDelaySeconds(v)
	if !ok {
		return 0, false
	}
	if d <= 1e8*time.Second {
		return d, true
	}
	return max(time.Unix(int64(d/time.Second), 0).Sub(now), 0), true
}

// parseMilliseconds parses the value of a Retry-After-Ms,
// X-Ms-Retry-After-Ms or X-Amz-Retry-After field: a non-negative count of
// milliseconds, digits with an optional fraction ("1500", "20.5"),
// surrounding blanks ignored; huge values saturate. ok is false for
// anything else.
func parseMilliseconds(v string) (time.Duration, bool) {
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	v = strings.Trim(v, " \t")
	whole, frac, dot := strings.Cut(v, ".")
	if whole == "" || (dot && frac == "") {
		return 0, false
	}
	var ms int64
	for i := 0; i < len(whole); i++ {
		if !isDigit(whole[i]) {
			return 0, false
		}
		ms = min(ms*10+int64(whole[i]-'0'), maxMs) // ms <= maxMs: no overflow
	}
	var ns, scale int64 = 0, int64(time.Millisecond)
	for i := 0; i < len(frac); i++ {
		if !isDigit(frac[i]) {
			return 0, false
		}
		scale /= 10
		ns += int64(frac[i]-'0') * scale // below a millisecond in all
	}
	if ms == maxMs {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(ms*int64(time.Millisecond) + ns), true
}
