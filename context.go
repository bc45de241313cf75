package retryhttp

import (
	"context"
	"net/http"
)

type (
	overrideKey struct{} // *policy chosen for one request
	attemptKey  struct{} // *attemptMark of the attempt a request belongs to
)

// attemptMark is put in the context of an attempt's request. A Transport
// that finds one in its request's context is inside another Transport's
// attempt and makes a single attempt, so retries never multiply across
// layers; Attempts reads it from a response.
type attemptMark struct{ n int }

// WithPolicy returns a copy of ctx under which requests follow p instead of
// the Transport's default or per-host policy.
func WithPolicy(ctx context.Context, p Policy) context.Context {
	return context.WithValue(ctx, overrideKey{}, p.compile())
}

// WithoutRetries returns a copy of ctx under which requests are sent once.
func WithoutRetries(ctx context.Context) context.Context {
	return WithPolicy(ctx, Policy{MaxAttempts: 1})
}

// Attempts returns the number of attempts it took to get resp: 1 when the
// first attempt's response was returned. It returns 0 for a nil response.
// It counts the attempts of the retrying Transport; a resend that the base
// transport makes by itself (net/http sends a replayable request again when
// a reused connection fails before any byte of the response) is not seen.
func Attempts(resp *http.Response) int {
	if resp == nil {
		return 0
	}
	if m := markOf(resp.Request); m != nil {
		return m.n
	}
	return 1
}

func markOf(req *http.Request) *attemptMark {
	if req == nil {
		return nil
	}
	m, _ := req.Context().Value(attemptKey{}).(*attemptMark)
	return m
}

func inAttempt(ctx context.Context) bool {
	return ctx.Value(attemptKey{}) != nil
}
