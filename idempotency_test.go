package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// lostThenOK fails the first attempt with errConnLost, after reporting
// through the request's httptrace hooks what trace says happened, and
// answers 200 to later attempts.
func lostThenOK(trace keyTrace) func(int, *http.Request) (*http.Response, error) {
	return func(n int, req *http.Request) (*http.Response, error) {
		if n > 1 {
			return testutil.Response(req, http.StatusOK, nil, "ok"), nil
		}
		if ct := httptrace.ContextClientTrace(req.Context()); ct != nil && trace != traceNothing {
			if ct.GetConn != nil {
				ct.GetConn(req.URL.Host)
			}
			if (trace == traceGotConn || trace == traceWroteHeaders) && ct.GotConn != nil {
				ct.GotConn(httptrace.GotConnInfo{})
			}
			if trace == traceWroteHeaders && ct.WroteHeaders != nil {
				ct.WroteHeaders()
			}
		}
		return nil, errConnLost
	}
}

// keyTrace is what lostThenOK reports through httptrace before it fails.
type keyTrace uint8

const (
	traceGetConn      keyTrace = iota // looking for a connection, none obtained: nothing sent
	traceGotConn                      // a connection obtained, the header never written: nothing sent
	traceWroteHeaders                 // the header written on a connection: the request may be applied
	traceNothing                      // no hook called, like a base without httptrace support
)

// errConnLost stands for a failure after the request may have been written.
var errConnLost = io.ErrUnexpectedEOF

// A POST without a key is sent again after a failure only when the failure
// proves that nothing of it was sent, so that the server cannot have
// applied it.
func TestUnkeyedPOSTIsRetriedOnlyWhenNothingWasSent(t *testing.T) {
	// The Transport watches an unkeyed request's attempts through httptrace
	// only where its base's answer cannot tell whether anything was sent:
	// "watched" is under an attempt timeout of its own.
	for _, tc := range []struct {
		name    string
		answer  testutil.Answer
		watched bool
		retried bool
	}{
		{name: "header written, then the connection lost: not retried", answer: lostThenOK(traceWroteHeaders)},
		{name: "watched: a connection, lost before the header was written: retried", answer: lostThenOK(traceGotConn), watched: true, retried: true},
		{name: "watched: no connection obtained: retried", answer: lostThenOK(traceGetConn), watched: true, retried: true},
		{name: "watched: header written, then the connection lost: not retried", answer: lostThenOK(traceWroteHeaders), watched: true},
		// net/http sends such a request again by itself when it wrote
		// nothing on a reused connection; a base that is not net/http and
		// fails without saying so gets no retry: no proof.
		{name: "not watched: a failure that does not say nothing was sent: not retried", answer: lostThenOK(traceGetConn)},
		{name: "not watched: a dial error: retried", answer: testutil.FailsOnce(testutil.ErrRefused()), retried: true},
		// No evidence that nothing was sent.
		{name: "a base that reports nothing through httptrace: not retried", answer: lostThenOK(traceNothing)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &testutil.Base{Answer: tc.answer}
			tr := keysOn(b, nil)
			if tc.watched {
				tr.Policy.AttemptTimeout = time.Minute
			}
			req := testutil.NewRequest(t, http.MethodPost, "http://payments.test/charges", strings.NewReader("x"))
			if !tc.retried {
				_, err := tr.RoundTrip(req)
				gaveUp(t, err, ReasonUnsafe, 0)
				assert.Equal(t, 1, b.Attempts())
				return
			}
			resp, _ := sendOK(t, tr, req)
			assert.Equal(t, 2, Attempts(resp))
			sent := b.Requests()
			require.Len(t, sent, 2)
			assert.Equal(t, testutil.SHA256Hex([]byte("x")), sent[1].BodySHA256, "the retry carried the whole body")
		})
	}
}

// postOnce sends one POST of body through tr and returns the response with
// its body read and closed.
func postOnce(t *testing.T, tr http.RoundTripper, url string, body []byte, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	return sendOK(t, tr, req)
}

// A refused connection proves that the request never left the client, so
// even a POST without a key is sent again. The first dial goes to a
// loopback port nobody listens on.
func TestUnkeyedPOSTIsRetriedAfterADialError(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.Status(http.StatusOK).WithBody("charged"))
	base := testutil.LoopbackBase(t)
	dials := testutil.RefuseFirstDial(t, base)
	tr := keysOn(base, nil)
	ev := new(hookLog).watch(tr)

	resp, reply := postOnce(t, tr, srv.URL+"/charges", []byte(`{"amount":5}`), nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 2, Attempts(resp))
	assert.Equal(t, "charged", reply)
	require.Len(t, ev.retries, 1)
	assert.ErrorIs(t, ev.retries[0].Err, syscall.ECONNREFUSED)
	assert.EqualValues(t, 2, dials.Load())

	reqs := srv.Requests()
	require.Len(t, reqs, 1, "applied once")
	assert.Equal(t, testutil.SHA256Hex([]byte(`{"amount":5}`)), reqs[0].BodySHA256)
	assert.Empty(t, reqs[0].Header.Values("Idempotency-Key"), "keys are off: none was added")
}

// Policy.Idempotent declares requests idempotent per request (WithPolicy)
// or per host (Transport.Hosts): their POSTs are retried without a key;
// the other hosts' plain POSTs still are not.
func TestPolicyIdempotentDeclaresPostsIdempotent(t *testing.T) {
	for _, way := range []string{"WithPolicy", "Hosts", "neither"} {
		t.Run(way, func(t *testing.T) {
			var sent []http.Header
			base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
				sent = append(sent, req.Header.Clone())
				return testutil.ThenOK(http.StatusServiceUnavailable, nil)(n, req)
			}}
			tr, _ := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
			req := testutil.NewRequest(t, http.MethodPost, "http://search.test/q", strings.NewReader(`{"q":1}`))
			switch way {
			case "WithPolicy":
				req = req.WithContext(WithPolicy(req.Context(), Policy{Idempotent: true}))
			case "Hosts":
				tr.Hosts = map[string]Policy{"search.test": {Idempotent: true}}
			}
			resp, _ := sendOK(t, tr, req)
			if way == "neither" {
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a plain POST: not retried")
				assert.Len(t, sent, 1)
				return
			}
			assert.Equal(t, http.StatusOK, resp.StatusCode, "declared idempotent: retried")
			require.Len(t, sent, 2)
			for _, h := range sent {
				assert.Empty(t, h.Get("Idempotency-Key"), "no key added")
			}
		})
	}
}
