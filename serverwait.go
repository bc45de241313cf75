package retryhttp

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

// serverWait returns the wait a retryable response asks for, from the first
// of: a valid millisecond field (Retry-After-Ms, X-Ms-Retry-After-Ms,
// X-Amz-Retry-After); Retry-After when present (an invalid one is ignored:
// the backoff applies); the reset of an exhausted RateLimit quota; the
// X-RateLimit-Reset of a spent limit (see rateLimited). A zero wait
// (Retry-After: 0, a date not in the future, a reset now) is returned with
// ok true: the server asks for no wait, and the caller waits its backoff
// instead. f holds the fields of h that the Transport reads (fieldsIn).
func serverWait(h http.Header, f retryFields, now time.Time) (time.Duration, DelaySource, bool) {
	if f&waitFields == 0 {
		return 0, DelayBackoff, false // the usual failure: no field to look up
	}
	// The millisecond forms are more precise than Retry-After's seconds:
	// the Stainless SDKs' and Azure's, and AWS's x-amz-retry-after.
	for i, name := range [...]string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"} {
		if f&(fRetryAfterMs<<i) == 0 {
			continue
		}
		if v := headerValue(h, name); v != "" {
			if d, ok := parseMilliseconds(v); ok {
				return d, DelayRetryAfter, true
			}
		}
	}
	if f&fRetryAfter != 0 {
		if v := headerValue(h, "Retry-After"); v != "" {
			d, ok := parseRetryAfter(v, now)
			return d, DelayRetryAfter, ok
		}
	}
	if f&fRateLimit != 0 {
		if v := headerValue(h, "Ratelimit"); v != "" {
			if d, ok := parseRateLimitReset(v); ok {
				return d, DelayRateLimit, true
			}
		}
	}
	if rateLimited(h, f) {
		if d, ok := parseXRateLimitReset(headerValue(h, "X-Ratelimit-Reset"), now); ok {
			return d, DelayRateLimit, true
		}
	}
	return 0, DelayBackoff, false
}

// retryFields says which of the fields that a failed answer's verdict and
// wait are read from its header holds: a scan of a small header's names
// finds them, where a lookup of each of the ten would cost a failed answer
// more (a realistic header has six to ten fields, and holds none of them,
// or one). Each is then looked up as before, if present. allFields stands
// for a header too long to scan: each is looked up.
type retryFields uint16

const (
	fRetryAfterMs retryFields = 1 << iota // these three in serverWait's order
	fMsRetryAfterMs
	fAmzRetryAfter
	fRetryAfter
	fRateLimit
	fXRateLimitRemaining
	fXRateLimitReset
	fShouldRetry
	fStripeShouldRetry
	fEnvoyOverloaded
	fScanned // the header was scanned: the bits are known (see retryFields.of)

	waitFields = fRetryAfterMs | fMsRetryAfterMs | fAmzRetryAfter | fRetryAfter | fRateLimit | fXRateLimitRemaining | fXRateLimitReset
	allFields  = fScanned<<1 - 1

	maxScan = 16 // the longest header scanned rather than looked up in
)

// of returns the fields of h that a retry's decisions read: *f if h was
// scanned already (f not zero), else the scan's, kept in *f.
func (f *retryFields) of(h http.Header) retryFields {
	if *f == 0 {
		*f = fieldsIn(h)
	}
	return *f
}

// fieldsIn returns the fields of h that a retry's decisions read.
func fieldsIn(h http.Header) retryFields {
	if len(h) > maxScan {
		return allFields
	}
	f := fScanned
	for k := range h {
		switch len(k) { // most names are none of these lengths
		case 9, 11, 14, 17, 18, 19, 21:
		default:
			continue
		}
		switch k {
		case "Retry-After-Ms":
			f |= fRetryAfterMs
		case "X-Ms-Retry-After-Ms":
			f |= fMsRetryAfterMs
		case "X-Amz-Retry-After":
			f |= fAmzRetryAfter
		case "Retry-After":
			f |= fRetryAfter
		case "Ratelimit":
			f |= fRateLimit
		case "X-Ratelimit-Remaining":
			f |= fXRateLimitRemaining
		case "X-Ratelimit-Reset":
			f |= fXRateLimitReset
		case "X-Should-Retry":
			f |= fShouldRetry
		case "Stripe-Should-Retry":
			f |= fStripeShouldRetry
		case "X-Envoy-Overloaded":
			f |= fEnvoyOverloaded
		}
	}
	return f
}

// parseRetryAfter parses a Retry-After field value (RFC 9110 section
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
func parseRetryAfter(value string, now time.Time) (wait time.Duration, ok bool) {
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
	return secondsSaturated(n), true
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
	return secondsSaturated(t), true
}

// secondsSaturated returns n seconds, or the largest Duration if that overflows.
func secondsSaturated(n int64) time.Duration {
	if n > int64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(n) * time.Second
}

// rateLimited reports whether h, whose fields the Transport reads are f,
// says a rate limit is spent, as many APIs (GitHub, for one) say it, also
// with a 403: X-RateLimit-Remaining: 0 and an X-RateLimit-Reset.
func rateLimited(h http.Header, f retryFields) bool {
	const both = fXRateLimitRemaining | fXRateLimitReset
	return f&both == both &&
		strings.TrimSpace(headerValue(h, "X-Ratelimit-Remaining")) == "0" && headerValue(h, "X-Ratelimit-Reset") != ""
}

// headerValue returns the first value of the field whose canonical name is
// name: Header.Get without canonicalizing a name already canonical (which
// allocates for some names).
func headerValue(h http.Header, name string) string {
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

// serverVerdict is a server's word on retrying its response.
type serverVerdict uint8

const (
	verdictNone serverVerdict = iota
	verdictNo                 // X-Should-Retry: false
	verdictYes                // X-Should-Retry: true
)

// shouldRetry reads a server's verdict on retrying its response: the
// X-Should-Retry field (as the OpenAI and Anthropic APIs send it, and
// VerdictHandler), else Stripe-Should-Retry (Stripe's). "true" or "false",
// in any letter case; anything else is no verdict. f holds the fields of h
// that the Transport reads (fieldsIn).
func shouldRetry(h http.Header, f retryFields) serverVerdict {
	// Canonical names already: no Get, which canonicalizes.
	if f&fShouldRetry != 0 {
		if v := verdictOf(h["X-Should-Retry"]); v != verdictNone {
			return v
		}
	}
	if f&fStripeShouldRetry == 0 {
		return verdictNone
	}
	return verdictOf(h["Stripe-Should-Retry"])
}

// verdictOf reads the first value of a should-retry field.
func verdictOf(vs []string) serverVerdict {
	if len(vs) == 0 || vs[0] == "" {
		return verdictNone
	}
	switch v := strings.Trim(vs[0], " \t"); {
	case strings.EqualFold(v, "false"):
		return verdictNo
	case strings.EqualFold(v, "true"):
		return verdictYes
	}
	return verdictNone
}
