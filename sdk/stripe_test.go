package sdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82"

	"github.com/retryhttp/retryhttp"
)

// stripe-go v82 retries a call up to MaxNetworkRetries (2) more times on a
// connection error, a 409, a 429 whose code is lock_timeout, and an answer
// that is not Stripe's JSON error format with a 5xx status or
// Stripe-Should-Retry: true. An answer in Stripe's error format is not
// retried but for the lock_timeout: not a JSON 500 api_error, whatever
// Stripe-Should-Retry says. It sets one Idempotency-Key on every POST and
// sends the same *http.Request on each try, its body reset; it sends no
// header that tells a retry from a first try.

// apiStripeError writes an error in Stripe's JSON format.
func apiStripeError(status int, typ, code string, shouldRetry string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_fault")
		if shouldRetry != "" {
			w.Header().Set("Stripe-Should-Retry", shouldRetry)
		}
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"type":%q,"code":%q,"message":"fault"}}`, typ, code)
	}
}

// apiProxy503 writes a 503 as a proxy in front of the service would: not
// in the service's error format.
func apiProxy503(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, "<html><body>503 Service Unavailable</body></html>")
}

func apiStripeIntent(w http.ResponseWriter, r *http.Request, call string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_"+call)
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		w.Header().Set("Idempotency-Key", k)
	}
	fmt.Fprintf(w, `{"id":"pi_%s","object":"payment_intent","amount":1000,"currency":"usd","status":"requires_payment_method"}`, call)
}

// apiStripeClient returns a stripe-go client whose API backend sends
// through hc to baseURL, with stripe-go's retries on (its default count)
// or off, and no sleep between its retries.
func apiStripeClient(hc *http.Client, baseURL string, retries bool) *stripe.Client {
	n := stripe.DefaultMaxNetworkRetries
	if !retries {
		n = 0
	}
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		HTTPClient:        hc,
		URL:               stripe.String(baseURL),
		MaxNetworkRetries: stripe.Int64(n),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	b.(*stripe.BackendImplementation).SetNetworkRetriesSleep(false) // its 0.5 s to 5 s waits would make the runs slow
	return stripe.NewClient("sk_test_sdk", stripe.WithBackends(&stripe.Backends{API: b}))
}

// apiStripeStatus returns the HTTP status of the service's answer that a
// stripe-go error reports: a *stripe.Error's, or the one in the message of
// an answer that is not Stripe's JSON ("response status: 503").
func apiStripeStatus(err error) int {
	var se *stripe.Error
	if errors.As(err, &se) {
		return se.HTTPStatusCode
	}
	if m := apiStripeStatusRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

var apiStripeStatusRE = regexp.MustCompile(`\(response status: (\d+),`)

var apiStripeCreate = apiSDK{
	SDK: "stripe-go v82.5.1", Call: "PaymentIntents.Create (POST)", Keyed: true, Post: true,
	OK: apiStripeIntent, Status: apiStripeStatus,
	Do: func(ctx context.Context, hc *http.Client, baseURL string, retries bool, call string) error {
		sc := apiStripeClient(hc, baseURL, retries)
		p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd")}
		p.AddMetadata("call", call)
		p.Headers = http.Header{apiCallHeader: {call}}
		pi, err := sc.V1PaymentIntents.Create(ctx, p)
		if err == nil && pi.ID != "pi_"+call {
			err = fmt.Errorf("got PaymentIntent %q", pi.ID)
		}
		return err
	},
}

var apiStripeRetrieve = apiSDK{
	SDK: "stripe-go v82.5.1", Call: "PaymentIntents.Retrieve (GET)",
	OK: apiStripeIntent, Status: apiStripeStatus,
	Do: func(ctx context.Context, hc *http.Client, baseURL string, retries bool, call string) error {
		sc := apiStripeClient(hc, baseURL, retries)
		p := &stripe.PaymentIntentRetrieveParams{}
		p.Headers = http.Header{apiCallHeader: {call}}
		pi, err := sc.V1PaymentIntents.Retrieve(ctx, "pi_"+call, p)
		if err == nil && pi.ID != "pi_"+call {
			err = fmt.Errorf("got PaymentIntent %q", pi.ID)
		}
		return err
	},
}

const apiStripeGetGap = "stripe-go sends a GET's retries with nothing that marks them " +
	"(no key, no attempt header), so retryhttp retries each of its tries in full: 3 x 4 attempts"

func apiStripeFaults(get bool) []apiFault {
	gap := ""
	if get {
		gap = apiStripeGetGap
	}
	return []apiFault{
		{Name: "429 lock_timeout x2", Fails: 2, Status: 429, Answer: apiStripeError(429, "invalid_request_error", "lock_timeout", "true")},
		{Name: "429 rate_limit x1", Fails: 1, Status: 429, Answer: apiStripeError(429, "invalid_request_error", "rate_limit", "")},
		{Name: "500 api_error x1", Fails: 1, Status: 500, Answer: apiStripeError(500, "api_error", "", "")},
		{Name: "503 from a proxy x2", Fails: 2, Status: 503, Answer: apiProxy503},
		{Name: "reset after the request x1", Fails: 1, Reset: true},
		{Name: "429 lock_timeout always", Fails: apiAlways, Status: 429, Answer: apiStripeError(429, "invalid_request_error", "lock_timeout", "true"), Gap: gap},
		{Name: "503 from a proxy always", Fails: apiAlways, Status: 503, Answer: apiProxy503, Gap: gap},
	}
}

// TestAPIStripe measures stripe-go's PaymentIntent create and retrieve,
// bare and over retryhttp, under each fault, and checks retryhttp's
// targets (see apiCheck).
func TestAPIStripe(t *testing.T) {
	t.Parallel()
	table := apiMeasure(t, []apiSDKFaults{
		{apiStripeCreate, apiStripeFaults(false)},
		{apiStripeRetrieve, apiStripeFaults(true)},
	})
	t.Log("\n" + apiTableHeader + table)
}

// TestAPIStripeWire checks what stripe-go sends on its tries and what
// retryhttp makes of them: one key on all of them, and the SDK's second
// and third tries of a POST recognised as its retries (Stats.RetriesFromAbove)
// so that they get only the attempts left of the first's four.
func TestAPIStripeWire(t *testing.T) {
	srv, tr := apiStripeCreateFailing(t, apiStripeError(429, "invalid_request_error", "lock_timeout", "true"))
	c := srv.calls["wire"]
	require.NotNil(t, c)
	assert.Equal(t, apiMaxAttempts+apiSDKTries-1, c.attempts, "the first try's 4 attempts, then one for each of the SDK's 2 retries")
	assert.NotEmpty(t, c.keys[0])
	for _, k := range c.keys {
		assert.Equal(t, c.keys[0], k, "every attempt carries the SDK's key")
	}
	assert.Equal(t, uint64(apiSDKTries-1), tr.Stats().RetriesFromAbove)
}

// TestAPIStripeShouldRetryFalse: Stripe answers some errors with
// Stripe-Should-Retry: false (a 500 whose request its idempotency layer
// would only replay). stripe-go does not retry them, and retryhttp, which
// reads Stripe-Should-Retry as X-Should-Retry, does not either.
func TestAPIStripeShouldRetryFalse(t *testing.T) {
	srv, _ := apiStripeCreateFailing(t, apiStripeError(500, "api_error", "", "false"))
	assert.Equal(t, 1, srv.calls["wire"].attempts, "Stripe-Should-Retry: false is the server's word not to retry")
}

// apiStripeCreateFailing creates one PaymentIntent (call "wire") with
// stripe-go over a retryhttp Transport that retries at once, against a
// server that answers every attempt with answer, and returns both once the
// call has failed. The budget is unlimited: what the budget's line holds
// back against a failing server is TestAPIStripe's to measure; these tests
// pin what goes on the wire.
func apiStripeCreateFailing(t *testing.T, answer func(http.ResponseWriter)) (*apiServer, *retryhttp.Transport) {
	t.Helper()
	srv := apiNewServer(apiFault{Fails: apiAlways, Answer: answer}, apiStripeIntent)
	t.Cleanup(srv.Close)
	base := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	tr := &retryhttp.Transport{Base: base, Budget: retryhttp.UnlimitedBudget(), Policy: retryhttp.Policy{Backoff: retryhttp.Constant(0)}}
	sc := apiStripeClient(&http.Client{Transport: tr}, srv.URL, true)
	p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd")}
	p.Headers = http.Header{apiCallHeader: {"wire"}}
	_, err := sc.V1PaymentIntents.Create(context.Background(), p)
	require.Error(t, err)
	return srv, tr
}
