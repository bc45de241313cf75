package header

import (
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyBenchHeaders are the headers HasKey meets: a request with no header,
// one with a few fields and no key (every GET), and keyed ones.
var keyBenchHeaders = []struct {
	name string
	h    http.Header
}{
	{"no header", nil},
	{"canonical key", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k1"}}},
	{"six fields, no key", http.Header{
		"Accept": {"*/*"}, "Accept-Encoding": {"gzip"}, "Authorization": {"Bearer x"},
		"Content-Type": {"application/json"}, "User-Agent": {"client/1.0"}, "X-Request-Id": {"r-1"},
	}},
	{"six fields, lower-case key", http.Header{
		"Accept": {"*/*"}, "Accept-Encoding": {"gzip"}, "Authorization": {"Bearer x"},
		"Content-Type": {"application/json"}, "User-Agent": {"client/1.0"}, "idempotency-key": {"k1"},
	}},
}

func BenchmarkHasKey(b *testing.B) {
	k := DefaultKey
	for _, bc := range keyBenchHeaders {
		b.Run(bc.name, func(b *testing.B) {
			want := bc.h != nil && bc.name != "six fields, no key"
			for b.Loop() {
				if HasKey(bc.h, k) != want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

func TestCallerKey(t *testing.T) {
	custom := "Request-Key"
	standard := DefaultKey
	for _, tc := range []struct {
		name string
		h    http.Header
		k    string
		want string
	}{
		{"nil header", nil, standard, ""},
		{"no key", http.Header{"Content-Type": {"text/plain"}}, standard, ""},
		{"canonical", http.Header{"Idempotency-Key": {"k1"}}, standard, "k1"},
		{"lower case", http.Header{"idempotency-key": {"k1"}}, standard, "k1"},
		{"X- in upper case", http.Header{"X-IDEMPOTENCY-KEY": {"k1"}}, "", "k1"},
		{"blanks around are not sent", http.Header{"Idempotency-Key": {" \tk1 "}}, standard, "k1"},
		{"empty and blank values are no key", http.Header{"Idempotency-Key": {"", " ", "\t"}}, standard, ""},
		{"first non-empty of several", http.Header{"Idempotency-Key": {"", "k1", "k2"}}, standard, "k1"},
		{"similar name", http.Header{"Idempotency-Keys": {"k1"}, "Idempotency_Key": {"k2"}}, standard, ""},
		{"Kelvin sign is not K", http.Header{"Idempotency-\u212aey": {"k1"}}, standard, ""},
		{"configured header", http.Header{"Request-Key": {"k1"}}, custom, "k1"},
		{"X- in lower case beside a configured header", http.Header{"x-idempotency-key": {"k1"}}, custom, "k1"},
		{"configured A and z in other cases", http.Header{"aZ-KEY": {"k1"}}, "Az-Key", "k1"},
		{"configured Z and a in other cases", http.Header{"zA-KEY": {"k1"}}, "Za-Key", "k1"},
		{"a field without a name is no key", http.Header{"": {"k1"}}, "", ""},
		{"a carriage return alone is no key", http.Header{"Idempotency-Key": {"\r"}}, standard, ""},
		{"a line feed alone is no key", http.Header{"Idempotency-Key": {"\n"}}, standard, ""},
		{"configured header, other case", http.Header{"REQUEST-key": {"k1"}}, custom, "k1"},
		{"configured header unknown with keys off", http.Header{"Request-Key": {"k1"}}, "", ""},
		{"configured header first", http.Header{"Idempotency-Key": {"k2"}, "request-key": {"k1"}}, custom, "k1"},
		{"Idempotency-Key before X-", http.Header{"X-Idempotency-Key": {"k2"}, "idempotency-key": {"k1"}}, standard, "k1"},
		{"X- first when configured", http.Header{"Idempotency-Key": {"k2"}, "x-idempotency-key": {"k1"}},
			XKey, "k1"},
		{"canonical spelling before others", http.Header{"IDEMPOTENCY-KEY": {"k2"}, "Idempotency-Key": {"k1"}}, standard, "k1"},
		{"other spellings in byte order", http.Header{"idempotency-key": {"k3"}, "IDEMPOTENCY-KEY": {"k1"}, "Idempotency-KEY": {"k2"}}, standard, "k1"},
		{"empty canonical, key in another spelling", http.Header{"Idempotency-Key": {""}, "idempotency-KEY": {"", "k1"}}, standard, "k1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, CallerKey(tc.h, tc.k))
			assert.Equal(t, tc.want != "", HasKey(tc.h, tc.k), "HasKey")
		})
	}
}

// HasKey runs for every request: it allocates nothing, whether it finds a
// key by the canonical lookups, by the scan, or none.
func TestHasKeyAllocatesNothing(t *testing.T) {
	k := "Request-Key"
	for _, bc := range keyBenchHeaders {
		assert.Zero(t, testing.AllocsPerRun(100, func() { HasKey(bc.h, k) }), bc.name)
		assert.Zero(t, testing.AllocsPerRun(100, func() { HasKey(bc.h, "") }), bc.name+", keys off")
	}
}

// A generated key is the one key line sent: the blank fields a caller left
// under key names in other letter cases go, the rest of the header stays.
func TestSetKeyLeavesOneKeyLine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   string
		header http.Header
		want   http.Header
	}{
		{"no key fields", "",
			http.Header{"Content-Type": {"text/plain"}},
			http.Header{"Content-Type": {"text/plain"}, "Idempotency-Key": {"gen"}}},
		{"blank fields in any case", "",
			http.Header{"Idempotency-Key": {""}, "idempotency-key": {" ", ""}, "X-IDEMPOTENCY-KEY": {"\t"}, "Accept": {"*/*"}},
			http.Header{"Accept": {"*/*"}, "Idempotency-Key": {"gen"}}},
		{"configured header", "request-key",
			http.Header{"REQUEST-KEY": {""}, "idempotency-key": {""}, "Request-Keys": {"other"}},
			http.Header{"Request-Key": {"gen"}, "Request-Keys": {"other"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := configured(tc.keys)
			require.False(t, HasKey(tc.header, k), "SetKey is for a header without a key")
			SetKey(tc.header, k, "gen")
			assert.Equal(t, tc.want, tc.header)
			assert.Equal(t, "gen", CallerKey(tc.header, k))
		})
	}
}

// FuzzCallerKey builds a header from arbitrary names and values (fields
// separated by '\n', name and values by ':', values by ',') and checks
// HasKey and CallerKey on it. They must never panic; HasKey must agree with
// CallerKey; a key found must be one of the values as sent (trimmed), under
// a key name in some letter case; and changing the letter case of a name
// that is no key name's, or adding a field that is none, changes nothing.
func FuzzCallerKey(f *testing.F) {
	for _, seed := range []struct{ fields, header string }{
		{"Idempotency-Key:k1", ""},
		{"idempotency-key:k1", ""},
		{"X-IDEMPOTENCY-KEY:,k1", ""},
		{"Idempotency-Key:\nidempotency-key: k1 ", ""},
		{"Request-Key:k1\nIdempotency-Key:k2", "request-key"},
		{"IDEMPOTENCY-KEY:k2\nIdempotency-KEY:k1", ""},
		{"Content-Type:text/plain\nAccept:*/*", ""},
		{"Idempotency-\u212aey:k1", ""},
		{":", ":"},
	} {
		f.Add(seed.fields, seed.header)
	}
	f.Fuzz(func(t *testing.T, fields, header string) {
		h := http.Header{}
		for _, field := range strings.Split(fields, "\n") {
			name, values, _ := strings.Cut(field, ":")
			h[name] = append(h[name], strings.Split(values, ",")...)
		}
		k := configured(header)
		for _, k := range []string{"", k} {
			key := CallerKey(h, k)
			if HasKey(h, k) != (key != "") {
				t.Fatalf("HasKey = %v, CallerKey = %q for %q", HasKey(h, k), key, h)
			}
			if key != "" && !sentUnderKeyName(h, k, key) {
				t.Fatalf("CallerKey = %q is no value sent under a key name in %q", key, h)
			}
			other := h.Clone()
			other["Not-A-Key"] = []string{"x"}
			for name, values := range h {
				if names, n := keyNames(k); keyName(name, &names, n) < 0 {
					delete(other, name)
					other[strings.ToUpper(name)] = append(other[strings.ToUpper(name)], values...)
				}
			}
			if got := CallerKey(other, k); keyFieldsEqual(h, other, k) && got != key {
				t.Fatalf("CallerKey = %q, but %q after a change to other fields", key, got)
			}
		}
		// A key set on a header without one is its only key field.
		if !HasKey(h, k) {
			c := h.Clone()
			SetKey(c, k, "gen")
			names, n := keyNames(k)
			fields := 0
			for name, values := range c {
				if keyName(name, &names, n) >= 0 {
					fields++
					if name != k || len(values) != 1 || values[0] != "gen" {
						t.Fatalf("SetKey left %s: %q in %q", name, values, c)
					}
				}
			}
			if fields != 1 || CallerKey(c, k) != "gen" {
				t.Fatalf("SetKey made %d key fields in %q", fields, c)
			}
		}
	})
}

// sentUnderKeyName reports whether key, trimmed, is a value of h under a
// key name in some letter case.
func sentUnderKeyName(h http.Header, k string, key string) bool {
	names, n := keyNames(k)
	for name, values := range h {
		if keyName(name, &names, n) < 0 {
			continue
		}
		for _, v := range values {
			if textproto.TrimString(v) == key {
				return true
			}
		}
	}
	return false
}

// keyFieldsEqual reports whether a and b hold the same key fields (names
// and values), which decide CallerKey.
func keyFieldsEqual(a, b http.Header, k string) bool {
	names, n := keyNames(k)
	count := func(h http.Header) int {
		c := 0
		for name := range h {
			if keyName(name, &names, n) >= 0 {
				c++
			}
		}
		return c
	}
	if count(a) != count(b) {
		return false
	}
	for name, values := range a {
		if keyName(name, &names, n) < 0 {
			continue
		}
		if strings.Join(b[name], "\x00") != strings.Join(values, "\x00") || len(b[name]) != len(values) {
			return false
		}
	}
	return true
}

// configured is the key header a Transport configured with name sends
// its keys under: name's canonical form, or DefaultKey.
func configured(name string) string {
	if name == "" {
		return DefaultKey
	}
	return textproto.CanonicalMIMEHeaderKey(name)
}
