package retryhttp

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// ParseRetryAfter parses a Retry-After field value (RFC 9110 section
// 10.2.3) received at now and returns how long the server asked to wait.
//
// The value is either delay-seconds, one or more ASCII digits (huge values
// saturate at the largest time.Duration), or an HTTP-date in any of the
// three forms a recipient must accept: IMF-fixdate
// ("Sun, 06 Nov 1994 08:49:37 GMT"), RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT")
// and asctime ("Sun Nov  6 08:49:37 1994"). A date in the past means no wait.
// Surrounding spaces and tabs are ignored. ok is false for anything else
// ("+1", "-1", "1.0", ""): such a value is to be ignored.
func ParseRetryAfter(value string, now time.Time) (wait time.Duration, ok bool) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, false
	}
	if isDigit(v[0]) {
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

// parseHTTPDate parses the three HTTP-date forms of RFC 9110 section 5.6.7.
// A two-digit RFC 850 year is taken as the latest year with those digits
// whose date is not more than 50 years after now, as the RFC says.
func parseHTTPDate(v string, now time.Time) (time.Time, bool) {
	if t, err := time.Parse(http.TimeFormat, v); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.ANSIC, v); err == nil {
		return t, true
	}
	t, err := time.Parse(time.RFC850, v)
	if err != nil || !strings.HasSuffix(v, " GMT") {
		return time.Time{}, false
	}
	limit := now.AddDate(50, 0, 0)
	year := now.Year() - now.Year()%100 + t.Year()%100 + 100
	for {
		d := time.Date(year, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
		if !d.After(limit) {
			return d, true
		}
		year -= 100
	}
}

// parseRateLimitReset returns the reset time of an exhausted quota from a
// RateLimit field value (IETF draft-ietf-httpapi-ratelimit-headers): a
// Structured Field List such as `"default";r=0;t=30`, whose `t` parameter is
// the seconds until the quota resets. Only quotas whose remaining `r` is 0
// or absent count; of several, the longest reset wins. ok is false when the
// field is malformed or names no such quota.
func parseRateLimitReset(v string) (wait time.Duration, ok bool) {
	p := sfParser{s: v}
	p.skipSP()
	for !p.done() {
		if !p.bareItem() {
			return 0, false
		}
		var t, r int64 = -1, -1
		for p.peek() == ';' {
			p.i++
			p.skipSP()
			key, ok := p.key()
			if !ok {
				return 0, false
			}
			val := int64(-2) // boolean true or non-integer
			if p.peek() == '=' {
				p.i++
				if n, isInt, ok := p.paramValue(); !ok {
					return 0, false
				} else if isInt {
					val = n
				}
			}
			switch key {
			case "t":
				t = val
			case "r":
				r = val
			}
		}
		if t >= 0 && r <= 0 && r != -2 {
			if d := secondsSaturated(t); d > wait || !ok {
				wait, ok = d, true
			}
		}
		p.skipOWS()
		if p.done() {
			break
		}
		if p.peek() != ',' {
			return 0, false
		}
		p.i++
		p.skipOWS()
		if p.done() { // trailing comma
			return 0, false
		}
	}
	return wait, ok
}

// secondsSaturated returns n seconds, or the largest Duration if that overflows.
func secondsSaturated(n int64) time.Duration {
	if n > int64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(n) * time.Second
}

// sfParser reads the few Structured Field (RFC 9651) forms RateLimit uses.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) skipSP() {
	for p.peek() == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for c := p.peek(); c == ' ' || c == '\t'; c = p.peek() {
		p.i++
	}
}

// bareItem consumes a string, token, integer, decimal, byte sequence or
// boolean.
func (p *sfParser) bareItem() bool {
	switch c := p.peek(); {
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		p.token()
		return true
	case c == '-' || isDigit(c):
		start := p.i
		if _, ok := p.integer(); ok {
			return true
		}
		p.i = start
		return p.decimal()
	case c == ':':
		return p.byteSeq()
	case c == '?':
		p.i++
		if c := p.peek(); c == '0' || c == '1' {
			p.i++
			return true
		}
	}
	return false
}

// paramValue consumes a bare item; n is its value when it is a
// non-negative integer.
func (p *sfParser) paramValue() (n int64, isInt, ok bool) {
	if c := p.peek(); isDigit(c) {
		start := p.i
		if n, ok := p.integer(); ok {
			return n, true, true
		}
		p.i = start
	}
	return 0, false, p.bareItem()
}

func (p *sfParser) str() bool {
	p.i++ // opening quote
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.done() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return false
			}
			p.i++
		case c == '"':
			return true
		case c < 0x20 || c > 0x7e:
			return false
		}
	}
	return false
}

func (p *sfParser) token() {
	p.i++
	for !p.done() && isTokenChar(p.s[p.i]) {
		p.i++
	}
}

// integer consumes an sf-integer (at most 15 digits).
func (p *sfParser) integer() (int64, bool) {
	neg := p.peek() == '-'
	if neg {
		p.i++
	}
	start := p.i
	var n int64
	for !p.done() && isDigit(p.s[p.i]) {
		n = n*10 + int64(p.s[p.i]-'0')
		p.i++
		if p.i-start > 15 {
			return 0, false
		}
	}
	if p.i == start || p.peek() == '.' {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// decimal consumes an sf-decimal: at most 12 integer and 3 fraction digits.
func (p *sfParser) decimal() bool {
	if p.peek() == '-' {
		p.i++
	}
	start := p.i
	for !p.done() && isDigit(p.s[p.i]) {
		p.i++
	}
	if n := p.i - start; n == 0 || n > 12 || p.peek() != '.' {
		return false
	}
	p.i++
	start = p.i
	for !p.done() && isDigit(p.s[p.i]) {
		p.i++
	}
	n := p.i - start
	return n >= 1 && n <= 3
}

// byteSeq consumes an sf-binary: base64 characters between colons.
func (p *sfParser) byteSeq() bool {
	p.i++ // opening colon
	for !p.done() {
		c := p.s[p.i]
		p.i++
		if c == ':' {
			return true
		}
		if !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
			return false
		}
	}
	return false
}

func (p *sfParser) key() (string, bool) {
	start := p.i
	if c := p.peek(); c != '*' && (c < 'a' || c > 'z') {
		return "", false
	}
	for !p.done() {
		c := p.s[p.i]
		if !(c >= 'a' && c <= 'z' || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], true
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isTokenChar(c byte) bool {
	if isAlpha(c) || isDigit(c) {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}

// serverWait returns the wait a retryable response asks for: Retry-After
// when present (an invalid one is ignored: the backoff applies), else the
// reset of an exhausted RateLimit quota.
func serverWait(h http.Header, now time.Time) (time.Duration, DelaySource, bool) {
	if v := h.Get("Retry-After"); v != "" {
		d, ok := ParseRetryAfter(v, now)
		return d, DelayRetryAfter, ok
	}
	if v := h.Get("RateLimit"); v != "" {
		d, ok := parseRateLimitReset(v)
		return d, DelayRateLimit, ok
	}
	return 0, DelayBackoff, false
}
