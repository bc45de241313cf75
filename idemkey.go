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

	"github.com/retryhttp/retryhttp/internal/header"
)

// defaultKeyHeader is the header that carries an idempotency key, as named by
// the IETF httpapi draft "The Idempotency-Key HTTP Header Field".
const defaultKeyHeader = header.DefaultKey

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
	// Off switches keys off, whatever the policy beneath says.
	Off bool

	// Header is the header field to set. Empty means Idempotency-Key.
	Header string

	// Methods lists the methods that get a key. Nil or empty means POST
	// and PATCH.
	Methods []string

	// Quoted sends the key as a Structured Field string
	// (Idempotency-Key: "8e03978e-..."), the syntax of the IETF draft.
	// By default the key is sent raw, as Stripe and most APIs expect.
	Quoted bool

	// Generate returns the key for req, the caller's request, which it
	// must not modify: derived from the request (an ID of its own, in a
	// header or its URL), a redelivery of the same event gets the same
	// key. Nil means a random (version 4) UUID. An error stops the
	// request before anything is sent.
	Generate func(req *http.Request) (string, error)
}

type keyPolicy struct {
	header   string // canonical form
	methods  []string
	quoted   bool
	generate func(*http.Request) (string, error)
}

func (k *IdempotencyKeys) compile() *keyPolicy {
	if k == nil || k.Off {
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
	if len(k.Methods) == 0 {
		c.methods = []string{http.MethodPost, http.MethodPatch}
	}
	if c.generate == nil {
		c.generate = newUUID
	}
	return c
}

func newUUID(*http.Request) (string, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// applies reports whether the policy adds a key to requests of this method
// (methods are case-sensitive, RFC 9110 section 9.1).
func (k *keyPolicy) applies(method string) bool {
	return slices.Contains(k.methods, method)
}

// newKey returns the header value of req's key.
func (k *keyPolicy) newKey(req *http.Request) (string, error) {
	key, err := k.generate(req)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrIdempotencyKey, err)
	}
	if textproto.TrimString(key) == "" {
		// A blank key goes out empty (net/http trims field values): a
		// server could not deduplicate by it, as header.HasKey says of a caller's.
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
