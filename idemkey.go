package retryhttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	"github.com/dunglas/httpsfv"
	"github.com/google/uuid"
)

// defaultKeyHeader is the header that carries an idempotency key, as named by
// the IETF httpapi draft "The Idempotency-Key HTTP Header Field".
const defaultKeyHeader = "Idempotency-Key"

// ErrIdempotencyKey is wrapped by the error of a request that was not sent
// because its idempotency key could not be generated.
var ErrIdempotencyKey = errors.New("retryhttp: cannot generate idempotency key")

// IdempotencyKeys configures the idempotency keys a Transport adds so that
// non-idempotent requests can be retried without applying them twice.
//
// A request of one of Methods that carries no key gets a new key, once per
// logical request: every attempt carries the same value. A caller's own key
// is a non-empty value under Header, Idempotency-Key or X-Idempotency-Key,
// with the name in any letter case (net/http sends a name set directly in
// the header map, such as req.Header["idempotency-key"], as written). It is
// never replaced and nothing is added to it, and the caller's request is
// never modified (a new key goes on a copy). Keys are useful only with a
// server that stores the outcome of each key and answers a repeat with it;
// enable them per host for such servers.
type IdempotencyKeys struct {
	// Header is the header field to set. Empty means Idempotency-Key.
	Header string

	// Methods lists the methods that get a key. Nil means POST and PATCH.
	Methods []string

	// Quoted sends the key as a Structured Field string
	// (Idempotency-Key: "8e03978e-..."), the syntax of the IETF draft.
	// By default the key is sent raw, as Stripe and most APIs expect.
	Quoted bool

	// Generate returns a new key. Nil means a random (version 4) UUID.
	// An error stops the request before anything is sent.
	Generate func() (string, error)
}

type keyPolicy struct {
	header   string // canonical form
	methods  []string
	quoted   bool
	generate func() (string, error)
}

func (k *IdempotencyKeys) compile() *keyPolicy {
	if k == nil {
		return nil
	}
	c := &keyPolicy{
		header:   textproto.CanonicalMIMEHeaderKey(k.Header),
		methods:  append([]string(nil), k.Methods...),
		quoted:   k.Quoted,
		generate: k.Generate,
	}
	if c.header == "" {
		c.header = defaultKeyHeader
	}
	if k.Methods == nil {
		c.methods = []string{http.MethodPost, http.MethodPatch}
	}
	if c.generate == nil {
		c.generate = newUUID
	}
	return c
}

func newUUID() (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// hasKey reports whether h carries a caller's idempotency key: a non-empty
// value under Idempotency-Key, X-Idempotency-Key or the configured header
// (k may be nil), in any letter case. net/http sends a name set by direct
// assignment to the map (h["idempotency-key"]) as written, and a server
// matches names case-insensitively, so every spelling is the key. A value
// empty or blank is no key: a server would not deduplicate by it.
//
// The canonical names are looked up first; the map's keys are scanned only
// when they miss (a header has few entries, and most have another length).
// hasKey(h, k) == (callerKey(h, k) != "").
func hasKey(h http.Header, k *keyPolicy) bool {
	if len(h) == 0 {
		return false
	}
	if nonEmpty(h[defaultKeyHeader]) || nonEmpty(h[xKeyHeader]) || (k != nil && nonEmpty(h[k.header])) {
		return true
	}
	names, n := keyNames(k)
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

// callerKey returns the caller's idempotency key in h, as a server receives
// it (without surrounding blanks), or "" if there is none. Of several, it is
// the first non-empty value under the configured header (k may be nil), then
// Idempotency-Key, then X-Idempotency-Key; under each name the canonical
// spelling comes first, then the others in byte order.
func callerKey(h http.Header, k *keyPolicy) string {
	if len(h) == 0 {
		return ""
	}
	names, n := keyNames(k)
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

// setKey makes key the one key of h, a copy of the header of a request
// that carries no key (hasKey(h, k) is false): every field under a key name
// in any letter case, whose values are all blank since h has no key, is
// removed, and the configured header gets key. The server then receives one
// key line, not the key beside the caller's empty lines.
func (k *keyPolicy) setKey(h http.Header, key string) {
	names, n := keyNames(k)
	for spelling := range h {
		if keyName(spelling, &names, n) >= 0 {
			delete(h, spelling)
		}
	}
	h[k.header] = []string{key}
}

// xKeyHeader is the older name of the key header, still used by some APIs.
const xKeyHeader = "X-Idempotency-Key"

// keyNames returns the canonical names a caller's key may have, in the
// order callerKey reads them, and how many there are: the configured header
// (k non-nil), then defaultKeyHeader and xKeyHeader, each name once.
func keyNames(k *keyPolicy) (names [3]string, n int) {
	names, n = [3]string{defaultKeyHeader, xKeyHeader}, 2
	if k != nil {
		switch k.header {
		case defaultKeyHeader:
		case xKeyHeader:
			names[0], names[1] = xKeyHeader, defaultKeyHeader
		default:
			names, n = [3]string{k.header, defaultKeyHeader, xKeyHeader}, 3
		}
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

// applies reports whether the policy adds a key to requests of this method
// (methods are case-sensitive, RFC 9110 section 9.1).
func (k *keyPolicy) applies(method string) bool {
	return slices.Contains(k.methods, method)
}

// newKey returns the header value of a fresh key.
func (k *keyPolicy) newKey() (string, error) {
	key, err := k.generate()
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrIdempotencyKey, err)
	}
	if textproto.TrimString(key) == "" {
		// A blank key goes out empty (net/http trims field values): a
		// server could not deduplicate by it, as hasKey says of a caller's.
		return "", fmt.Errorf("%w: generator returned an empty or blank key", ErrIdempotencyKey)
	}
	if k.quoted {
		return quoteSFString(key)
	}
	// RFC 9110 section 5.5: no control character but HTAB in a field value.
	if strings.ContainsFunc(key, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }) {
		return "", fmt.Errorf("%w: key %q is not a valid header value", ErrIdempotencyKey, key)
	}
	return key, nil
}

// quoteSFString serializes s as a Structured Field String (RFC 9651
// section 4.1.6): printable ASCII only, with '"' and '\' escaped.
func quoteSFString(s string) (string, error) {
	quoted, err := httpsfv.Marshal(httpsfv.NewItem(s))
	if err != nil {
		return "", fmt.Errorf("%w: key %q is not printable ASCII", ErrIdempotencyKey, s)
	}
	return quoted, nil
}
