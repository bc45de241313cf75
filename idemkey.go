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

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/header"
	"github.com/retryhttp/retryhttp/internal/recent"
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
// is a non-empty value in Header, Idempotency-Key or X-Idempotency-Key,
// with the name in any letter case (net/http sends a name set directly in
// the header map, such as req.Header["idempotency-key"], as written). It is
// never replaced and nothing is added to it, and the caller's request is
// never modified (a new key goes on a copy). Keys are useful only with a
// server that stores the outcome of each key and returns it for a repeat;
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

// keying is what a request's idempotency key tells: the key it carries,
// and the attempts a layer above made before it.
type keying struct {
	header  http.Header // the request's header with the key the Transport added, or nil
	keyed   bool        // the request carries a key
	callers string      // the caller's key, if any was looked for
	added   string      // the key the Transport added, as sent; "" if none
	prior   int         // attempts the caller's key had before this request (a retry from above)
	above   int         // attempts a layer above made at the request: prior, or its SDK's count
}

// admit finds the idempotency key of req by policy p, or adds one where p's
// IdempotencyKeys apply: not to a request declared idempotent, nor where
// no retry can follow (MaxAttempts 1, or an SDK's retry, which the SDK
// retries), since net/http would resend a keyed request by itself on a
// closed connection. The key is looked for whatever the method: it tells a
// retry from a layer above (see fromAbove), and lets a 409 be retried. It
// returns the attempts the request may make; an error is the key
// generator's.
func (k *keying) admit(req *http.Request, p *policy, declared bool, recent *recent.Keys, clk clock.Clock) (int, error) {
	sdkAttempt := header.SDKAttempt(req.Header)
	k.keyed = header.HasKey(req.Header, p.keyHeader)
	switch {
	case k.keyed:
		k.callers = header.CallerKey(req.Header, p.keyHeader)
	case !declared && p.keys != nil && p.maxAttempts > 1 && sdkAttempt <= 1 && p.keys.applies(req.Method):
		key, err := p.keys.newKey(req)
		if err != nil {
			return 0, err
		}
		k.header = req.Header.Clone()
		if k.header == nil {
			k.header = make(http.Header, 1)
		}
		header.SetKey(k.header, p.keyHeader, key)
		k.keyed, k.added = true, key
	}
	return k.fromAbove(recent, clk, p.maxAttempts, sdkAttempt), nil
}

// fromAbove finds whether the request is a retry made by a layer above,
// and returns the attempts it may make: maxAttempts, or what a layer
// above left it. sdkAttempt is the attempt its SDK attempt header names
// (0: none); recent holds the keys sent lately, as clk reads it.
//
// A layer above a Transport may retry too: an SDK that sends a request
// again when the Transport's attempts failed. Its retries and the
// Transport's would multiply (an SDK's 3 tries of 4 attempts each: 12). A
// Transport recognises such a retry and stands down, so the attempts add:
//
//   - by the attempt headers SDKs send: the AWS SDKs' amz-sdk-request
//     ("attempt=2; max=3") and the x-stainless-retry-count of the SDKs
//     generated by Stainless (OpenAI, Anthropic and others). A request whose
//     header says it is a retry is sent once: the SDK does the retrying.
//   - by the idempotency key: a request carrying a key that this Transport
//     sent recently is that key's retry. It gets only the attempts left of
//     MaxAttempts after those the key already had, and at least one.
//
// Both count in Stats.RetriesFromAbove.
func (k *keying) fromAbove(recent *recent.Keys, clk clock.Clock, maxAttempts, sdkAttempt int) int {
	if k.callers != "" {
		// Also for an SDK's retry (see the switch): the key's attempts add up.
		k.prior = recent.Prior(k.callers, clk.Now())
	}
	k.above = max(k.prior, sdkAttempt-1)
	switch {
	case sdkAttempt > 1:
		return 1 // the SDK above does the retrying
	case k.prior > 0:
		return max(maxAttempts-k.prior, 1)
	}
	return maxAttempts
}

// sent returns the idempotency key the request's attempts carry: the
// caller's, or the one the Transport added; "" if none.
func (k *keying) sent() string {
	if k.added != "" {
		return k.added
	}
	return k.callers
}
