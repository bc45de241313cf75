package retryhttp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/classify"
	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// ---- HTTP/2 errors, built in the shape net/http gives them ----
//
// A real REFUSED_STREAM or GOAWAY is impractical to provoke: net/http's
// HTTP/2 client retries both itself, with waits of seconds. These types have
// the field names and types of net/http's unexported http2StreamError and
// http2GoAwayError, and the stream error converts itself into any struct of
// its shape through errors.As, as net/http's does (net/http/h2_error.go).

type fakeHTTP2ErrCode uint32

type fakeHTTP2StreamError struct {
	StreamID uint32
	Code     fakeHTTP2ErrCode
	Cause    error
}

func (e fakeHTTP2StreamError) Error() string {
	return fmt.Sprintf("stream error: stream ID %d; %d", e.StreamID, e.Code)
}

func (e fakeHTTP2StreamError) As(target any) bool {
	dst := reflect.ValueOf(target).Elem()
	src := reflect.ValueOf(e)
	if dst.Kind() != reflect.Struct || dst.NumField() != src.NumField() {
		return false
	}
	for i := range src.NumField() {
		sf, df := src.Type().Field(i), dst.Type().Field(i)
		if sf.Name != df.Name || !sf.Type.ConvertibleTo(df.Type) {
			return false
		}
	}
	for i := range src.NumField() {
		dst.Field(i).Set(src.Field(i).Convert(dst.Field(i).Type()))
	}
	return true
}

type fakeHTTP2GoAwayError struct {
	LastStreamID uint32
	ErrCode      fakeHTTP2ErrCode
	DebugData    string
}

func (e fakeHTTP2GoAwayError) Error() string {
	return fmt.Sprintf("http2: server sent GOAWAY and closed the connection; LastStreamID=%d", e.LastStreamID)
}

// timeoutError is a net.Error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// ---- real errors, from a plain transport on loopback ----

func TestClassifyErr(t *testing.T) {
	get := func(t *testing.T, target string) *http.Request { return testutil.NewRequest(t, "GET", target, nil) }
	cases := []struct {
		name string
		err  func(t *testing.T) error
		want classify.Class
	}{
		{"connection refused", func(t *testing.T) error {
			return testutil.RoundTripErr(t, testutil.LoopbackBase(t), get(t, "http://"+testutil.ClosedAddr(t)+"/"))
		}, classify.Class{Transient: true, NothingSent: true}},
		{"EOF before response headers", func(t *testing.T) error {
			return testutil.RoundTripErr(t, testutil.LoopbackBase(t), get(t, testutil.NewServer(t, retryhttptest.Hangup()).URL))
		}, classify.Class{Transient: true}},
		{"connection reset", func(t *testing.T) error {
			return testutil.RoundTripErr(t, testutil.LoopbackBase(t), get(t, testutil.NewServer(t, retryhttptest.Reset()).URL))
		}, classify.Class{Transient: true}},
		{"response header timeout", func(t *testing.T) error {
			s := testutil.NewServer(t, retryhttptest.Hang())
			base := testutil.LoopbackBase(t)
			base.ResponseHeaderTimeout = 10 * time.Millisecond
			return testutil.RoundTripErr(t, base, get(t, s.URL))
		}, classify.Class{Transient: true}},
		{"certificate from an unknown authority", func(t *testing.T) error {
			return testutil.RoundTripErr(t, testutil.LoopbackBase(t), get(t, testutil.NewTLSServer(t).URL))
		}, classify.Class{}},
		{"certificate for another host", func(t *testing.T) error {
			s := testutil.NewTLSServer(t)
			base := s.Client().Transport.(*http.Transport).Clone()
			t.Cleanup(base.CloseIdleConnections)
			base.TLSClientConfig.ServerName = "other.example"
			return testutil.RoundTripErr(t, base, get(t, s.URL))
		}, classify.Class{}},
		{"unsupported scheme", func(t *testing.T) error {
			return testutil.RoundTripErr(t, testutil.LoopbackBase(t), get(t, "ftp://127.0.0.1/"))
		}, classify.Class{}},
		{"URL without host", func(t *testing.T) error {
			return testutil.RoundTripErr(t, testutil.LoopbackBase(t), &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Path: "/"}, Header: http.Header{}})
		}, classify.Class{}},
		{"URL with an invalid port", func(t *testing.T) error {
			return testutil.RoundTripErr(t, testutil.LoopbackBase(t), &http.Request{Method: "GET", URL: &url.URL{Scheme: "http", Host: "127.0.0.1:port"}, Header: http.Header{}})
		}, classify.Class{}},
		{"host not found", func(*testing.T) error {
			return &url.Error{Op: "Get", URL: "http://nx.example/", Err: &net.OpError{Op: "dial", Net: "tcp",
				Err: &net.DNSError{Err: "no such host", Name: "nx.example", IsNotFound: true}}}
		}, classify.Class{}},
		{"HTTP/2 REFUSED_STREAM", func(*testing.T) error {
			return fmt.Errorf("round trip: %w", fakeHTTP2StreamError{StreamID: 3, Code: 0x7})
		}, classify.Class{Transient: true, NothingSent: true}},
		{"HTTP/2 stream error CANCEL", func(*testing.T) error {
			return fakeHTTP2StreamError{StreamID: 3, Code: 0x8}
		}, classify.Class{Transient: true}},
		{"HTTP/2 GOAWAY", func(*testing.T) error {
			return &url.Error{Op: "Get", URL: "https://h2.example/", Err: fakeHTTP2GoAwayError{LastStreamID: 1, ErrCode: 0}}
		}, classify.Class{Transient: true}},
		{"HTTP/2 GOAWAY in a joined error", func(*testing.T) error {
			return errors.Join(errors.New("first"), fakeHTTP2GoAwayError{LastStreamID: 5})
		}, classify.Class{Transient: true}},
		{"unexpected EOF", func(*testing.T) error {
			return fmt.Errorf("reading headers: %w", io.ErrUnexpectedEOF)
		}, classify.Class{Transient: true}},
		{"timeout of a base's own making", func(*testing.T) error {
			return &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}
		}, classify.Class{Transient: true}},
		{"deadline of a base's own context", func(*testing.T) error {
			return fmt.Errorf("inner: %w", context.DeadlineExceeded)
		}, classify.Class{Transient: true}},
		{"anything else", func(*testing.T) error {
			return errors.New("retryhttp test: something unknown")
		}, classify.Class{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			assert.Equal(t, tc.want, classify.Of(err), "error %T: %v", err, err)
		})
	}
}

func TestPolicyStatusVerdict(t *testing.T) {
	defaults := (&Policy{}).compile()
	custom := (&Policy{Statuses: []int{404, 503}}).compile()
	none := (&Policy{Statuses: []int{}}).compile()
	cases := []struct {
		code                 int
		def, keyed, cus, non bool
	}{
		{200, false, false, false, false},
		{301, false, false, false, false},
		{400, false, false, false, false},
		{401, false, false, false, false},
		{403, false, false, false, false},
		{404, false, false, true, false},
		{408, true, true, false, false},
		{409, false, true, false, false}, // a keyed request's original is still in progress
		{422, false, false, false, false},
		{429, true, true, false, false},
		{500, true, true, false, false},
		{501, false, false, false, false},
		{502, true, true, false, false},
		{503, true, true, true, false},
		{504, true, true, false, false},
		{505, false, false, false, false},
		{-1, false, false, false, false},
		{999, false, false, false, false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.code), func(t *testing.T) {
			assert.Equal(t, tc.def, defaults.retryStatus(tc.code, false), "default policy")
			assert.Equal(t, tc.keyed, defaults.retryStatus(tc.code, true), "default policy, keyed request")
			assert.Equal(t, tc.cus, custom.retryStatus(tc.code, false), "Statuses 404, 503")
			assert.Equal(t, tc.non, none.retryStatus(tc.code, false), "empty Statuses")
		})
	}
}

func TestPolicyDefaults(t *testing.T) {
	p := (&Policy{}).compile()
	assert.Equal(t, 4, p.maxAttempts)
	assert.Equal(t, FullJitter{}, p.backoff)
	assert.Equal(t, 30*time.Second, p.maxRetryAfter)
	assert.EqualValues(t, 64<<10, p.maxBuffered)
	assert.Zero(t, p.attemptTimeout)
	assert.Nil(t, p.keys)
	assert.Equal(t, []int{408, 429, 500, 502, 503, 504}, DefaultStatuses())
}

// TestRetryVerdicts sends requests through a Transport allowing 3 attempts
// and checks which outcomes it retries: how many attempts each took and why
// it stopped.
func TestRetryVerdicts(t *testing.T) {
	type target struct {
		url string
		srv *retryhttptest.Server // the server the attempts reach, or nil
	}
	server := func(steps ...retryhttptest.Step) func(t *testing.T) target {
		return func(t *testing.T) target {
			s := testutil.NewServer(t, steps...)
			return target{s.URL, s}
		}
	}
	script := func(codes ...int) func(t *testing.T) target { return server(testutil.Answers(codes...)...) }
	fixed := func(u string) func(t *testing.T) target {
		return func(t *testing.T) target { return target{url: u} }
	}
	// hookSays overrides the verdict on attempts with an error or with the
	// given status, and keeps the default on others.
	hookSays := func(verdict bool, status int) func(*Attempt) bool {
		return func(a *Attempt) bool {
			if a.Err != nil || a.Response.StatusCode == status {
				return verdict
			}
			return a.Retry
		}
	}

	cases := []struct {
		name     string
		target   func(t *testing.T) target
		policy   Policy
		cancel   bool          // cancel the caller's context when the request arrives
		deadline time.Duration // the caller's deadline, if set
		want     int           // attempts
		reason   Reason        // 0: no give-up (a success or a non-retryable status)
		status   int           // the response's status; 0: an error
	}{
		{name: "200", target: script(200), want: 1, status: 200},
		{name: "503 retried", target: script(503), want: 3, reason: ReasonExhausted, status: 503},
		{name: "503 then 200", target: script(503, 200), want: 2, status: 200},
		{name: "408 retried", target: script(408, 200), want: 2, status: 200},
		{name: "429 retried", target: script(429, 200), want: 2, status: 200},
		{name: "500 retried", target: script(500, 200), want: 2, status: 200},
		{name: "502 retried", target: script(502, 200), want: 2, status: 200},
		{name: "504 retried", target: script(504, 200), want: 2, status: 200},
		{name: "400 returned", target: script(400, 200), want: 1, status: 400},
		{name: "404 returned", target: script(404, 200), want: 1, status: 404},
		{name: "409 returned", target: script(409, 200), want: 1, status: 409},
		{name: "422 returned", target: script(422, 200), want: 1, status: 422},
		{name: "501 returned", target: script(501, 200), want: 1, status: 501},
		{name: "505 returned", target: script(505, 200), want: 1, status: 505},
		{name: "custom statuses retry 404", target: script(404, 200), policy: Policy{Statuses: []int{404}}, want: 2, status: 200},
		{name: "empty statuses retry nothing", target: script(503, 200), policy: Policy{Statuses: []int{}}, want: 1, status: 503},
		{name: "connection refused", target: func(t *testing.T) target { return target{url: "http://" + testutil.ClosedAddr(t) + "/"} },
			want: 3, reason: ReasonExhausted},
		{name: "EOF before headers", target: server(retryhttptest.Hangup()), want: 3, reason: ReasonExhausted},
		{name: "connection reset", target: server(retryhttptest.Reset()), want: 3, reason: ReasonExhausted},
		{name: "untrusted certificate", target: func(t *testing.T) target { return target{url: testutil.NewTLSServer(t).URL} },
			want: 1, reason: ReasonNotTransient},
		{name: "unsupported scheme", target: fixed("ftp://127.0.0.1/"), want: 1, reason: ReasonNotTransient},
		{name: "URL without host", target: fixed("http:///path"), want: 1, reason: ReasonNotTransient},
		{name: "caller cancels", target: server(retryhttptest.Hang()), cancel: true, want: 1, reason: ReasonCanceled},
		{name: "caller deadline", target: server(retryhttptest.Hang()), deadline: 20 * time.Millisecond, want: 1, reason: ReasonDeadline},
		{name: "hook refuses a 503", target: script(503, 200), policy: Policy{Retryable: hookSays(false, 503)},
			want: 1, reason: ReasonNotTransient, status: 503},
		{name: "hook retries a 404", target: script(404, 404, 200), policy: Policy{Retryable: hookSays(true, 404)}, want: 3, status: 200},
		{name: "hook retries a certificate error", target: func(t *testing.T) target { return target{url: testutil.NewTLSServer(t).URL} },
			policy: Policy{Retryable: hookSays(true, 0)}, want: 3, reason: ReasonExhausted},
		{name: "hook refuses a refused connection", target: func(t *testing.T) target { return target{url: "http://" + testutil.ClosedAddr(t) + "/"} },
			policy: Policy{Retryable: hookSays(false, 0)}, want: 1, reason: ReasonNotTransient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := tc.target(t)
			p := tc.policy
			p.MaxAttempts = 3
			tr := newTestTransport(t, p)
			g := new(hookLog).watch(tr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.deadline > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			if tc.cancel {
				go func() {
					if tg.srv.WaitRequests(ctx, 1) == nil {
						cancel()
					}
				}()
			}
			req := testutil.NewRequest(t, "GET", tg.url, nil).WithContext(ctx)

			resp, err := testutil.RoundTrip(t, tr, req)

			var attempts int
			if tc.status != 0 {
				require.NoError(t, err)
				assert.Equal(t, tc.status, resp.StatusCode)
				attempts = Attempts(resp)
			} else {
				attempts = gaveUp(t, err, tc.reason, 0).Attempts
			}
			assert.Equal(t, tc.want, attempts, "attempts")
			assert.Len(t, g.retries, tc.want-1, "retries reported to OnRetry")
			if tg.srv != nil {
				assert.Len(t, tg.srv.Requests(), tc.want, "attempts that reached the server")
			}
			if tc.reason != 0 {
				assert.Equal(t, []Reason{tc.reason}, g.reasons())
			} else {
				assert.Empty(t, g.reasons())
			}
			switch tc.reason {
			case ReasonCanceled:
				assert.ErrorIs(t, err, context.Canceled)
			case ReasonDeadline:
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			}
		})
	}
}

// TestMethods checks which methods are retried after a 503 that reached the
// server, and after a refused connection, which reached nothing.
func TestMethods(t *testing.T) {
	cases := []struct {
		method string
		header string // an idempotency key header set by the caller
		want   int    // attempts on a 503
	}{
		{method: "GET", want: 3},
		{method: "HEAD", want: 3},
		{method: "OPTIONS", want: 3},
		{method: "TRACE", want: 3},
		{method: "PUT", want: 3},
		{method: "DELETE", want: 3},
		{method: "POST", want: 1},
		{method: "PATCH", want: 1},
		{method: "POST", header: "Idempotency-Key", want: 3},
		{method: "POST", header: "X-Idempotency-Key", want: 3},
		{method: "PATCH", header: "Idempotency-Key", want: 3},
		{method: "PATCH", header: "X-Idempotency-Key", want: 3},
	}
	for _, tc := range cases {
		name := tc.method
		if tc.header != "" {
			name += " with " + tc.header
		}
		t.Run(name+" on 503", func(t *testing.T) {
			s := testutil.NewServer(t, retryhttptest.Status(503))
			tr := newTestTransport(t, Policy{MaxAttempts: 3})
			g := new(hookLog).watch(tr)
			req := testutil.NewRequest(t, tc.method, s.URL, nil)
			if tc.header != "" {
				req.Header.Set(tc.header, "key-1")
			}

			resp, err := testutil.RoundTrip(t, tr, req)

			require.NoError(t, err)
			assert.Equal(t, 503, resp.StatusCode, "the last 503 comes back as is")
			reqs := s.Requests()
			assert.Len(t, reqs, tc.want)
			assert.Equal(t, tc.want, Attempts(resp))
			for _, r := range reqs {
				assert.Equal(t, tc.method, r.Method)
				if tc.header != "" {
					assert.Equal(t, "key-1", r.Header.Get(tc.header), "the caller's key on every attempt")
				}
			}
			wantReason := ReasonExhausted
			if tc.want == 1 {
				wantReason = ReasonUnsafe
			}
			assert.Equal(t, []Reason{wantReason}, g.reasons())
		})
		if tc.header != "" {
			continue
		}
		t.Run(name+" on connection refused", func(t *testing.T) {
			tr := newTestTransport(t, Policy{MaxAttempts: 3})
			_, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, tc.method, "http://"+testutil.ClosedAddr(t)+"/", nil))
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, 3, e.Attempts, "nothing was sent, so any method is retried")
			assert.Equal(t, ReasonExhausted, e.Reason)
			assert.ErrorIs(t, err, syscall.ECONNREFUSED)
		})
	}
	for name, drop := range map[string]retryhttptest.Step{"closed": retryhttptest.Hangup(), "reset": retryhttptest.Reset()} {
		t.Run("POST on a dropped connection ("+name+")", func(t *testing.T) {
			s := testutil.NewServer(t, drop)
			tr := newTestTransport(t, Policy{MaxAttempts: 3})
			_, err := testutil.RoundTrip(t, tr, testutil.NewRequest(t, "POST", s.URL, nil))
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, ReasonUnsafe, e.Reason, "the request reached the server")
			assert.Equal(t, 1, e.Attempts)
			assert.Len(t, s.Requests(), 1)
		})
	}
}

func TestIdempotentMethods(t *testing.T) {
	for m, want := range map[string]bool{
		"GET": true, "HEAD": true, "OPTIONS": true, "TRACE": true, "PUT": true, "DELETE": true,
		"":         true,                    // net/http's way of saying GET
		"GET_0RTT": true, "HEAD_0RTT": true, // quic-go's, that may go in early data
		"POST": false, "PATCH": false, "CONNECT": false, "PROPFIND": false, "get": false,
	} {
		assert.Equal(t, want, idempotent(m), "method %q", m)
	}
}

// A server's X-Should-Retry (or Stripe's Stripe-Should-Retry) verdict
// decides, within the method and key rules: false stops a retry the status
// would get, true asks for one the status would not.
func TestServerSaysWhetherToRetry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		code     int
		verdict  string
		attempts int
		reason   Reason // of the give-up, 0 if none
		field    string // the field of the verdict; "" for X-Should-Retry
	}{
		{"false stops a 503", http.MethodGet, 503, "false", 1, ReasonServer, ""},
		{"FALSE, any case", http.MethodGet, 503, " FALSE ", 1, ReasonServer, ""},
		{"true retries a 400", http.MethodGet, 400, "true", 3, ReasonExhausted, ""},
		{"true on a 503: retried as it would be", http.MethodGet, 503, "true", 3, ReasonExhausted, ""},
		{"true never retries a success", http.MethodGet, 200, "true", 1, 0, ""},
		{"false on a 404: nothing to stop", http.MethodGet, 404, "false", 1, 0, ""},
		{"true does not make a POST safe", http.MethodPost, 500, "true", 1, ReasonUnsafe, ""},
		{"anything else is no verdict", http.MethodGet, 503, "maybe", 3, ReasonExhausted, ""},
		{"Stripe's false stops a 500", http.MethodGet, 500, "false", 1, ReasonServer, "Stripe-Should-Retry"},
		{"Stripe's true retries a 400", http.MethodGet, 400, "true", 3, ReasonExhausted, "Stripe-Should-Retry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field := cmp.Or(tc.field, "X-Should-Retry")
			base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
				return testutil.Response(req, tc.code, http.Header{field: {tc.verdict}}, "body"), nil
			}}
			tr, ev := fakeTransport(base, Policy{MaxAttempts: 3, Backoff: Constant(0)}, 0)
			resp, err := tr.RoundTrip(testutil.NewRequest(t, tc.method, "http://api.test/", nil))
			require.NoError(t, err)
			assert.Equal(t, tc.code, resp.StatusCode)
			assert.Equal(t, "body", testutil.ReadBody(t, resp), "the last response, whole")
			assert.Equal(t, tc.attempts, base.Attempts())
			if tc.reason == 0 {
				assert.Empty(t, ev.giveUps)
			} else {
				assert.Equal(t, []Reason{tc.reason}, ev.reasons())
			}
		})
	}
}

// MaxAttempts 1 means no retries, not no policy: the attempt timeout still
// bounds the attempt, keys are still added, and the give-up is reported.
func TestSingleAttemptPolicyStillApplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &testutil.Base{Answer: testutil.Hang}
		tr, ev := fakeTransport(base, Policy{MaxAttempts: 1, AttemptTimeout: 2 * time.Second}, 0)
		start := time.Now()
		_, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		assert.ErrorIs(t, err, ErrAttemptTimeout)
		assert.Equal(t, 2*time.Second, time.Since(start))
		require.Equal(t, []Reason{ReasonNoRetries}, ev.reasons())
	})
	var key string
	base := &testutil.Base{Answer: func(_ int, req *http.Request) (*http.Response, error) {
		key = req.Header.Get(defaultKeyHeader)
		return testutil.Response(req, http.StatusCreated, nil, ""), nil
	}}
	// No key where no retry can follow: net/http would resend a keyed POST
	// by itself when a reused connection closes under it.
	for _, tc := range []struct {
		name string
		p    Policy
		ctx  context.Context
		key  bool
	}{
		{"MaxAttempts 1", Policy{MaxAttempts: 1, IdempotencyKeys: &IdempotencyKeys{}}, t.Context(), false},
		{"WithPolicy MaxAttempts 1", Policy{IdempotencyKeys: &IdempotencyKeys{}}, WithPolicy(t.Context(), Policy{MaxAttempts: 1}), false},
		{"retries on", Policy{IdempotencyKeys: &IdempotencyKeys{}}, t.Context(), true},
	} {
		key = ""
		tr, _ := fakeTransport(base, tc.p, 0)
		req, err := http.NewRequestWithContext(tc.ctx, http.MethodPost, "http://api.test/orders", strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err)
		testutil.ReadBody(t, resp)
		assert.Equal(t, tc.key, key != "", "%s: key %q", tc.name, key)
	}
}

// With retries off, a request that fails gives up with ReasonNoRetries,
// whatever the failure: a retryable status, a POST's EOF, an error not
// worth another attempt, a server's "do not retry".
func TestRetriesOffGiveUpWithNoRetries(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		answer func(int, *http.Request) (*http.Response, error)
	}{
		{"503", http.MethodGet, testutil.Statuses(503)},
		{"POST's EOF", http.MethodPost, func(int, *http.Request) (*http.Response, error) { return nil, io.EOF }},
		{"not transient", http.MethodGet, func(int, *http.Request) (*http.Response, error) {
			return nil, errors.New("not a network error")
		}},
		{"X-Should-Retry: false", http.MethodGet, func(_ int, req *http.Request) (*http.Response, error) {
			return testutil.Response(req, 503, http.Header{"X-Should-Retry": {"false"}}, ""), nil
		}},
	} {
		for _, off := range []string{"MaxAttempts 1", "WithPolicy MaxAttempts 1"} {
			t.Run(tc.name+"/"+off, func(t *testing.T) {
				p, ctx := Policy{MaxAttempts: 1}, t.Context()
				if off == "WithPolicy MaxAttempts 1" {
					p, ctx = Policy{}, WithPolicy(ctx, Policy{MaxAttempts: 1})
				}
				tr, ev := fakeTransport(&testutil.Base{Answer: tc.answer}, p, 0)
				req, err := http.NewRequestWithContext(ctx, tc.method, "http://api.test/", nil)
				require.NoError(t, err)
				resp, err := tr.RoundTrip(req)
				if err == nil {
					testutil.ReadBody(t, resp)
				}
				assert.Equal(t, []Reason{ReasonNoRetries}, ev.reasons())
			})
		}
	}
}
