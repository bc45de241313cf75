package retryhttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// ---- RoundTripper contract ----

// TestCallerRequestUntouched sends requests down every path a call can take
// and checks afterwards that the caller's request is as it was (header map,
// URL, method, length, body field), that its body was closed, and that a
// response never comes with an error.
func TestCallerRequestUntouched(t *testing.T) {
	payload := bytes.Repeat([]byte("p"), 1000)
	big := bytes.Repeat([]byte("b"), defaultMaxBufferedBody+1)

	type reqBody int
	const (
		noBody      reqBody = iota
		withGetBody         // http.NewRequest over a bytes.Reader
		buffered            // known length, no GetBody
		tooBig              // known length over the buffering bound
		unknownLen          // a stream of unknown length
		short               // ContentLength promises more than the body holds
	)

	cases := []struct {
		name     string
		method   string
		body     reqBody
		statuses []int  // of a script server; nil: see target
		target   string // "refused", "tls", "reset"; "" for the script server
		policy   Policy
		ctx      func() context.Context
		wantResp bool
	}{
		{name: "GET 200 first try", method: "GET", statuses: []int{200}, wantResp: true},
		{name: "PUT GetBody 503 then 200", method: "PUT", body: withGetBody, statuses: []int{503, 200}, wantResp: true},
		{name: "PUT buffered 503 exhausted", method: "PUT", body: buffered, statuses: []int{503}, wantResp: true},
		{name: "PUT buffered 400 not retried", method: "PUT", body: buffered, statuses: []int{400}, wantResp: true},
		{name: "PUT too big 503 not retried", method: "PUT", body: tooBig, statuses: []int{503}, wantResp: true},
		{name: "POST stream 503 not retried", method: "POST", body: unknownLen, statuses: []int{503}, wantResp: true},
		{name: "POST keys added 503 then 200", method: "POST", body: withGetBody, statuses: []int{503, 200},
			policy: Policy{IdempotencyKeys: &IdempotencyKeys{}}, wantResp: true},
		{name: "PUT single attempt policy", method: "PUT", body: buffered, statuses: []int{503},
			policy: Policy{MaxAttempts: 1}, wantResp: true},
		{name: "PUT GetBody refused", method: "PUT", body: withGetBody, target: "refused"},
		{name: "PUT buffered refused", method: "PUT", body: buffered, target: "refused"},
		{name: "POST stream refused", method: "POST", body: unknownLen, target: "refused"},
		{name: "PUT GetBody reset", method: "PUT", body: withGetBody, target: "reset"},
		{name: "PUT stream reset", method: "PUT", body: unknownLen, target: "reset"},
		{name: "PUT buffered bad certificate", method: "PUT", body: buffered, target: "tls"},
		{name: "PUT short body", method: "PUT", body: short, statuses: []int{200}},
		{name: "PUT GetBody caller canceled", method: "PUT", body: withGetBody, statuses: []int{200},
			ctx: func() context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var target string
			switch tc.target {
			case "":
				target = testutil.NewServer(t, testutil.Answers(tc.statuses...)...).URL + "/path?q=1"
			case "refused":
				target = "http://" + testutil.ClosedAddr(t) + "/path?q=1"
			case "reset":
				target = testutil.NewServer(t, retryhttptest.Reset()).URL + "/path?q=1"
			case "tls":
				target = testutil.NewTLSServer(t).URL + "/path?q=1"
			}
			tr := newTestTransport(t, tc.policy)

			req := testutil.NewRequest(t, tc.method, target, nil)
			rec := testutil.NewCloseRecorder(nil)
			switch tc.body {
			case withGetBody:
				req = testutil.NewRequest(t, tc.method, target, bytes.NewReader(payload))
				rec.Reader = req.Body
				req.Body = rec
			case buffered:
				rec.Reader = bytes.NewReader(payload)
				req.Body, req.ContentLength = rec, int64(len(payload))
			case tooBig:
				rec.Reader = bytes.NewReader(big)
				req.Body, req.ContentLength = rec, int64(len(big))
			case unknownLen:
				rec.Reader = io.MultiReader(bytes.NewReader(payload))
				req.Body, req.ContentLength = rec, -1
			case short:
				rec.Reader = bytes.NewReader(payload[:10])
				req.Body, req.ContentLength = rec, int64(len(payload))
			}
			if tc.ctx != nil {
				req = req.WithContext(tc.ctx())
			}
			req.Header.Set("X-Caller", "mine")
			wantHeader := req.Header.Clone()
			wantURL := *req.URL
			wantBody := req.Body
			wantLen := req.ContentLength

			resp, err := testutil.RoundTrip(t, tr, req)

			if tc.wantResp {
				require.NoError(t, err)
				require.NotNil(t, resp)
			} else {
				require.Error(t, err)
			}
			assert.Equal(t, wantHeader, req.Header, "caller's header map")
			assert.Equal(t, wantURL, *req.URL, "caller's URL")
			assert.Equal(t, tc.method, req.Method)
			assert.Equal(t, wantLen, req.ContentLength)
			assert.True(t, wantBody == req.Body, "caller's Body field replaced")
			if tc.body != noBody {
				assert.True(t, rec.WaitClosed(), "caller's body closed")
			}
		})
	}
}

// ---- exhaustion ----

func TestExhaustedStatusReturnsLastResponse(t *testing.T) {
	s := testutil.NewServer(t, testutil.Answers(503, 503, 503)...)
	tr := newTestTransport(t, Policy{MaxAttempts: 3})

	resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", s.URL, nil))

	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "status 503 on attempt 3", testutil.ReadBody(t, resp), "the last attempt's body, intact")
	assert.Equal(t, 3, Attempts(resp))
	assert.Len(t, s.Requests(), 3)
}

func TestExhaustedTransportErrorThroughClient(t *testing.T) {
	tr := newTestTransport(t, Policy{MaxAttempts: 3})
	g := new(hookLog).watch(tr)
	client := &http.Client{Transport: tr}

	resp, err := client.Get("http://" + testutil.ClosedAddr(t) + "/")

	require.Nil(t, resp)
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the last attempt's error shows through http.Client")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 3, e.Attempts)
	assert.Equal(t, ReasonExhausted, e.Reason)
	assert.Contains(t, err.Error(), "gave up after 3 attempts (attempts exhausted)")
	assert.Contains(t, err.Error(), "connection refused")
	assert.Equal(t, []Reason{ReasonExhausted}, g.reasons())
}

// ---- connections ----

// TestFailedAttemptsReuseTheConnection proves that a failed attempt's body is
// drained and closed before the next attempt: 3 attempts, 1 connection.
// net/http drops the connection of a response body closed before its end, so
// without the drain each retry would dial anew.
func TestFailedAttemptsReuseTheConnection(t *testing.T) {
	big := strings.Repeat("x", 16<<10) // more than net/http drains on its own
	s := testutil.NewServer(t,
		retryhttptest.Status(503).WithBody(big),
		retryhttptest.Status(503).WithBody(big),
		retryhttptest.Status(200).WithBody("ok"))
	tr := newTestTransport(t, Policy{MaxAttempts: 3})

	resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", s.URL, nil))

	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ok", testutil.ReadBody(t, resp))
	assert.Len(t, s.Requests(), 3)
	assert.Equal(t, 1, s.Conns(), "new connections across 3 attempts")
}

// ---- attempts, hooks and logs ----

func TestAttemptsReadableFromResponse(t *testing.T) {
	s := testutil.NewServer(t, testutil.Answers(503, 500, 200)...)
	tr := newTestTransport(t, Policy{})

	resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", s.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 3, Attempts(resp))

	resp, err = testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", s.URL, nil))
	require.NoError(t, err)
	assert.Equal(t, 1, Attempts(resp), "a first-try success")

	assert.Equal(t, 0, Attempts(nil))
}

func TestOnRetryReportsStatusAndDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503, 429, 200)}
		var events []RetryEvent
		tr := &Transport{Base: base, Budget: UnlimitedBudget(), // the retries' waits, not the budget's line
			Policy: Policy{Backoff: Exponential{Base: time.Second, Cap: time.Minute}}}
		tr.OnRetry = func(e *RetryEvent) { events = append(events, *e) }
		req := testutil.NewRequest(t, "GET", "http://example.test/", nil)

		resp, err := testutil.RoundTrip(t, tr, req)

		require.NoError(t, err)
		assert.Equal(t, 200, resp.StatusCode)
		require.Len(t, events, 2)
		for i, want := range []struct {
			status int
			delay  time.Duration
		}{{503, time.Second}, {429, 2 * time.Second}} {
			e := events[i]
			assert.Same(t, req, e.Request)
			assert.Equal(t, i+1, e.Attempt)
			require.NotNil(t, e.Response)
			assert.Equal(t, want.status, e.Response.StatusCode)
			assert.NoError(t, e.Err)
			assert.Equal(t, want.delay, e.Delay)
			assert.Equal(t, DelayBackoff, e.Source)
		}
	})
}

func TestOnRetryReportsError(t *testing.T) {
	var events []RetryEvent
	tr := newTestTransport(t, Policy{MaxAttempts: 3, Backoff: Constant(time.Millisecond)})
	tr.OnRetry = func(e *RetryEvent) { events = append(events, *e) }

	_, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://"+testutil.ClosedAddr(t)+"/", nil))

	require.Error(t, err)
	require.Len(t, events, 2)
	for i, e := range events {
		assert.Equal(t, i+1, e.Attempt)
		assert.Nil(t, e.Response)
		assert.ErrorIs(t, e.Err, syscall.ECONNREFUSED)
		assert.Equal(t, time.Millisecond, e.Delay)
	}
}

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

func (h *logRecorder) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range h.records {
		line := r.Level.String() + " " + r.Message
		r.Attrs(func(a slog.Attr) bool {
			line += " " + a.String()
			return true
		})
		out = append(out, line)
	}
	return out
}

func TestLoggerRecordsRetriesAndGiveUp(t *testing.T) {
	h := &logRecorder{}
	base := &testutil.Base{Answer: testutil.Statuses(503)}
	tr := &Transport{Base: base, Budget: UnlimitedBudget(), Policy: Policy{MaxAttempts: 3, Backoff: Constant(0)},
		Logger: slog.New(h)}

	resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://user:secret@example.test/v1/things?token=t0k3n&page=2#frag", nil))

	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	const req = "http.request.method=GET url.full=http://example.test/v1/things?token=REDACTED&page=REDACTED server.address=example.test"
	assert.Equal(t, []string{
		"DEBUG retryhttp: retrying " + req + " http.request.resend_count=1 retryhttp.delay=0s retryhttp.delay_source=backoff http.response.status_code=503",
		"DEBUG retryhttp: retrying " + req + " http.request.resend_count=2 retryhttp.delay=0s retryhttp.delay_source=backoff http.response.status_code=503",
		"INFO retryhttp: giving up " + req + " http.request.resend_count=2 retryhttp.attempts=3 retryhttp.reason=attempts exhausted http.response.status_code=503 error.type=503",
	}, h.lines())
	for _, l := range h.lines() {
		assert.NotContains(t, l, "secret", "no userinfo")
		assert.NotContains(t, l, "t0k3n", "no query values")
	}
}

// An error's type is named as OpenTelemetry's error.type wants it.
func TestLoggerNamesErrorTypes(t *testing.T) {
	h := &logRecorder{}
	tr := &Transport{Base: &testutil.Base{Answer: testutil.Refused}, Budget: UnlimitedBudget(),
		Policy: Policy{MaxAttempts: 2, Backoff: Constant(0)}, Logger: slog.New(h)}
	_, err := tr.RoundTrip(testutil.NewRequest(t, "GET", "http://example.test/", nil))
	require.Error(t, err)
	lines := h.lines()
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], "error.type=connection_refused")
	assert.Contains(t, lines[1], "error.type=connection_refused")
	assert.Equal(t, "timeout", ErrorType(&attemptTimeoutError{timeout: time.Second}))
	assert.Equal(t, "throttled", ErrorType(&Error{Reason: ReasonThrottled, Err: ErrThrottled}))
	assert.Equal(t, "_OTHER", ErrorType(errors.New("something else")))
	assert.Empty(t, ErrorType(nil))
}

func TestNilLoggerLogsNothing(t *testing.T) {
	h := &logRecorder{}
	old := slog.Default()
	slog.SetDefault(slog.New(h)) // a nil Logger must not fall back to the default one
	t.Cleanup(func() { slog.SetDefault(old) })
	base := &testutil.Base{Answer: testutil.Statuses(503)}
	tr := &Transport{Base: base, Policy: Policy{MaxAttempts: 3, Backoff: Constant(0)}}

	resp, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://example.test/", nil))

	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Len(t, base.Calls(), 3)
	assert.Empty(t, h.lines())
}

// ---- zero value and base transport ----

func TestZeroValueTransportRetries(t *testing.T) {
	s := testutil.NewServer(t, testutil.Answers(503, 200)...)
	tr := &Transport{}
	tr.rand = func() float64 { return 0 } // full jitter then waits 0
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}

	resp, err := client.Get(s.URL)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "status 200 on attempt 2", testutil.ReadBody(t, resp))
	assert.Equal(t, 2, Attempts(resp))

	base, ok := tr.base.(*http.Transport)
	require.True(t, ok, "nil Base means an *http.Transport, got %T", tr.base)
	assert.NotSame(t, http.DefaultTransport, base, "not the shared default transport")
	assert.Equal(t, runtime.GOMAXPROCS(0)+1, base.MaxIdleConnsPerHost, "go-cleanhttp's pooled settings")

	resp, err = client.Get(s.URL)
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Same(t, base, tr.base, "the base is made once")
	assert.Equal(t, 1, s.Conns(), "one pool serves every request")
}

func TestCloseIdleConnectionsForwarded(t *testing.T) {
	base := &testutil.IdleRecorder{}
	client := &http.Client{Transport: &Transport{Base: base}}

	client.CloseIdleConnections()

	assert.Equal(t, 1, base.Closes())

	// A base without the method is left alone.
	(&Transport{Base: &testutil.Base{Answer: testutil.Statuses(200)}}).CloseIdleConnections()
}

func TestNewClientWrapsTheClientTransport(t *testing.T) {
	base := &testutil.Base{Answer: testutil.Statuses(503, 200)}
	orig := &http.Client{Transport: base, Timeout: time.Minute}

	c := NewClient(orig, Policy{Backoff: Constant(0)})

	assert.Same(t, base, orig.Transport, "the original client is not modified")
	assert.Equal(t, time.Minute, c.Timeout)
	tr, ok := c.Transport.(*Transport)
	require.True(t, ok)
	assert.Same(t, base, tr.Base)
	resp, err := c.Get("http://example.test/")
	require.NoError(t, err)
	testutil.ReadBody(t, resp)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Len(t, base.Calls(), 2)
}

// ---- the caller's cancellation ----

// TestCallerCancelDuringBackoffEndsPromptly cancels a request in the middle
// of an hour-long wait: it returns at the moment of cancellation, as an
// *Error that is context.Canceled and names the retried status.
func TestCallerCancelDuringBackoffEndsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Statuses(503)}
		tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(time.Hour)}}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(3*time.Second, cancel)
		start := time.Now()

		_, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "GET", "http://example.test/", nil).WithContext(ctx))

		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.ErrorIs(t, err, context.Canceled)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonCanceled, e.Reason)
		assert.Equal(t, 1, e.Attempts)
		var se *StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, 503, se.StatusCode)
		assert.Len(t, base.Calls(), 1)
	})
}
