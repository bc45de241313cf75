package retryhttp

// The scaffolding of the package's tests that needs the package itself: a
// recorder of a Transport's hooks and the Transports the tests build over
// a base. The rest (the in-memory base and its answers, requests, bodies,
// loopback servers) is in internal/testutil, shared with the companion
// modules.

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// hookLog records the events of a Transport's OnRetry and OnGiveUp hooks.
type hookLog struct {
	mu      sync.Mutex
	retries []RetryEvent
	giveUps []GiveUpEvent
}

// watch makes h record tr's hooks, and returns h.
func (h *hookLog) watch(tr *Transport) *hookLog {
	tr.OnRetry = h.onRetry
	tr.OnGiveUp = h.onGiveUp
	return h
}

func (h *hookLog) onRetry(e *RetryEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.retries = append(h.retries, *e)
}

func (h *hookLog) onGiveUp(e *GiveUpEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.giveUps = append(h.giveUps, *e)
}

// reasons returns the reasons of the give-ups, in order.
func (h *hookLog) reasons() []Reason {
	h.mu.Lock()
	defer h.mu.Unlock()
	var rs []Reason
	for _, e := range h.giveUps {
		rs = append(rs, e.Reason)
	}
	return rs
}

// fakeTransport returns a Transport over base with policy p, the default
// budget, every random sample fixed at u, and its hooks recorded. (Its
// tests send requests alone, which the default budget gives exactly their
// policy, as UnlimitedBudget would: the caller's policy is the contract.)
func fakeTransport(base http.RoundTripper, p Policy, u float64) (*Transport, *hookLog) {
	tr := &Transport{Base: base, Policy: p, rand: func() float64 { return u }}
	return tr, new(hookLog).watch(tr)
}

// keysOn returns a Transport over base that retries at once, without a
// budget, with the given idempotency keys (nil: keys off).
func keysOn(base http.RoundTripper, keys *IdempotencyKeys) *Transport {
	return &Transport{
		Base:   base,
		Policy: Policy{Backoff: Constant(0), IdempotencyKeys: keys},
		Budget: UnlimitedBudget(),
	}
}

// newTestTransport returns a Transport over a fresh loopback base with policy
// p; a nil p.Backoff means no wait between attempts, and the budget is
// unlimited so that it never decides a test's outcome.
func newTestTransport(t *testing.T, p Policy) *Transport {
	t.Helper()
	if p.Backoff == nil {
		p.Backoff = Constant(0)
	}
	return &Transport{Base: testutil.LoopbackBase(t), Policy: p, Budget: UnlimitedBudget()}
}

// sendOK sends req through rt, requires that it succeed, and returns the
// response and its body, read and closed.
func sendOK(t *testing.T, rt http.RoundTripper, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	return resp, testutil.ReadBody(t, resp)
}

// getOK is sendOK of a GET (testutil.Get) under t's context.
func getOK(t *testing.T, rt http.RoundTripper) (*http.Response, string) {
	t.Helper()
	return sendOK(t, rt, testutil.Get(t, t.Context()))
}

// gaveUp asserts that err is the *Error of a request given up for reason
// after attempts attempts (0: any number), and returns it.
func gaveUp(t *testing.T, err error, reason Reason, attempts int) *Error {
	t.Helper()
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, reason, e.Reason)
	if attempts > 0 {
		assert.Equal(t, attempts, e.Attempts)
	}
	return e
}
