package header

// The HTTP-date scanner: the dates ParseRetryAfter reads, and nothing else.
//
// It is written by hand because the standard library's parsers read other
// dates than the ones promised. Tried on values of
// TestParseRetryAfterLenientDates and TestParseRetryAfterIgnoresOtherDates
// (Go 1.26), http.ParseTime with net/mail.ParseDate as its fallback
//   - accepts what is to be ignored: an unknown or ambiguous zone (XYZ,
//     IST) as UTC, fractional seconds (kept as a fraction), and a comment
//     after the zone;
//   - reads the North American zone names by the process's local zone: in
//     a process whose local zone is UTC, "08:00:05 EDT" is 08:00:05 UTC
//     (four hours early), and "05:00:05 PDT" in an RFC 850 date is
//     05:00:05 UTC even when the local zone is America/New_York;
//   - rejects 13 of the 27 promised forms tried: zone Z, no zone, asctime
//     with a zone, a leap second, no comma or no blank after the day name,
//     runs of blanks, a full day name in IMF-fixdate, an RFC 850 date with
//     a short day name or a four-digit year, asctime with a two-digit year,
//     a full month name, and lower case.
//
// A list of time.Parse layouts fares no better: Parse takes fractional
// seconds and unknown zone abbreviations too, and each combination of the
// leniencies would need a layout of its own.

import (
	"strings"
	"time"
)

// parseHTTPDate parses an HTTP-date as ParseRetryAfter describes, received
// at now (which places a two-digit year). It is written by hand: the
// standard library's parsers accept unknown zones and fractional seconds and
// reject forms read here (see the top of this file).
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

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
