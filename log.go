package retryhttp

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp/internal/classify"
)

// What a Transport tells its Logger. Records carry the OpenTelemetry
// semantic conventions' attribute names (http.request.method, url.full,
// server.address, http.response.status_code, http.request.resend_count,
// error.type) and retryhttp's own prefixed "retryhttp.". A URL is logged
// without its userinfo and with every query value replaced by REDACTED:
// tokens travel in queries.

// logURL returns u as it may be logged: no userinfo, no fragment, each
// query value REDACTED (its key kept).
func logURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	v := *u
	v.User = nil
	v.Fragment, v.RawFragment = "", ""
	if v.RawQuery != "" {
		parts := strings.Split(v.RawQuery, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok {
				parts[i] = k + "=REDACTED"
			}
		}
		v.RawQuery = strings.Join(parts, "&")
	}
	return v.String()
}

// requestAttrs returns the attributes every record of req has.
func requestAttrs(req *http.Request, attrs []slog.Attr) []slog.Attr {
	attrs = append(attrs, slog.String("http.request.method", req.Method),
		slog.String("url.full", logURL(req.URL)))
	if req.URL != nil {
		attrs = append(attrs, slog.String("server.address", req.URL.Hostname()))
	}
	return attrs
}

// logRetry writes the debug record of a retry of req about to happen.
func (t *Transport) logRetry(req *http.Request, a *attempt, delay time.Duration, source delaySource, waited time.Duration) {
	l := t.Logger
	if l == nil || !l.Enabled(req.Context(), slog.LevelDebug) {
		return
	}
	attrs := requestAttrs(req, make([]slog.Attr, 0, 9))
	attrs = append(attrs,
		slog.Int("http.request.resend_count", a.n), // of the retry about to be sent
		slog.Duration("retryhttp.delay", delay),
		slog.String("retryhttp.delay_source", source.String()))
	if waited > 0 {
		attrs = append(attrs, slog.Duration("retryhttp.budget_wait", waited))
	}
	if a.err != nil {
		attrs = append(attrs, slog.String("error.type", errorType(a.err)), slog.String("retryhttp.error", a.err.Error()))
	} else {
		attrs = append(attrs, slog.Int("http.response.status_code", a.resp.StatusCode))
	}
	l.LogAttrs(req.Context(), slog.LevelDebug, "retryhttp: retrying", attrs...)
}

// logGiveUp writes the info record of req given up on after attempts,
// with the response or error returned.
func (t *Transport) logGiveUp(req *http.Request, attempts int, reason Reason, resp *http.Response, out error) {
	l := t.Logger
	if l == nil || !l.Enabled(req.Context(), slog.LevelInfo) {
		return
	}
	attrs := requestAttrs(req, make([]slog.Attr, 0, 8))
	attrs = append(attrs, slog.Int("http.request.resend_count", max(attempts-1, 0)),
		slog.Int("retryhttp.attempts", attempts), slog.String("retryhttp.reason", reason.String()))
	if out != nil {
		attrs = append(attrs, slog.String("error.type", errorType(out)), slog.String("retryhttp.error", out.Error()))
	} else {
		attrs = append(attrs, slog.Int("http.response.status_code", resp.StatusCode),
			slog.String("error.type", strconv.Itoa(resp.StatusCode)))
	}
	l.LogAttrs(req.Context(), slog.LevelInfo, "retryhttp: giving up", attrs...)
}

// warnOnce logs msg about req at warning level unless a warning of the
// same kind was logged less than warnEvery ago (last holds when, on the
// monotonic scale).
func (t *Transport) warnOnce(req *http.Request, last *atomic.Int64, now time.Time, msg string, attrs ...slog.Attr) {
	l := t.Logger
	if l == nil || !l.Enabled(req.Context(), slog.LevelWarn) {
		return
	}
	at := t.monoAt(now)
	prev := last.Load()
	if prev != 0 && at-prev < int64(warnEvery) || !last.CompareAndSwap(prev, at) {
		return
	}
	l.LogAttrs(req.Context(), slog.LevelWarn, msg, requestAttrs(req, attrs)...)
}

// warnEvery is how often at most a Transport's Logger hears of each kind of
// trouble that concerns many requests at once (the budget, throttling).
const warnEvery = 10 * time.Second

// warnBudget tells the Logger, at most once per warnEvery, that the budget
// held a retry (msg says how), with the Transport's counts of waits in line
// and of denials.
func (t *Transport) warnBudget(req *http.Request, now time.Time, msg string) {
	t.warnOnce(req, &t.warnedBudget, now, msg,
		slog.Uint64("retryhttp.budget_waits", t.stats.n[nBudgetWaits].Load()),
		slog.Uint64("retryhttp.budget_denied", t.stats.n[nBudgetRefusals].Load()))
}

// What warnBudget says.
const (
	warnRefused = "retryhttp: retries refused: the budget's credit for the host is spent"
	warnInLine  = "retryhttp: retries wait in line for a host that does not answer"
)

// warnThrottle tells the Logger, at most once per warnEvery, that adaptive
// throttling rejects requests in the client.
func (t *Transport) warnThrottle(req *http.Request, now time.Time) {
	t.warnOnce(req, &t.warnedThrottle, now, "retryhttp: the host rejects most requests; throttling them in the client",
		slog.Uint64("retryhttp.throttled", t.stats.n[nThrottled].Load()))
}

// throttledUnsent reports whether err is the *Error of a request that
// adaptive throttling rejected before any attempt.
func throttledUnsent(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == ReasonThrottled && e.Attempts == 0
}

// errorType is the name the Transport's logs give err, as OpenTelemetry's
// error.type attribute wants it (errortype.Of gives the same names).
func errorType(err error) string {
	switch {
	case throttledUnsent(err):
		return "throttled"
	case errors.Is(err, ErrAttemptTimeout):
		return "timeout"
	}
	return classify.ErrorType(err)
}
