package header

import (
	"net/http"
	"net/textproto"
)

// The names of the idempotency key's field that every request is read
// for, besides a configured one.
const (
	DefaultKey = "Idempotency-Key"   // the IETF draft's, and most APIs'
	XKey       = "X-Idempotency-Key" // an older name, still used by some APIs
)

// HasKey reports whether h carries a caller's idempotency key: a non-empty
// value under Idempotency-Key, X-Idempotency-Key or the header name
// (none if ""), in any letter case. net/http sends a name set by direct
// assignment to the map (h["idempotency-key"]) as written, and a server
// matches names case-insensitively, so every spelling is the key. A value
// empty or blank is no key: a server would not deduplicate by it.
//
// The canonical names are looked up first; the map's keys are scanned only
// when they miss (a header has few entries, and most have another length).
// HasKey(h, name) == (CallerKey(h, name) != "").
func HasKey(h http.Header, name string) bool {
	if len(h) == 0 {
		return false
	}
	if nonEmpty(h[DefaultKey]) || nonEmpty(h[XKey]) || (name != "" && nonEmpty(h[name])) {
		return true
	}
	names, n := keyNames(name)
	for spelling, values := range h {
		if l := len(spelling); l != len(names[0]) && l != len(names[1]) && l != len(names[2]) {
			continue // most fields: no key name has their length
		}
		if keyName(spelling, &names, n) >= 0 && nonEmpty(values) {
			return true
		}
	}
	return false
}

// CallerKey returns the caller's idempotency key in h, as a server receives
// it (without surrounding blanks), or "" if there is none. Of several, it is
// the first non-empty value under the header name (none if ""), then
// Idempotency-Key, then X-Idempotency-Key; under each name the canonical
// spelling comes first, then the others in byte order.
func CallerKey(h http.Header, name string) string {
	if len(h) == 0 {
		return ""
	}
	names, n := keyNames(name)
	// Under the first name whose canonical spelling has a key, that key;
	// other spellings matter only for the names before it.
	var found [len(names)]struct{ spelling, value string }
	for i := range n {
		if v := firstNonEmpty(h[names[i]]); v != "" {
			if i == 0 {
				return v
			}
			found[i].spelling, found[i].value = names[i], v
			n = i + 1
			break
		}
	}
	for spelling, values := range h {
		i := keyName(spelling, &names, n)
		if i < 0 || spelling == names[i] || found[i].spelling == names[i] {
			continue
		}
		if v := firstNonEmpty(values); v != "" && (found[i].value == "" || spelling < found[i].spelling) {
			found[i].spelling, found[i].value = spelling, v
		}
	}
	for _, f := range found {
		if f.value != "" {
			return f.value
		}
	}
	return ""
}

// SetKey makes key the one key of h, a copy of the header of a request
// that carries no key (HasKey(h, name) is false), under the header name:
// every field under a key name in any letter case, whose values are all
// blank since h has no key, is removed. The server then receives one key
// line, not the key beside the caller's empty lines.
func SetKey(h http.Header, name, key string) {
	names, n := keyNames(name)
	for spelling := range h {
		if keyName(spelling, &names, n) >= 0 {
			delete(h, spelling)
		}
	}
	h[name] = []string{key}
}

// keyNames returns the canonical names a caller's key may have, in the
// order CallerKey reads them, and how many there are: the configured header
// (if any), then DefaultKey and XKey, each name once.
func keyNames(name string) (names [3]string, n int) {
	names, n = [3]string{DefaultKey, XKey}, 2
	switch name {
	case "", DefaultKey:
	case XKey:
		names[0], names[1] = XKey, DefaultKey
	default:
		names, n = [3]string{name, DefaultKey, XKey}, 3
	}
	return names, n
}

// keyName returns the index among the first n names of the name that
// spelling is in some letter case, or -1.
func keyName(spelling string, names *[3]string, n int) int {
	for i := range n {
		if len(spelling) == len(names[i]) && equalFoldASCII(spelling, names[i]) {
			return i
		}
	}
	return -1
}

// equalFoldASCII reports whether a and b are equal under ASCII case folding
// (header names are ASCII tokens; Unicode folding would match, say, the
// Kelvin sign with K).
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if ca == cb {
			continue
		}
		if 'A' <= ca && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if 'A' <= cb && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}

// nonEmpty reports whether any of values is a key: not empty once net/http
// has trimmed it for the wire.
func nonEmpty(values []string) bool {
	if len(values) > 0 && values[0] != "" && !isASCIISpace(values[0][0]) {
		return true // the common case, decided without a call
	}
	return firstNonEmpty(values) != ""
}

// isASCIISpace reports whether textproto.TrimString trims c.
func isASCIISpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// firstNonEmpty returns the first of values that is not empty once trimmed
// as net/http trims a field value it sends, trimmed; or "".
func firstNonEmpty(values []string) string {
	for _, v := range values {
		if v = textproto.TrimString(v); v != "" {
			return v
		}
	}
	return ""
}
