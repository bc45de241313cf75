package retryhttp

// A request body is sent again whole on every attempt, or not sent again:
// replayed through GetBody or from the Transport's buffer, a stream only
// while nothing of it was read. The caller's body is closed exactly once,
// whatever ends the request.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// TestBodiesReplayedInFull sends bodies of every kind to a server that hashes
// each attempt's body, and checks that every attempt that reached it carried
// the whole body, and that bodies that cannot be sent again in full are not.
func TestBodiesReplayedInFull(t *testing.T) {
	type body struct {
		rc      io.ReadCloser
		length  int64
		getBody func() (io.ReadCloser, error)
	}
	// withGetBody is what http.NewRequest makes of a bytes.Reader.
	withGetBody := func(b []byte, getBodyCalls *atomic.Int32) body {
		return body{io.NopCloser(bytes.NewReader(b)), int64(len(b)), func() (io.ReadCloser, error) {
			getBodyCalls.Add(1)
			return io.NopCloser(bytes.NewReader(b)), nil
		}}
	}
	known := func(b []byte) body { return body{io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil} }
	unknown := func(b []byte) body { return body{io.NopCloser(bytes.NewReader(b)), -1, nil} }

	small := testutil.Payload(1000)
	atBound := testutil.Payload(defaultMaxBufferedBody)
	overBound := testutil.Payload(defaultMaxBufferedBody + 1)
	large := testutil.Payload(1 << 20)

	cases := []struct {
		name        string
		method      string
		header      string // an idempotency key header, if any
		data        []byte
		body        func(data []byte, getBodyCalls *atomic.Int32) body
		policy      Policy
		statuses    []int
		wantHits    int
		wantStatus  int
		wantReason  Reason // of a give-up, 0 for none
		wantGetBody int32  // GetBody calls
	}{
		{name: "GetBody small", method: "PUT", data: small, body: withGetBody,
			statuses: []int{503, 503, 200}, wantHits: 3, wantStatus: 200, wantGetBody: 2},
		{name: "GetBody 1 MiB, never buffered", method: "PUT", data: large, body: withGetBody,
			statuses: []int{503, 503, 200}, wantHits: 3, wantStatus: 200, wantGetBody: 2},
		{name: "GetBody keyed POST", method: "POST", header: "Idempotency-Key", data: small, body: withGetBody,
			statuses: []int{503, 200}, wantHits: 2, wantStatus: 200, wantGetBody: 1},
		{name: "buffered small", method: "PUT", data: small,
			body:     func(b []byte, _ *atomic.Int32) body { return known(b) },
			statuses: []int{503, 503, 200}, wantHits: 3, wantStatus: 200},
		{name: "buffered at the 64 KiB bound", method: "PUT", data: atBound,
			body:     func(b []byte, _ *atomic.Int32) body { return known(b) },
			statuses: []int{503, 503, 200}, wantHits: 3, wantStatus: 200},
		{name: "buffered keyed PATCH", method: "PATCH", header: "X-Idempotency-Key", data: small,
			body:     func(b []byte, _ *atomic.Int32) body { return known(b) },
			statuses: []int{503, 200}, wantHits: 2, wantStatus: 200},
		{name: "buffered at a configured bound", method: "PUT", data: small, policy: Policy{MaxBufferedBody: 1000},
			body:     func(b []byte, _ *atomic.Int32) body { return known(b) },
			statuses: []int{503, 200}, wantHits: 2, wantStatus: 200},
		{name: "over the 64 KiB bound: sent once", method: "PUT", data: overBound,
			body:     func(b []byte, _ *atomic.Int32) body { return known(b) },
			statuses: []int{503, 200}, wantHits: 1, wantStatus: 503, wantReason: ReasonUnsafe},
		{name: "over a configured bound: sent once", method: "PUT", data: small, policy: Policy{MaxBufferedBody: 999},
			body:     func(b []byte, _ *atomic.Int32) body { return known(b) },
			statuses: []int{503, 200}, wantHits: 1, wantStatus: 503, wantReason: ReasonUnsafe},
		{name: "buffering turned off: sent once", method: "PUT", data: small, policy: Policy{MaxBufferedBody: -1},
			body:     func(b []byte, _ *atomic.Int32) body { return known(b) },
			statuses: []int{503, 200}, wantHits: 1, wantStatus: 503, wantReason: ReasonUnsafe},
		{name: "unknown length: sent once", method: "PUT", data: small,
			body:     func(b []byte, _ *atomic.Int32) body { return unknown(b) },
			statuses: []int{503, 200}, wantHits: 1, wantStatus: 503, wantReason: ReasonUnsafe},
		{name: "unknown length keyed POST: sent once", method: "POST", header: "Idempotency-Key", data: small,
			body:     func(b []byte, _ *atomic.Int32) body { return unknown(b) },
			statuses: []int{503, 200}, wantHits: 1, wantStatus: 503, wantReason: ReasonUnsafe},
	}
	// Each case runs against a loopback server and against an in-memory
	// base: net/http rewinds a body through GetBody on its own in some
	// failures, which could hide a wrong body from the loopback run.
	for _, tc := range cases {
		for _, inMemory := range []bool{false, true} {
			name := tc.name + "/loopback"
			if inMemory {
				name = tc.name + "/in memory"
			}
			t.Run(name, func(t *testing.T) {
				var (
					url      string
					tr       *Transport
					requests func() []retryhttptest.Request
				)
				if inMemory {
					p := tc.policy
					p.Backoff = Constant(0)
					b := &testutil.Base{Answer: testutil.Statuses(tc.statuses...)}
					url, requests = "http://example.test/", b.Requests
					tr = &Transport{Base: b, Policy: p, Budget: UnlimitedBudget()}
				} else {
					s := testutil.NewServer(t, testutil.Answers(tc.statuses...)...)
					url, requests = s.URL, s.Requests
					tr = newTestTransport(t, tc.policy)
				}
				g := new(hookLog).watch(tr)
				var getBodyCalls atomic.Int32
				b := tc.body(tc.data, &getBodyCalls)
				rec := testutil.NewCloseRecorder(b.rc)
				req := testutil.NewRequest(t, tc.method, url, nil)
				req.Body, req.ContentLength, req.GetBody = rec, b.length, b.getBody
				if tc.header != "" {
					req.Header.Set(tc.header, "k")
				}

				resp, err := testutil.RoundTrip(t, tr, req)

				require.NoError(t, err)
				assert.Equal(t, tc.wantStatus, resp.StatusCode)
				got := requests()
				require.Len(t, got, tc.wantHits)
				for i, r := range got {
					assert.NoError(t, r.BodyErr, "attempt %d body", i+1)
					assert.EqualValues(t, len(tc.data), r.BodyLen, "attempt %d body length", i+1)
					assert.Equal(t, testutil.SHA256Hex(tc.data), r.BodySHA256, "attempt %d body hash", i+1)
				}
				assert.Equal(t, tc.wantGetBody, getBodyCalls.Load(), "GetBody calls")
				if tc.wantReason != 0 {
					assert.Equal(t, []Reason{tc.wantReason}, g.reasons())
				} else {
					assert.Empty(t, g.reasons())
				}
				assert.True(t, rec.WaitClosed(), "the caller's body is closed")
			})
		}
	}
}

// TestStreamBodyRetriedWhenNothingWasRead sends a body of unknown length whose
// first attempt fails to connect (a real refused dial): none of it was read,
// so the second attempt sends it, whole.
func TestStreamBodyRetriedWhenNothingWasRead(t *testing.T) {
	s := testutil.NewServer(t)
	base := testutil.LoopbackBase(t)
	testutil.RefuseFirstDial(t, base)
	tr := &Transport{Base: base, Policy: Policy{Backoff: Constant(0)}}
	data := testutil.Payload(5000)
	rec := testutil.NewCloseRecorder(io.MultiReader(bytes.NewReader(data))) // hides the length
	req := testutil.NewRequest(t, "POST", s.URL, rec)
	require.EqualValues(t, 0, req.ContentLength)
	require.Nil(t, req.GetBody)

	resp, err := testutil.RoundTrip(t, tr, req)

	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, 2, Attempts(resp))
	reqs := s.Requests()
	require.Len(t, reqs, 1)
	assert.EqualValues(t, len(data), reqs[0].BodyLen)
	assert.Equal(t, testutil.SHA256Hex(data), reqs[0].BodySHA256)
	assert.True(t, rec.WaitClosed())
}

// TestShortBodyNeverSent gives a body that holds fewer bytes than its
// ContentLength promises: buffering finds out before anything is sent, and
// the request fails without reaching the server.
func TestShortBodyNeverSent(t *testing.T) {
	s := testutil.NewServer(t)
	tr := newTestTransport(t, Policy{})
	rec := testutil.NewCloseRecorder(bytes.NewReader(testutil.Payload(10)))
	req := testutil.NewRequest(t, "PUT", s.URL, nil)
	req.Body, req.ContentLength = rec, 100

	_, err := testutil.RoundTrip(t, tr, req)

	assert.ErrorIs(t, err, ErrBodyLength)
	assert.Empty(t, s.Requests())
	assert.True(t, rec.WaitClosed())
}

// TestGetBodyFailureStopsRetries makes GetBody fail when a retry needs it:
// no empty or partial body is sent in its place; the failed attempt's
// response comes back.
func TestGetBodyFailureStopsRetries(t *testing.T) {
	s := testutil.NewServer(t, testutil.Answers(503, 200)...)
	tr := newTestTransport(t, Policy{})
	g := new(hookLog).watch(tr)
	data := testutil.Payload(100)
	req := testutil.NewRequest(t, "PUT", s.URL, bytes.NewReader(data))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("body gone") }

	resp, err := testutil.RoundTrip(t, tr, req)

	require.NoError(t, err)
	assert.Equal(t, 503, resp.StatusCode)
	assert.Equal(t, "status 503 on attempt 1", testutil.ReadBody(t, resp))
	reqs := s.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, testutil.SHA256Hex(data), reqs[0].BodySHA256)
	assert.Equal(t, []Reason{ReasonUnsafe}, g.reasons())
}

// TestGetBodyFailureAfterError is the same with a transport error: the
// error names both the attempt's failure and GetBody's.
func TestGetBodyFailureAfterError(t *testing.T) {
	tr := newTestTransport(t, Policy{})
	gone := errors.New("body gone")
	req := testutil.NewRequest(t, "PUT", "http://"+testutil.ClosedAddr(t)+"/", bytes.NewReader(testutil.Payload(100)))
	req.GetBody = func() (io.ReadCloser, error) { return nil, gone }

	_, err := testutil.RoundTrip(t, tr, req)

	gaveUp(t, err, ReasonUnsafe, 1)
	assert.ErrorIs(t, err, gone)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
}

// A stream body (unknown length, no GetBody) whose first attempt was
// refused at dial is handed to a second attempt; when that attempt is then
// not made (the retry's wait in the budget's line ends before the caller's
// deadline, or the caller cancels the wait), the caller's body must still
// be closed.
func TestStreamBodyClosedWhenTheRetryIsNotMade(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget *Budget
		cancel bool
		reason Reason
	}{
		{"the budget's line ends before the deadline", NewBudget(0, 0), false, ReasonBudget},
		{"caller cancels the wait", UnlimitedBudget(), true, ReasonCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &testutil.Base{Answer: testutil.Refused}
				tr, ev := fakeTransport(base, Policy{Backoff: Constant(10 * time.Millisecond)}, 0.5)
				tr.Budget = tc.budget
				ctx := testutil.WithTimeout(t, 50*time.Millisecond) // before a probe
				if tc.cancel {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(t.Context())
					defer cancel()
					time.AfterFunc(5*time.Millisecond, cancel)
				}
				body := testutil.NewCloseRecorder(strings.NewReader("stream"))
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.test/upload", body)
				require.NoError(t, err)
				req.ContentLength = -1 // unknown length: sent as a stream
				_, err = tr.RoundTrip(req)
				require.Error(t, err)
				assert.ErrorIs(t, err, syscall.ECONNREFUSED)
				require.Equal(t, []Reason{tc.reason}, ev.reasons())
				assert.Equal(t, 1, body.Closes(), "the caller's body is closed exactly once")
			})
		})
	}
}

// A small body without GetBody is read before the first attempt so it can
// be replayed. If its producer stalls, the caller's deadline still ends the
// call, with the deadline's error, and nothing is sent.
func TestStalledBufferedBodyEndsAtTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusOK, nil)}
		tr, _ := fakeTransport(base, Policy{}, 0)
		ctx := testutil.WithTimeout(t, 3*time.Second)
		pr, pw := io.Pipe()
		defer pw.Close()
		go pw.Write([]byte("half")) // of a declared 8 bytes; then nothing
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://api.test/doc", pr)
		require.NoError(t, err)
		req.ContentLength = 8
		start := time.Now()
		_, err = tr.RoundTrip(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 3*time.Second, time.Since(start))
		assert.Zero(t, base.Attempts(), "nothing was sent")
	})
}

// pipeBody is a request body whose reads block on a pipe; Close ends them,
// and every Close is counted.
type pipeBody struct {
	*io.PipeReader
	closes atomic.Int32
}

func (b *pipeBody) Close() error {
	b.closes.Add(1)
	return b.PipeReader.Close()
}

// The caller's body is closed exactly once when the caller's context ends
// while the body is being buffered: by the context's end, not again after.
func TestBufferedBodyClosedOnceWhenCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.ThenOK(http.StatusOK, nil)}
		tr, _ := fakeTransport(base, Policy{}, 0)
		ctx := testutil.WithTimeout(t, time.Second)
		pr, pw := io.Pipe()
		defer pw.Close()
		body := &pipeBody{PipeReader: pr}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://api.test/doc", body)
		require.NoError(t, err)
		req.ContentLength = 8
		_, err = tr.RoundTrip(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		synctest.Wait() // for any close still on its way
		assert.EqualValues(t, 1, body.closes.Load(), "the caller's body is closed exactly once")
		assert.Zero(t, base.Attempts(), "nothing was sent")
	})
}

// A request that fails before it is sent (a body whose length lies, a key
// generator that fails) is reported as a throttled one is: once to
// OnGiveUp, in Stats.GiveUps and to the Logger, with an *Error of no
// attempts that wraps its error. Found by review, then by the
// simulation's give-up check (internal/sim).
func TestARequestNeverSentIsReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		length int64
		sent   error
	}{
		{"body length", Policy{}, 99, ErrBodyLength},
		{"key generator", Policy{IdempotencyKeys: &IdempotencyKeys{
			Generate: func(*http.Request) (string, error) { return "", errors.New("no entropy") }}}, 4, ErrIdempotencyKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf testutil.SyncBuffer
			base := &testutil.Base{Answer: testutil.ThenOK(http.StatusOK, nil)}
			tr, ev := fakeTransport(base, tc.policy, 0)
			tr.Logger = slog.New(slog.NewTextHandler(&buf, nil))
			req, err := http.NewRequest(http.MethodPost, "http://api.test/charges",
				testutil.NewCloseRecorder(strings.NewReader("a=10"))) // no GetBody: buffered
			require.NoError(t, err)
			req.ContentLength = tc.length
			resp, err := tr.RoundTrip(req)
			assert.Nil(t, resp)
			require.ErrorIs(t, err, tc.sent)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Zero(t, e.Attempts)
			assert.Zero(t, base.Attempts(), "nothing was sent")
			assert.Equal(t, []Reason{ReasonNotTransient}, ev.reasons(), "OnGiveUp, once")
			assert.EqualValues(t, 1, tr.Stats().GiveUps[ReasonNotTransient])
			assert.Contains(t, buf.String(), "not transient", "the Logger")
		})
	}
}

// A body longer or shorter than its ContentLength is refused before
// anything is sent, as net/http refuses it.
func TestBufferedBodyLengthMustMatchContentLength(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		cl   int64
	}{
		{"longer", "0123456789", 4},
		{"shorter", "01", 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.ThenOK(http.StatusOK, nil)}
			tr, _ := fakeTransport(base, Policy{}, 0)
			body := testutil.NewCloseRecorder(strings.NewReader(tc.body))
			req, err := http.NewRequest(http.MethodPut, "http://api.test/doc", body)
			require.NoError(t, err)
			req.ContentLength = tc.cl
			resp, err := tr.RoundTrip(req)
			assert.Nil(t, resp)
			assert.ErrorIs(t, err, ErrBodyLength)
			assert.Zero(t, base.Attempts(), "nothing was sent")
			assert.Equal(t, 1, body.Closes())
		})
	}
}

// An upload that the server breaks off midway, after 1,000 bytes of the
// body (retryhttptest's ResetMidUpload), is sent again whole when its body
// can be made again (GetBody), and not at all when it streams: part of it
// was read, so a second attempt could not carry all of it (ReasonUnsafe).
func TestAnUploadBrokenMidway(t *testing.T) {
	payload := strings.Repeat("0123456789abcdef", 8192) // 128 KiB, past MaxBufferedBody
	for _, tc := range []struct {
		name      string
		getBody   bool
		attempts  int
		wantError bool
	}{
		{"GetBody: sent again whole", true, 2, false},
		{"a stream: not sent again", false, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := retryhttptest.NewServer(retryhttptest.Sequence(
				retryhttptest.Status(200).ResetMidUpload(1000), retryhttptest.Status(200).WithBody("stored")))
			defer srv.Close()
			tr := &Transport{Base: srv.Client().Transport, Policy: Policy{Backoff: Constant(0)}}
			defer tr.CloseIdleConnections()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, srv.URL+"/object",
				strings.NewReader(payload))
			require.NoError(t, err)
			if !tc.getBody {
				req.Body, req.GetBody, req.ContentLength = io.NopCloser(strings.NewReader(payload)), nil, -1
			}
			resp, err := tr.RoundTrip(req)
			reqs := srv.Requests()
			require.Len(t, reqs, tc.attempts)
			assert.EqualValues(t, 1000, reqs[0].BodyLen, "the first attempt's bytes, until the reset")
			if tc.wantError {
				gaveUp(t, err, ReasonUnsafe, 1)
				return
			}
			require.NoError(t, err)
			resp.Body.Close()
			assert.EqualValues(t, len(payload), reqs[1].BodyLen, "the retry carried the whole body")
		})
	}
}
