package retryhttp

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// attemptsFor sends a GET to url through tr, whose base always fails, and
// returns the attempts made: each policy below has its own MaxAttempts, so
// the count names the policy that applied.
func attemptsFor(t *testing.T, tr *Transport, ctx context.Context, url string) int {
	t.Helper()
	base := tr.Base.(*testutil.Base)
	before := base.Attempts()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, _ := sendOK(t, tr, req)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	return base.Attempts() - before
}

// hostPolicy is a policy recognizable by its number of attempts, with no
// wait between them.
func hostPolicy(attempts int) Policy {
	return Policy{MaxAttempts: attempts, Backoff: Constant(0)}
}

func newHostsTransport() *Transport {
	return &Transport{
		Base:   &testutil.Base{Answer: testutil.Statuses(503)},
		Budget: UnlimitedBudget(),
		Policy: hostPolicy(1),
		Hosts: map[string]Policy{
			"api.example.com":        hostPolicy(2),
			"api.example.com:8443":   hostPolicy(3),
			"*.example.com":          hostPolicy(4),
			"*.eu.example.com":       hostPolicy(5),
			"Mixed.Example.ORG.":     hostPolicy(6),
			"secure.example.net:443": hostPolicy(7),
			"plain.example.net:80":   hostPolicy(8),
			"*.Upper.Example.":       hostPolicy(9),
			"[::1]:8080":             hostPolicy(10),
			"::1":                    hostPolicy(11),
			"127.0.0.1":              hostPolicy(12),
			"[2001:DB8::1]":          hostPolicy(14),
		},
	}
}

func TestHostPolicies(t *testing.T) {
	tr := newHostsTransport()
	for _, tc := range []struct {
		name, url string
		policy    int
	}{
		{"exact host", "http://api.example.com/", 2},
		{"exact host, any port", "http://api.example.com:9000/", 2},
		{"host:port beats host", "http://api.example.com:8443/", 3},
		{"host:port, any case, trailing dot", "https://API.Example.COM.:8443/", 3},
		{"exact host beats a suffix", "https://api.example.com/", 2},
		{"suffix", "http://www.example.com/", 4},
		{"suffix, many labels deep", "http://a.b.c.example.com/", 4},
		{"deepest suffix wins", "http://a.b.eu.example.com/", 5},
		{"a suffix does not match itself", "http://eu.example.com/", 4},
		{"nor its bare domain", "http://example.com/", 1},
		{"only whole labels match", "http://notexample.com/", 1},
		{"key in mixed case with a trailing dot", "http://mixed.example.org/", 6},
		{"request in mixed case with a trailing dot", "http://MIXED.example.org./", 6},
		{"https default port", "https://secure.example.net/", 7},
		{"https explicit default port", "https://secure.example.net:443/", 7},
		{"http default port is not 443", "http://secure.example.net/", 1},
		{"http default port", "http://plain.example.net/", 8},
		{"https default port is not 80", "https://plain.example.net/", 1},
		{"suffix key in mixed case with a trailing dot", "http://x.upper.example/", 9},
		{"IPv6 host:port", "http://[::1]:8080/", 10},
		{"IPv6 host", "http://[::1]:9090/", 11},
		{"IPv4 host", "http://127.0.0.1:1234/", 12},
		{"IPv6 host key in brackets", "http://[2001:db8::1]/", 14},
		{"no match: the default policy", "http://other.test/", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.policy, attemptsFor(t, tr, context.Background(), tc.url), tc.url)
		})
	}
}

func TestNoHostsMeansTheDefaultPolicy(t *testing.T) {
	tr := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503)}, Budget: UnlimitedBudget(), Policy: hostPolicy(3)}
	assert.Equal(t, 3, attemptsFor(t, tr, context.Background(), "http://api.example.com/"))
}

func TestPerRequestOverride(t *testing.T) {
	tr := newHostsTransport()
	ctx := context.Background()
	t.Run("a policy beats the host's", func(t *testing.T) {
		assert.Equal(t, 13, attemptsFor(t, tr, WithPolicy(ctx, hostPolicy(13)), "http://a.eu.example.com/"))
	})
	t.Run("a policy beats the default", func(t *testing.T) {
		assert.Equal(t, 13, attemptsFor(t, tr, WithPolicy(ctx, hostPolicy(13)), "http://other.test/"))
	})
	t.Run("fields it leaves zero come from the host's policy", func(t *testing.T) {
		// api.example.com's entry says 2 attempts; this override sets none.
		assert.Equal(t, 2, attemptsFor(t, tr, WithPolicy(ctx, Policy{AttemptTimeout: time.Hour}), "http://api.example.com/"))
		noStatus := WithPolicy(ctx, Policy{MaxAttempts: 5, Statuses: []int{}})
		assert.Equal(t, 1, attemptsFor(t, tr, noStatus, "http://a.eu.example.com/"), "503 is not retried under this policy")
	})
	t.Run("without retries", func(t *testing.T) {
		assert.Equal(t, 1, attemptsFor(t, tr, WithPolicy(ctx, Policy{MaxAttempts: 1}), "http://a.eu.example.com/"))
		assert.Equal(t, 1, attemptsFor(t, tr, WithPolicy(ctx, Policy{MaxAttempts: 1}), "http://other.test/"))
	})
	t.Run("the innermost override wins", func(t *testing.T) {
		assert.Equal(t, 1, attemptsFor(t, tr, WithPolicy(WithPolicy(ctx, hostPolicy(13)), Policy{MaxAttempts: 1}), "http://api.example.com/"))
		assert.Equal(t, 13, attemptsFor(t, tr, WithPolicy(WithPolicy(ctx, Policy{MaxAttempts: 1}), hostPolicy(13)), "http://api.example.com/"))
	})
	t.Run("later requests are not affected", func(t *testing.T) {
		assert.Equal(t, 2, attemptsFor(t, tr, ctx, "http://api.example.com/"))
	})
}

// A host entry refines the Transport's policy: what it leaves zero comes from
// Transport.Policy, and an off value switches a setting off for that host.
func TestHostEntriesLayerOverThePolicy(t *testing.T) {
	keys := &IdempotencyKeys{Generate: func(*http.Request) (string, error) { return "k1", nil }}
	base := &testutil.Base{Answer: testutil.Statuses(503)}
	tr := &Transport{
		Base:   base,
		Budget: UnlimitedBudget(),
		Policy: Policy{
			MaxAttempts:     5,
			Backoff:         Constant(0),
			AttemptTimeout:  2 * time.Second,
			IdempotencyKeys: keys,
		},
		Hosts: map[string]Policy{
			"timeout.example": {AttemptTimeout: time.Second},
			"nokeys.example":  {IdempotencyKeys: &IdempotencyKeys{Off: true}},
			"plain.example":   {AttemptTimeout: -1, Statuses: []int{}},
			"once.example":    {MaxAttempts: 1},
		},
	}
	tr.init()
	policyOf := func(url string, ctx context.Context) *policy {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
		require.NoError(t, err)
		return tr.policyFor(req)
	}
	ctx := context.Background()

	p := policyOf("http://timeout.example/", ctx)
	assert.Equal(t, 5, p.maxAttempts, "MaxAttempts from Transport.Policy")
	assert.Equal(t, Constant(0), p.backoff, "Backoff from Transport.Policy")
	assert.Equal(t, time.Second, p.attemptTimeout, "the entry's own AttemptTimeout")
	assert.NotNil(t, p.keys, "IdempotencyKeys from Transport.Policy")

	p = policyOf("http://nokeys.example/", ctx)
	assert.False(t, p.keys != nil && p.keys.applies(http.MethodPost), "keys switched off for this host")
	assert.Equal(t, 2*time.Second, p.attemptTimeout)

	p = policyOf("http://plain.example/", ctx)
	assert.Zero(t, p.attemptTimeout, "a negative AttemptTimeout switches it off")
	assert.False(t, p.retryStatus(503, false), "an empty Statuses retries no status")
	assert.Equal(t, 5, p.maxAttempts)

	assert.Equal(t, 1, policyOf("http://once.example/", ctx).maxAttempts)
	assert.Equal(t, 5, policyOf("http://other.example/", ctx).maxAttempts)

	// A per-request policy lies over the host's entry, which lies over the
	// Transport's policy; nested overrides layer from the outermost in.
	p = policyOf("http://timeout.example/", WithPolicy(ctx, Policy{MaxAttempts: 3}))
	assert.Equal(t, 3, p.maxAttempts)
	assert.Equal(t, time.Second, p.attemptTimeout, "from the host's entry")
	assert.NotNil(t, p.keys, "from the Transport's policy")
	p = policyOf("http://timeout.example/", WithPolicy(WithPolicy(ctx, Policy{AttemptTimeout: time.Minute}), Policy{MaxAttempts: 3}))
	assert.Equal(t, 3, p.maxAttempts)
	assert.Equal(t, time.Minute, p.attemptTimeout, "from the outer override")
	p = policyOf("http://timeout.example/", WithPolicy(WithPolicy(ctx, Policy{AttemptTimeout: time.Minute}), Policy{MaxAttempts: 1}))
	assert.Equal(t, 1, p.maxAttempts)
	assert.Equal(t, time.Minute, p.attemptTimeout, "MaxAttempts 1 keeps the outer override")
	p = policyOf("http://timeout.example/", WithPolicy(ctx, Policy{MaxAttempts: 1}))
	assert.Equal(t, 1, p.maxAttempts)
	assert.Equal(t, time.Second, p.attemptTimeout, "MaxAttempts 1 keeps the host's entry")
}

// A host entry that sets only IdempotencyKeys keeps
// the Transport's 5 attempts and 2 s attempt timeout.
func TestHostEntryKeepsTransportPolicy(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(503)}
	tr := &Transport{
		Base:   base,
		Budget: UnlimitedBudget(),
		Policy: Policy{MaxAttempts: 5, Backoff: Constant(0), AttemptTimeout: 2 * time.Second},
		Hosts:  map[string]Policy{"payments.example.com": {IdempotencyKeys: &IdempotencyKeys{}}},
	}
	req := testutil.NewRequest(t, http.MethodPost, "http://payments.example.com/charge", nil)
	sendOK(t, tr, req)
	assert.Equal(t, 5, base.Attempts(), "a keyed POST retried up to the Transport's MaxAttempts")
	keys := base.Sent("Idempotency-Key")
	require.Len(t, keys, 5)
	for _, k := range keys {
		assert.Equal(t, keys[0], k, "one key on every attempt")
	}
}

// A policy whose mechanisms are off has no gate; each mechanism on adds
// its own.
func TestPoliciesHaveAGateForEachMechanismOn(t *testing.T) {
	for _, p := range []Policy{{}, {Throttle: &Throttle{Off: true}, Hedge: &Hedge{Off: true}}} {
		assert.Zero(t, p.compile().gates.Len(), "%+v", p)
	}
	assert.Equal(t, 1, (&Policy{Throttle: &Throttle{}}).compile().gates.Len())
	assert.Equal(t, 2, (&Policy{Throttle: &Throttle{}, Hedge: &Hedge{}}).compile().gates.Len())
}

// WithPolicy(ctx, Policy{MaxAttempts: 1}), retries off, costs a request no
// allocation: it takes the policy's precompiled variant of one attempt. A
// policy that sets anything else besides is layered as any other.
func TestRetriesOffPerRequestIsPrecompiled(t *testing.T) {
	tr := &Transport{Base: &testutil.Base{Answer: testutil.Statuses(503)}}
	off := WithPolicy(t.Context(), Policy{MaxAttempts: 1})
	req := testutil.Get(t, off)
	tr.init()
	p := tr.policyFor(req)
	assert.Same(t, tr.policy.oneAttempt, p, "the precompiled variant")
	assert.Zero(t, testing.AllocsPerRun(100, func() { tr.policyFor(req) }))

	more := WithPolicy(t.Context(), Policy{MaxAttempts: 1, AttemptTimeout: time.Second})
	p = tr.policyFor(testutil.Get(t, more))
	assert.NotSame(t, tr.policy.oneAttempt, p)
	assert.Equal(t, 1, p.maxAttempts)
	assert.Equal(t, time.Second, p.attemptTimeout, "the field set besides MaxAttempts")
}
