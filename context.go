package retryhttp

import (
	"context"
	"net/http"
	"reflect"

	"github.com/retryhttp/retryhttp/internal/mark"
)

// overrideKey is the context key of the *override a request follows.
type overrideKey struct{}

// WithPolicy returns a copy of ctx under which requests follow p layered
// over the policy that would apply without it (the host's entry in
// Transport.Hosts, else Transport.Policy, else a WithPolicy set earlier on ctx): the
// fields p leaves zero keep that policy's values. Policy{MaxAttempts: 1}
// turns retries off, and costs a request no allocation.
func WithPolicy(ctx context.Context, p Policy) context.Context {
	under, _ := ctx.Value(overrideKey{}).(*override)
	return context.WithValue(ctx, overrideKey{}, &override{p: p, under: under, noRetries: noRetries(p)})
}

// noRetries reports whether p is Policy{MaxAttempts: 1}: retries off, and
// nothing else set.
func noRetries(p Policy) bool {
	if p.MaxAttempts != 1 {
		return false
	}
	p.MaxAttempts = 0
	return reflect.ValueOf(p).IsZero()
}

// override is a policy set for requests by WithPolicy, over the override
// under it (set by an earlier WithPolicy on the context), if any.
type override struct {
	p         Policy
	under     *override
	noRetries bool // p is Policy{MaxAttempts: 1}
}

// apply returns the policy of a request whose Transport (or host entry)
// policy is under. Policy{MaxAttempts: 1} alone costs no allocation.
func (o *override) apply(under *policy) *policy {
	if o.noRetries && o.under == nil && under.oneAttempt != nil {
		return under.oneAttempt
	}
	src := o.layer(under.src)
	return src.compile()
}

// layer returns the overrides from the first set on the context to o,
// layered over under.
func (o *override) layer(under Policy) Policy {
	if o.under != nil {
		under = o.under.layer(under)
	}
	return o.p.over(under)
}

// Attempts returns the number of attempts it took to get resp: 1 when the
// first attempt's response was returned. It returns 0 for a nil response.
// It counts the attempts of the retrying Transport, whether or not the base
// transport sets resp.Request. A resend that the base transport makes by
// itself within one attempt (net/http sends a replayable request again when
// a reused connection fails before any byte of the response) is not an
// attempt: Stats says which of those Stats.NetHTTPResends counts.
func Attempts(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	if m := mark.OfRequest(resp.Request); m != nil {
		return m.N
	}
	return 1
}

// StopReason returns why the Transport stopped retrying the request that
// resp answers, when resp is a failure it gave up on: a status it retries
// (a 503 after the last attempt, or whose Retry-After was too long). It
// returns 0, whose String is "none", for any other response: a success, or
// a status the policy does not retry (a 400, a 404), which is the caller's
// to judge; and for a nil resp. An error says it as Error.Reason.
func StopReason(resp *http.Response) Reason {
	if resp == nil {
		return 0
	}
	if m := mark.OfRequest(resp.Request); m != nil {
		return Reason(m.Stop)
	}
	return 0
}

// AttemptNumber returns the number of the attempt whose request carries
// ctx, for a base transport (or anything beneath a Transport) that labels
// what it sends: 2 for the first retry, 3 for the second, and so on. A
// Transport sends a first attempt as the caller's own request when nothing
// needs changing, so a context without a mark of retryhttp's, that of a
// first attempt or of a request no Transport sent, gives 1. The OpenTelemetry
// attribute http.request.resend_count is AttemptNumber(ctx) - 1.
func AttemptNumber(ctx context.Context) int {
	if m := mark.Of(ctx); m != nil {
		return m.N
	}
	return 1
}
