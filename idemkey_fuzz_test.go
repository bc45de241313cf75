package retryhttp

import (
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// FuzzCallerKey builds a header from arbitrary names and values (fields
// separated by '\n', name and values by ':', values by ',') and checks
// hasKey and callerKey on it. They must never panic; hasKey must agree with
// callerKey; a key found must be one of the values as sent (trimmed), under
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
		k := (&IdempotencyKeys{Header: header}).compile()
		for _, k := range []*keyPolicy{nil, k} {
			key := callerKey(h, k)
			if hasKey(h, k) != (key != "") {
				t.Fatalf("hasKey = %v, callerKey = %q for %q", hasKey(h, k), key, h)
			}
			if key != "" && !sentUnderKeyName(h, k, key) {
				t.Fatalf("callerKey = %q is no value sent under a key name in %q", key, h)
			}
			other := h.Clone()
			other["Not-A-Key"] = []string{"x"}
			for name, values := range h {
				if names, n := keyNames(k); keyName(name, &names, n) < 0 {
					delete(other, name)
					other[strings.ToUpper(name)] = append(other[strings.ToUpper(name)], values...)
				}
			}
			if got := callerKey(other, k); keyFieldsEqual(h, other, k) && got != key {
				t.Fatalf("callerKey = %q, but %q after a change to other fields", key, got)
			}
		}
		// A key set on a header without one is its only key field.
		if !hasKey(h, k) {
			c := h.Clone()
			k.setKey(c, "gen")
			names, n := keyNames(k)
			fields := 0
			for name, values := range c {
				if keyName(name, &names, n) >= 0 {
					fields++
					if name != k.header || len(values) != 1 || values[0] != "gen" {
						t.Fatalf("setKey left %s: %q in %q", name, values, c)
					}
				}
			}
			if fields != 1 || callerKey(c, k) != "gen" {
				t.Fatalf("setKey made %d key fields in %q", fields, c)
			}
		}
	})
}

// sentUnderKeyName reports whether key, trimmed, is a value of h under a
// key name in some letter case.
func sentUnderKeyName(h http.Header, k *keyPolicy, key string) bool {
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
// and values), which decide callerKey.
func keyFieldsEqual(a, b http.Header, k *keyPolicy) bool {
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
