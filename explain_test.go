package retryhttp

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// explained returns the value and source Explain gives setting for req.
func explained(t *testing.T, tr *Transport, req *http.Request, setting string) (value, from string) {
	t.Helper()
	for _, line := range strings.Split(tr.Explain(req), "\n") {
		if rest, ok := strings.CutPrefix(line, setting+" "); ok {
			cols := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(rest), -1)
			require.Len(t, cols, 2, "%q", line)
			return cols[0], cols[1]
		}
	}
	t.Fatalf("no %s in %s", setting, tr.Explain(req))
	return "", ""
}

// Explain shows what the Transport applies: for each way of layering
// MaxAttempts and AttemptTimeout (the Transport's Policy, a host entry by
// host, by host:port and by suffix, WithPolicy, nested, MaxAttempts 1),
// its values are those of the policy the request is sent with, and its
// source is the innermost layer that sets them.
func TestExplainShowsThePolicyInForce(t *testing.T) {
	tr := &Transport{
		Policy: Policy{MaxAttempts: 5},
		Hosts: map[string]Policy{
			"a.example":      {AttemptTimeout: time.Second},
			"a.example:8443": {MaxAttempts: 2},
			"*.b.example":    {MaxAttempts: 7, AttemptTimeout: -1},
		},
	}
	bg := context.Background()
	nested := WithPolicy(WithPolicy(bg, Policy{MaxAttempts: 9}), Policy{AttemptTimeout: 3 * time.Second})
	cases := []struct {
		url             string
		ctx             context.Context
		attempts, fromN string
		timeout, fromT  string
	}{
		{"https://other.example/", bg, "5", "Transport.Policy", "off (the caller's deadline only)", "default"},
		{"https://a.example/", bg, "5", "Transport.Policy", "1s", `Hosts["a.example"]`},
		{"https://a.example:8443/", bg, "2", `Hosts["a.example:8443"]`, "off (the caller's deadline only)", "default"},
		{"https://x.b.example/", bg, "7", `Hosts["*.b.example"]`, "off (the caller's deadline only)", `Hosts["*.b.example"]`},
		{"https://a.example/", nested, "9", "WithPolicy", "3s", "WithPolicy (inner 1)"},
		{"https://a.example/", WithPolicy(bg, Policy{MaxAttempts: 1}), "1 (no retries)", "WithPolicy", "1s", `Hosts["a.example"]`},
	}
	for _, c := range cases {
		req, err := http.NewRequestWithContext(c.ctx, http.MethodGet, c.url, nil)
		require.NoError(t, err)
		v, from := explained(t, tr, req, "MaxAttempts")
		p := tr.policyFor(req)
		assert.Equal(t, c.attempts, v, c.url)
		assert.Equal(t, c.fromN, from, c.url)
		n, _, _ := strings.Cut(v, " ")
		assert.Equal(t, strconv.Itoa(p.maxAttempts), n, "%s: the attempts it is sent with", c.url)
		v, from = explained(t, tr, req, "AttemptTimeout")
		assert.Equal(t, c.timeout, v, c.url)
		assert.Equal(t, c.fromT, from, c.url)
		if p.attemptTimeout > 0 {
			assert.Equal(t, p.attemptTimeout.String(), v, c.url)
		}
	}
}

// A declaration of idempotence comes from the lowest layer that makes it
// (no layer above can undo it), or from the request itself.
func TestExplainShowsWhereIdempotenceIsDeclared(t *testing.T) {
	tr := &Transport{Hosts: map[string]Policy{"search.example": {Idempotent: true}}}
	req, err := http.NewRequestWithContext(WithPolicy(context.Background(), Policy{Idempotent: true}),
		http.MethodPost, "https://search.example/q", nil)
	require.NoError(t, err)
	v, from := explained(t, tr, req, "Idempotent")
	assert.Equal(t, "yes", v)
	assert.Equal(t, `Hosts["search.example"]`, from)

	req, err = http.NewRequest(http.MethodPost, "https://other.example/q", nil)
	require.NoError(t, err)
	req.Header["Idempotency-Key"] = nil
	v, from = explained(t, tr, req, "Idempotent")
	assert.Equal(t, "yes", v)
	assert.Equal(t, "the request (a key field with a nil value)", from)
}

// "Off" is shown as off, in each field's one spelling of it.
func TestExplainSpellsOff(t *testing.T) {
	tr := &Transport{Policy: Policy{
		Statuses:        []int{},
		AttemptTimeout:  -1,
		MaxBufferedBody: -1,
		BufferResponse:  -1,
		IdempotencyKeys: &IdempotencyKeys{Off: true},
		Throttle:        &Throttle{Off: true},
		Hedge:           &Hedge{Off: true},
	}, Budget: UnlimitedBudget()}
	req, err := http.NewRequest(http.MethodGet, "https://a.example/", nil)
	require.NoError(t, err)
	for _, s := range []string{"Statuses", "AttemptTimeout", "MaxBufferedBody", "BufferResponse",
		"IdempotencyKeys", "Throttle", "Hedge"} {
		v, from := explained(t, tr, req, s)
		assert.True(t, strings.HasPrefix(v, "off"), "%s: %q", s, v)
		assert.Equal(t, "Transport.Policy", from, s)
	}
	v, from := explained(t, tr, req, "Budget")
	assert.Equal(t, "none (every retry allowed)", v)
	assert.Equal(t, "Transport.Budget", from)
	p := tr.policyFor(req)
	assert.Nil(t, p.keys, "keys off")
	assert.Nil(t, p.hedge)
	assert.False(t, p.statuses.has(503))
}
