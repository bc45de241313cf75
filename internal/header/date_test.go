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

// RFC 9110 section 5.6.7 asks a recipient to be lenient in parsing dates.
// What real servers and clients send beyond the three forms is read as the
// instant it names (5 s after raNow, unless noted).
func TestParseRetryAfterLenientDates(t *testing.T) {
	const ahead = 5 * time.Second
	checkRetryAfterAtRaNow(t, []retryAfterCase{
		{"UTC for GMT", "Sun, 01 Jun 2025 12:00:05 UTC", ahead, true},
		{"UT for GMT", "Sun, 01 Jun 2025 12:00:05 UT", ahead, true},
		{"Z for GMT", "Sun, 01 Jun 2025 12:00:05 Z", ahead, true},
		{"lower-case z for GMT", "Sun, 01 Jun 2025 12:00:05 z", ahead, true},
		{"+0000", "Sun, 01 Jun 2025 12:00:05 +0000", ahead, true},
		{"-0000", "Sun, 01 Jun 2025 12:00:05 -0000", ahead, true},
		{"-0500 is 5 h behind", "Sun, 01 Jun 2025 07:00:05 -0500", ahead, true},
		{"+0200 is 2 h ahead", "Sun, 01 Jun 2025 14:00:05 +0200", ahead, true},
		{"+0530 counts its minutes", "Sun, 01 Jun 2025 17:30:05 +0530", ahead, true},
		{"-0930 counts its minutes", "Sun, 01 Jun 2025 02:30:05 -0930", ahead, true},
		{"+1400 across the date line", "Mon, 02 Jun 2025 02:00:05 +1400", ahead, true},
		{"numeric zone moves the day back", "Sat, 31 May 2025 23:00:05 -1300", ahead, true},
		{"EDT is -0400", "Sun, 01 Jun 2025 08:00:05 EDT", ahead, true},
		{"EST is -0500", "Sun, 01 Jun 2025 07:00:05 EST", ahead, true},
		{"CDT is -0500", "Sun, 01 Jun 2025 07:00:05 CDT", ahead, true},
		{"CST is -0600", "Sun, 01 Jun 2025 06:00:05 CST", ahead, true},
		{"MDT is -0600", "Sun, 01 Jun 2025 06:00:05 MDT", ahead, true},
		{"MST is -0700", "Sun, 01 Jun 2025 05:00:05 MST", ahead, true},
		{"PDT is -0700", "Sun, 01 Jun 2025 05:00:05 PDT", ahead, true},
		{"PST is -0800", "Sun, 01 Jun 2025 04:00:05 PST", ahead, true},
		{"RFC 850 in another zone", "Sunday, 01-Jun-25 05:00:05 PDT", ahead, true},
		{"RFC 850 with UTC", "Sunday, 01-Jun-25 12:00:05 UTC", ahead, true},
		{"no zone is GMT", "Sun, 01 Jun 2025 12:00:05", ahead, true},
		{"asctime with a zone", "Sun Jun  1 12:00:05 2025 GMT", ahead, true},
		{"one-digit day", "Sun, 1 Jun 2025 12:00:05 GMT", ahead, true},
		{"one-digit hour", "Sun, 01 Jun 2025 2:00:05 -1000", ahead, true},
		{"no seconds", "Sun, 01 Jun 2025 12:01 GMT", time.Minute, true},
		{"leap second", "Sun, 01 Jun 2025 12:00:60 GMT", time.Minute, true},
		{"no day name", "01 Jun 2025 12:00:05 GMT", ahead, true},
		{"one-digit day, no day name", "1 Jun 2025 12:00:05 GMT", ahead, true},
		{"no comma", "Sun 01 Jun 2025 12:00:05 GMT", ahead, true},
		{"no blank after the comma", "Sun,01 Jun 2025 12:00:05 GMT", ahead, true},
		{"runs of blanks", "Sun,  01 \t Jun  2025\t12:00:05   GMT", ahead, true},
		{"full day name in IMF-fixdate", "Sunday, 01 Jun 2025 12:00:05 GMT", ahead, true},
		{"short day name in RFC 850", "Sun, 01-Jun-25 12:00:05 GMT", ahead, true},
		{"dashes and four-digit year", "Sun, 01-Jun-2025 12:00:05 GMT", ahead, true},
		{"two-digit year with blanks", "Sun, 01 Jun 25 12:00:05 GMT", ahead, true},
		{"two-digit year in asctime", "Sun Jun  1 12:00:05 25", ahead, true},
		{"full month name", "Sun, 01 June 2025 12:00:05 GMT", ahead, true},
		{"lower case", "sun, 01 jun 2025 12:00:05 gmt", ahead, true},
		{"upper case", "SUNDAY, 01-JUN-25 12:00:05 GMT", ahead, true},
		{"wrong day name is ignored", "Mon, 01 Jun 2025 12:00:05 GMT", ahead, true},
		{"an hour ahead", "Sun, 01 Jun 2025 13:00:00 UTC", time.Hour, true},
		{"in the past", "Sat, 31 May 2025 23:59:59 -0500", 0, true},
	})
}

// Any other date is ignored, whatever it may have meant.
func TestParseRetryAfterIgnoresOtherDates(t *testing.T) {
	checkRetryAfterAtRaNow(t, []retryAfterCase{
		{"unknown zone", "Sun, 01 Jun 2025 12:00:05 XYZ", 0, false},
		{"ambiguous zone name", "Sun, 01 Jun 2025 12:00:05 IST", 0, false},
		{"zone name and offset", "Sun, 01 Jun 2025 12:00:05 GMT+0000", 0, false},
		{"two zones", "Sun, 01 Jun 2025 12:00:05 GMT GMT", 0, false},
		{"two-digit offset", "Sun, 01 Jun 2025 12:00:05 +05", 0, false},
		{"offset with colon", "Sun, 01 Jun 2025 12:00:05 +05:00", 0, false},
		{"offset hours 24", "Sun, 01 Jun 2025 12:00:05 +2400", 0, false},
		{"offset minutes 60", "Sun, 01 Jun 2025 12:00:05 +0060", 0, false},
		{"comment after the zone", "Sun, 01 Jun 2025 12:00:05 +0000 (UTC)", 0, false},
		{"fractional seconds", "Sun, 01 Jun 2025 12:00:05.5 GMT", 0, false},
		{"fractional seconds in asctime", "Sun Jun  1 12:00:05.25 2025", 0, false},
		{"hour 24", "Sun, 01 Jun 2025 24:00:00 GMT", 0, false},
		{"minute 60", "Sun, 01 Jun 2025 12:60:00 GMT", 0, false},
		{"second 61", "Sun, 01 Jun 2025 12:00:61 GMT", 0, false},
		{"three-digit hour", "Sun, 01 Jun 2025 012:00:05 GMT", 0, false},
		{"one-digit minute", "Sun, 01 Jun 2025 12:0:05 GMT", 0, false},
		{"no time", "Sun, 01 Jun 2025 GMT", 0, false},
		{"no blank before the zone", "Sun, 01 Jun 2025 12:00:05GMT", 0, false},
		{"no blank between asctime's month and day", "Sun Jun1 12:00:05 2025", 0, false},
		{"no blank between asctime's time and year", "Sun Jun  1 12:00:052025", 0, false},
		{"day 0", "Sun, 00 Jun 2025 12:00:05 GMT", 0, false},
		{"day 31 of June", "Sun, 31 Jun 2025 12:00:05 GMT", 0, false},
		{"three-digit day", "Sun, 001 Jun 2025 12:00:05 GMT", 0, false},
		{"three-digit year", "Sun, 01 Jun 025 12:00:05 GMT", 0, false},
		{"five-digit year", "Sun, 01 Jun 20250 12:00:05 GMT", 0, false},
		{"unknown month", "Sun, 01 Jux 2025 12:00:05 GMT", 0, false},
		{"month abbreviation with a dot", "Sun, 01 Jun. 2025 12:00:05 GMT", 0, false},
		{"numeric month", "Sun, 01 06 2025 12:00:05 GMT", 0, false},
		{"unknown day name", "Fun, 01 Jun 2025 12:00:05 GMT", 0, false},
		{"day name alone", "Sunday", 0, false},
		{"two day names", "Sun, Sun, 01 Jun 2025 12:00:05 GMT", 0, false},
		{"trailing garbage", "Sun, 01 Jun 2025 12:00:05 GMT x", 0, false},
		{"trailing comma", "Sun, 01 Jun 2025 12:00:05 GMT,", 0, false},
		{"two dates", "Sun, 01 Jun 2025 12:00:05 GMT, Sun, 01 Jun 2025 12:00:06 GMT", 0, false},
		{"month before day with year first", "Sun Jun 01 2025 12:00:05 GMT", 0, false},
		{"ISO 8601 with blank", "2025-06-01 12:00:05", 0, false},
		{"RFC 3339 offset", "2025-06-01T12:00:05+00:00", 0, false},
		{"Unix time", "1748779205", 1748779205 * time.Second, true}, // delay-seconds, not a date
		{"newline inside", "Sun, 01 Jun 2025\n12:00:05 GMT", 0, false},
		{"non-ASCII blank", "Sun,\u00a001 Jun 2025 12:00:05 GMT", 0, false},
	})
}

// retryAfterCase is a Retry-After value and what ParseRetryAfter makes of it.
type retryAfterCase struct {
	name  string
	value string
	want  time.Duration
	ok    bool
}

// checkRetryAfterAtRaNow checks each value as received at raNow.
func checkRetryAfterAtRaNow(t *testing.T, tests []retryAfterCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tc.value, raNow)
			assert.Equal(t, tc.ok, ok, "ok")
			assert.Equal(t, tc.want, got, "wait")
		})
	}
}

// RFC 9110 section 5.6.7: an rfc850-date whose two-digit year appears to be
// more than 50 years in the future is taken as the most recent past year
// with the same last two digits.
func TestParseRetryAfterRFC850TwoDigitYear(t *testing.T) {
	tests := []struct {
		name  string
		value string
		now   time.Time
		want  time.Time // the date the value stands for
	}{
		{"a near future year", "Monday, 01-Jan-35 00:00:00 GMT", raNow, raDate(2035, 1, 1, 0, 0, 0)},
		{"this year", "Sunday, 01-Jun-25 12:00:10 GMT", raNow, raDate(2025, 6, 1, 12, 0, 10)},
		{"94 seen from 2060 is 2094", "Saturday, 06-Nov-94 08:49:37 GMT", raDate(2060, 1, 1, 0, 0, 0), raDate(2094, 11, 6, 8, 49, 37)},
		{"94 seen from 2025 is 1994", "Sunday, 06-Nov-94 08:49:37 GMT", raNow, raDate(1994, 11, 6, 8, 49, 37)},
		{"exactly 50 years ahead is kept", "Saturday, 01-Jun-75 12:00:00 GMT", raNow, raDate(2075, 6, 1, 12, 0, 0)},
		{"50 years and a second ahead is the past", "Saturday, 01-Jun-75 12:00:01 GMT", raNow, raDate(1975, 6, 1, 12, 0, 1)},
		{"later in the 50th year is the past", "Sunday, 01-Dec-75 00:00:00 GMT", raNow, raDate(1975, 12, 1, 0, 0, 0)},
		{"next century, seen from 2099", "Friday, 01-Jan-00 00:00:00 GMT", raDate(2099, 6, 1, 0, 0, 0), raDate(2100, 1, 1, 0, 0, 0)},
		{"00 seen from 2000", "Saturday, 01-Jan-00 00:00:03 GMT", raDate(2000, 1, 1, 0, 0, 0), raDate(2000, 1, 1, 0, 0, 3)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tc.value, tc.now)
			assert.True(t, ok)
			assert.Equal(t, max(tc.want.Sub(tc.now), 0), got)
		})
	}
}

// raSaturatedSeconds is the reference for a digits-only value: its number of
// seconds, or the largest Duration when that does not fit.
func raSaturatedSeconds(digits string) time.Duration {
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > uint64(math.MaxInt64/int64(time.Second)) {
		return raMax
	}
	return time.Duration(n) * time.Second
}

// FuzzParseRetryAfter feeds arbitrary values, reception instants and dates
// to ParseRetryAfter. It must never panic; a wait is never negative, and a
// rejected value waits 0; a digits-only value is that many seconds
// (saturated); an accepted date does not depend on blanks around it and has
// whole seconds; and a date formatted as IMF-fixdate, asctime, RFC 850
// (within its 50-year window) or with a numeric zone reads back as the
// instant it names.
func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{
		"0", "120", "\t42 ", "-1", "+1", "1.0", "", "abc", " 1 2", "١٢٠", "9223372037",
		"99999999999999999999", "Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994",
		"Fri, 31 Dec 9999 23:59:59 GMT", "Monday, 01-Jan-00 00:00:00 GMT",
		"Sun, 6 Nov 1994 08:49:37 UTC", "6 Nov 1994 03:49:37 -0500", "Sun, 06 Nov 94 08:49 PST",
		"Sun, 06-Nov-1994 08:49:60", "Tue, 29 Feb 00 00:00:00 GMT", "Sun, 06 Nov 1994 08:49:37.5 GMT",
		"Sun, 06 Nov 1994 08:49:37 +2359", "Sun, 06 Nov 1994 08:49:37 XYZ",
	} {
		f.Add(v, raNow.Unix(), raNow.Unix()+37, int16(0))
	}
	f.Add("", raNow.Unix(), int64(-62135596800), int16(-1439))
	f.Add("", int64(253402300799), int64(253402300799), int16(1439))
	f.Fuzz(func(t *testing.T, value string, nowUnix, dateUnix int64, offsetMinutes int16) {
		// Any instants from year 1 to 9999: the range a Retry-After may meet.
		const lo, hi = -62135596800, 253402300799
		inRange := func(u int64) int64 {
			if u < lo || u > hi {
				u = lo + int64(uint64(u)%uint64(hi-lo+1))
			}
			return u
		}
		now := time.Unix(inRange(nowUnix), 0).UTC()
		wait, ok := ParseRetryAfter(value, now)
		if wait < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v: negative", value, wait)
		}
		if !ok && wait != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: a rejected value must give 0", value, wait)
		}
		v := strings.Trim(value, " \t")
		switch {
		case v != "" && strings.Trim(v, "0123456789") == "":
			if want := raSaturatedSeconds(v); !ok || wait != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, true", value, wait, ok, want)
			}
		case ok:
			// A date: the answer cannot depend on blanks around it, and it
			// names a whole second.
			if w2, ok2 := ParseRetryAfter(" "+v+"\t", now); !ok2 || w2 != wait {
				t.Fatalf("ParseRetryAfter(%q) depends on surrounding blanks", value)
			}
			if wait%time.Second != 0 && wait != raMax {
				t.Fatalf("ParseRetryAfter(%q) = %v: an HTTP-date has whole seconds", value, wait)
			}
		}

		date := time.Unix(inRange(dateUnix), 0).UTC()
		want := max(date.Sub(now), 0)
		readsBack := func(form, layout string, in time.Time) {
			s := in.Format(layout)
			if got, ok := ParseRetryAfter(s, now); !ok || got != want {
				t.Fatalf("%s %q at %v = %v, %v; want %v, true", form, s, now, got, ok, want)
			}
		}
		readsBack("IMF-fixdate", http.TimeFormat, date)
		readsBack("asctime", time.ANSIC, date)
		if lim := now.AddDate(50, 0, 0); !date.After(lim) && date.After(lim.AddDate(-100, 0, 0)) {
			readsBack("RFC 850", "Monday, 02-Jan-06 15:04:05 GMT", date)
		}
		offset := int(offsetMinutes) % (24 * 60) // within ±23:59
		if local := date.In(time.FixedZone("", offset*60)); local.Year() >= 0 && local.Year() <= 9999 {
			readsBack("numeric zone", "Mon, 2 Jan 2006 15:04:05 -0700", local)
		}
	})
}
