package retryhttp

import (
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// ---- RoundTripper contract ----

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
	gaveUp(t, err, ReasonExhausted, 3)
	assert.Contains(t, err.Error(), "gave up after 3 attempts (attempts exhausted)")
	assert.Contains(t, err.Error(), "connection refused")
	assert.Equal(t, []Reason{ReasonExhausted}, g.reasons())
}

// ---- connections ----

// ---- attempts, hooks and logs ----

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
