package otelretry

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A body cut once and resumed (ResumeResponse): the resume is a retry in
// the metrics, as in Stats, and an attempt with a span of its own, whose
// resend count is 1. (The request had no retry when RoundTrip returned, so
// it has no span of its own: a request span is made for requests that
// retry before they return.)
func TestAResumeIsARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := newTelemetry()
		body := testutil.Payload(10_000)
		base := &testutil.Base{Answer: testutil.CutOnce(body, 4000)}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{ResumeResponse: true,
			Backoff: retryhttp.Constant(time.Millisecond)}}
		c := &http.Client{Transport: NewTransport(tr, tel.options()...)}
		resp, err := c.Get("http://files.test/big")
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.True(t, bytes.Equal(body, got))

		stats := tr.Stats()
		require.EqualValues(t, 1, stats.Resumes)
		m := tel.metrics(t)
		require.EqualValues(t, 2, m.count(t, MetricAttempts))
		require.EqualValues(t, 1, m.count(t, MetricRetries))
		_, attempts := requestSpans(tel.ended())
		require.Len(t, attempts, 2)
		require.Contains(t, attempts[1].Attributes, semconv.HTTPRequestResendCount(1))
	})
}
