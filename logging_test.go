package retryhttp

// The Logger hears of retries and give-ups with OpenTelemetry's attribute
// names, and of no secret in the URL; a nil Logger logs nothing.

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *logRecorder) WithGroup(string) slog.Handler { return h }

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
	assert.Equal(t, "timeout", errorType(&attemptTimeoutError{timeout: time.Second}))
	assert.Equal(t, "throttled", errorType(&Error{Reason: ReasonThrottled}))
	assert.Equal(t, "_OTHER", errorType(errors.New("something else")))
	assert.Empty(t, errorType(nil))
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
