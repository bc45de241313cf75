package retryhttp

import (
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/dunglas/httpsfv"
)

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
	return secondsSaturated(n), true
}

// parseHTTPDate parses an HTTP-date as ParseRetryAfter describes. It is
// written by hand rather than as a list of time.Parse layouts: those accept
// fractional seconds and any zone abbreviation (an unknown one as UTC), and
// every combination of the leniencies would need its own layout.
func parseHTTPDate(v string, now time.Time) (time.Time, bool) {
	s := dateScanner{s: v}
	s.dayName()
	var day, month, year, yearDigits, hour, min, sec int
	if isDigit(s.peek()) { // IMF-fixdate and RFC 850: day month year time
		day = s.number(1, 2)
		s.dateSep()
		month = s.month()
		s.dateSep()
		year, yearDigits = s.year()
		s.needBlanks()
		hour, min, sec = s.clock()
	} else { // asctime: month day time year
		month = s.month()
		s.needBlanks()
		day = s.number(1, 2)
		s.needBlanks()
		hour, min, sec = s.clock()
		s.needBlanks()
		year, yearDigits = s.year()
	}
	var offset time.Duration // east of UTC; none means GMT
	if s.blanks() && !s.done() {
		offset = s.zone()
	}
	if s.bad || !s.done() {
		return time.Time{}, false
	}
	at := func(year int) time.Time {
		return time.Date(year, time.Month(month), day, hour, min, sec, 0, time.UTC).Add(-offset)
	}
	if yearDigits == 2 {
		// RFC 9110 section 5.6.7: a two-digit year more than 50 years in
		// the future is the most recent past year with the same digits.
		limit := now.AddDate(50, 0, 0)
		year += now.Year() - now.Year()%100 + 100
		for at(year).After(limit) {
			year -= 100
		}
	}
	if day < 1 || day > daysIn(time.Month(month), year) {
		return time.Time{}, false
	}
	return at(year), true
}

// dateScanner reads the parts of an HTTP-date. A part that is not there
// sets bad, and once bad is set every method reads nothing.
type dateScanner struct {
	s   string
	i   int
	bad bool
}

func (s *dateScanner) done() bool { return s.i >= len(s.s) }

func (s *dateScanner) peek() byte {
	if s.done() {
		return 0
	}
	return s.s[s.i]
}

// blanks consumes a run of spaces and tabs and reports whether there was one.
func (s *dateScanner) blanks() bool {
	start := s.i
	for c := s.peek(); c == ' ' || c == '\t'; c = s.peek() {
		s.i++
	}
	return s.i > start
}

func (s *dateScanner) needBlanks() {
	if !s.bad && !s.blanks() {
		s.bad = true
	}
}

// dateSep consumes the separator between day, month and year: a dash or
// blanks.
func (s *dateScanner) dateSep() {
	if s.peek() == '-' {
		s.i++
		return
	}
	s.needBlanks()
}

// word consumes a run of ASCII letters.
func (s *dateScanner) word() string {
	start := s.i
	for isAlpha(s.peek()) {
		s.i++
	}
	return s.s[start:s.i]
}

// dayName consumes a day name, if one comes, with the comma or blanks
// after it.
func (s *dateScanner) dayName() {
	start := s.i
	if dateName(s.word(), weekdayNames[:]) < 0 {
		s.i = start // no day name: perhaps asctime's month
		return
	}
	if s.peek() == ',' {
		s.i++
		s.blanks()
		return
	}
	s.needBlanks()
}

// month consumes a month name and returns its number, from 1.
func (s *dateScanner) month() int {
	if s.bad {
		return 0
	}
	m := dateName(s.word(), monthNames[:]) + 1
	s.bad = m == 0
	return m
}

// number consumes min to max digits not followed by another digit.
func (s *dateScanner) number(min, max int) int {
	n, _ := s.digits(min, max)
	return n
}

func (s *dateScanner) digits(min, max int) (n, digits int) {
	if s.bad {
		return 0, 0
	}
	for isDigit(s.peek()) {
		if digits == max {
			s.bad = true
			return 0, 0
		}
		n = n*10 + int(s.s[s.i]-'0')
		s.i++
		digits++
	}
	s.bad = digits < min
	return n, digits
}

// year consumes a year of two or four digits.
func (s *dateScanner) year() (year, digits int) {
	year, digits = s.digits(2, 4)
	if digits == 3 {
		s.bad = true
	}
	return year, digits
}

// clock consumes hour ":" minute [":" second]: a one- or two-digit hour
// up to 23, minutes up to 59, seconds up to 60 (a leap second).
func (s *dateScanner) clock() (hour, min, sec int) {
	hour = s.number(1, 2)
	s.colon()
	min = s.number(2, 2)
	if !s.bad && s.peek() == ':' {
		s.i++
		sec = s.number(2, 2)
	}
	if hour > 23 || min > 59 || sec > 60 {
		s.bad = true
	}
	return hour, min, sec
}

func (s *dateScanner) colon() {
	if !s.bad && s.peek() == ':' {
		s.i++
		return
	}
	s.bad = true
}

// zone consumes a zone and returns its offset east of UTC: a known name, or
// "+" or "-" and four digits, hours (up to 23) and minutes (up to 59).
func (s *dateScanner) zone() time.Duration {
	if s.bad {
		return 0
	}
	if c := s.peek(); c == '+' || c == '-' {
		s.i++
		n := s.number(4, 4)
		if n/100 > 23 || n%100 > 59 {
			s.bad = true
		}
		d := time.Duration(n/100)*time.Hour + time.Duration(n%100)*time.Minute
		if c == '-' {
			d = -d
		}
		return d
	}
	w := s.word()
	for _, z := range zoneNames {
		if strings.EqualFold(w, z.name) {
			return time.Duration(z.hours) * time.Hour
		}
	}
	s.bad = true
	return 0
}

// zoneNames are the zone names read in an HTTP-date: universal time, and
// the obsolete North American zones of RFC 5322 section 4.3. Other names
// are ambiguous (IST is Irish, Israeli and Indian time) or unknown.
var zoneNames = [...]struct {
	name  string
	hours int
}{
	{"GMT", 0}, {"UT", 0}, {"UTC", 0}, {"Z", 0},
	{"EST", -5}, {"EDT", -4}, {"CST", -6}, {"CDT", -5},
	{"MST", -7}, {"MDT", -6}, {"PST", -8}, {"PDT", -7},
}

var (
	weekdayNames = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	monthNames   = [...]string{"January", "February", "March", "April", "May", "June",
		"July", "August", "September", "October", "November", "December"}
)

// dateName returns the index in names of w, given in full or by its first
// three letters, in any letter case; or -1.
func dateName(w string, names []string) int {
	if len(w) < 3 {
		return -1
	}
	for i, name := range names {
		if strings.EqualFold(w, name) || (len(w) == 3 && strings.EqualFold(w, name[:3])) {
			return i
		}
	}
	return -1
}

// daysIn returns the number of days of month m in year y.
func daysIn(m time.Month, y int) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
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

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// serverWait returns the wait a retryable response asks for: Retry-After
// when present (an invalid one is ignored: the backoff applies), else the
// reset of an exhausted RateLimit quota. A zero wait (Retry-After: 0, a
// date not in the future, a reset now) is returned with ok true: the server
// asks for no wait, and the caller waits its backoff instead.
func serverWait(h http.Header, now time.Time) (time.Duration, DelaySource, bool) {
	// The millisecond forms are more precise than Retry-After's seconds:
	// the Stainless SDKs' and Azure's, and AWS's x-amz-retry-after.
	for _, name := range [...]string{"Retry-After-Ms", "X-Ms-Retry-After-Ms", "X-Amz-Retry-After"} {
		if v := headerValue(h, name); v != "" {
			if d, ok := parseMilliseconds(v); ok {
				return d, DelayRetryAfter, true
			}
		}
	}
	if v := headerValue(h, "Retry-After"); v != "" {
		d, ok := ParseRetryAfter(v, now)
		return d, DelayRetryAfter, ok
	}
	if v := headerValue(h, "Ratelimit"); v != "" {
		if d, ok := parseRateLimitReset(v); ok {
			return d, DelayRateLimit, true
		}
	}
	if rateLimited(h) {
		if d, ok := parseXRateLimitReset(headerValue(h, "X-Ratelimit-Reset"), now); ok {
			return d, DelayRateLimit, true
		}
	}
	return 0, DelayBackoff, false
}

// rateLimited reports whether h says a rate limit is spent, as many APIs
// (GitHub, for one) say it, also with a 403: X-RateLimit-Remaining: 0 and
// an X-RateLimit-Reset.
func rateLimited(h http.Header) bool {
	return strings.TrimSpace(headerValue(h, "X-Ratelimit-Remaining")) == "0" && headerValue(h, "X-Ratelimit-Reset") != ""
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
// in any letter case; anything else is no verdict.
func shouldRetry(h http.Header) serverVerdict {
	// Canonical names already: no Get, which canonicalizes.
	if v := verdictOf(h["X-Should-Retry"]); v != verdictNone {
		return v
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
