package retryhttp_test

// Hedged requests keep the promises of a single attempt: the caller's
// request is the caller's again once RoundTrip returned, every losing
// answer is closed, and an upgraded connection stays writable.

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/internal/testutil"
)

// A hedge that lost is canceled but may still be in the base after
// RoundTrip returned (net/http's write loop can outlive its RoundTrip),
// when the caller may already change its request for the next one: the
// hedge reads a header and a URL of its own, not the caller's new values.
func TestALosingHedgeDoesNotReadTheCallersRequestAfterRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var hedgeSaw []string
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				time.Sleep(200 * time.Millisecond)
				return testutil.Response(req, http.StatusOK, nil, "first"), nil
			}
			<-req.Context().Done()  // the first attempt won
			time.Sleep(time.Second) // still writing the request
			mu.Lock()
			hedgeSaw = []string{req.Header.Get("X-Token"), req.URL.RawQuery}
			mu.Unlock()
			return nil, context.Cause(req.Context())
		}}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Hedge: &retryhttp.Hedge{Delay: 100 * time.Millisecond}}}
		req := testutil.NewRequest(t, http.MethodGet, "http://api.test/doc?page=1", nil).WithContext(t.Context())
		req.Header.Set("X-Token", "one")

		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, "first", testutil.ReadBody(t, resp))
		// The request is the caller's again: it reuses it for the next page.
		req.Header.Set("X-Token", "two")
		req.URL.RawQuery = "page=2"
		synctest.Wait()
		time.Sleep(2 * time.Second)

		require.Equal(t, 2, base.Attempts(), "a hedge was sent")
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"one", "page=1"}, hedgeSaw)
	})
}

// With two hedges, the first answering 503 and the second winning, every
// answer that lost is closed: the 503's too.
func TestEveryLosingAnswerOfARaceIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lost *testutil.CloseRecorder
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			switch n {
			case 1:
				<-req.Context().Done() // slow; canceled once a hedge won
				return nil, context.Cause(req.Context())
			case 2:
				resp := testutil.Response(req, http.StatusServiceUnavailable, nil, "busy")
				lost = testutil.NewCloseRecorder(resp.Body)
				resp.Body = lost
				return resp, nil
			}
			return testutil.Response(req, http.StatusOK, nil, "hedge 2"), nil
		}}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{
			Hedge: &retryhttp.Hedge{Delay: 100 * time.Millisecond, MaxHedges: 2, Fraction: 1}}}

		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

		require.NoError(t, err)
		assert.Equal(t, "hedge 2", testutil.ReadBody(t, resp))
		synctest.Wait()
		require.Equal(t, 3, base.Attempts())
		require.NotNil(t, lost)
		assert.Equal(t, 1, lost.Closes(), "the 503 of hedge 1 is closed, once")
	})
}

// echoUpgrade serves an upgrade to the "echo" protocol: after the 101 it
// sends back every line it reads.
func echoUpgrade(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "echo" {
		http.Error(w, "upgrade to echo", http.StatusBadRequest)
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	rw.Flush()
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			return
		}
		rw.WriteString(line)
		rw.Flush()
	}
}

// A request that upgrades (101 Switching Protocols) gets a body it can
// write to, as net/http promises, whether it may be hedged or not.
func TestAnUpgradedConnectionIsWritableWhenHedged(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    retryhttp.Policy
	}{
		{"plain", retryhttp.Policy{}},
		{"attempt timeout", retryhttp.Policy{AttemptTimeout: time.Minute}},
		{"hedged", retryhttp.Policy{Hedge: &retryhttp.Hedge{Delay: time.Minute}}},
		{"hedged with attempt timeout", retryhttp.Policy{AttemptTimeout: time.Minute, Hedge: &retryhttp.Hedge{Delay: time.Minute}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(echoUpgrade))
			defer srv.Close()
			base := srv.Client().Transport.(*http.Transport)
			defer base.CloseIdleConnections()
			req := testutil.NewRequest(t, http.MethodGet, srv.URL, nil).WithContext(t.Context())
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "echo")

			resp, err := (&retryhttp.Transport{Base: base, Policy: tc.p}).RoundTrip(req)

			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
			rw, ok := resp.Body.(io.ReadWriter)
			require.True(t, ok, "the body of a 101 is writable")
			_, err = io.WriteString(rw, "ping\n")
			require.NoError(t, err)
			line, err := bufio.NewReader(rw).ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, "ping\n", line)
		})
	}
}

// A hedge whose PrepareRetry fails is not sent, and not counted: Stats
// counts the hedges and retries that reached the base.
func TestAHedgeWhosePrepareRetryFailedIsNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			time.Sleep(time.Second)
			return testutil.Response(req, http.StatusOK, nil, "first"), nil
		}}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{
			Hedge: &retryhttp.Hedge{Delay: 100 * time.Millisecond, MaxHedges: 2, Fraction: 1}}}
		var prepared int
		tr.PrepareRetry = func(*retryhttp.RetryRequest) error {
			prepared++
			return errors.New("no token")
		}

		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))

		require.NoError(t, err)
		assert.Equal(t, "first", testutil.ReadBody(t, resp))
		assert.Equal(t, 1, prepared, "one hedge prepared, none after it")
		assert.Equal(t, 1, base.Attempts())
		s := tr.Stats()
		assert.Zero(t, s.Hedges)
		assert.Zero(t, s.Retries)
		assert.EqualValues(t, 1, s.Attempts)
	})
}
