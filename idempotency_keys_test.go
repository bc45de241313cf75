package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
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

func newKeyRequest(t *testing.T, method, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://payments.test/charges", r)
	require.NoError(t, err)
	return req
}

// sameKeyOnEveryAttempt asserts that each attempt carried exactly one value
// of header, the same one, and returns it.
func sameKeyOnEveryAttempt(t *testing.T, b *testutil.Base, header string, attempts int) string {
	t.Helper()
	sent := b.Sent(header)
	require.Len(t, sent, attempts)
	for i, v := range sent {
		require.Len(t, v, 1, "attempt %d: values of %s", i+1, header)
		require.Equal(t, sent[0][0], v[0], "attempt %d carried another key", i+1)
	}
	return sent[0][0]
}

func TestKeysAreOffByDefault(t *testing.T) {
	b := &testutil.Base{Answer: testutil.Statuses(503, 200)}
	tr := &Transport{Base: b}
	resp, _ := sendOK(t, tr, newKeyRequest(t, http.MethodPost, `{"amount":1}`))

	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "an unkeyed POST that reached the server is not retried")
	assert.Equal(t, 1, b.Attempts())
	assert.Equal(t, [][]string{nil}, b.Sent("Idempotency-Key"))
	assert.Equal(t, [][]string{nil}, b.Sent("X-Idempotency-Key"))
}

func TestKeyIsARawUUIDv4SentOnEveryAttempt(t *testing.T) {
	b := &testutil.Base{Answer: testutil.Statuses(503, 502, 500, 200)}
	tr := keysOn(b, &IdempotencyKeys{})
	resp, _ := sendOK(t, tr, newKeyRequest(t, http.MethodPost, `{"amount":1}`))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 4, Attempts(resp))

	key := sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 4)
	u, err := uuid.Parse(key)
	require.NoError(t, err, "raw key %q", key)
	assert.Equal(t, uuid.Version(4), u.Version())
	assert.Equal(t, uuid.RFC4122, u.Variant())
	assert.Equal(t, u.String(), key, "the raw key is the UUID's canonical text, unquoted")
}

func TestEachLogicalRequestGetsItsOwnKey(t *testing.T) {
	b := &testutil.Base{}
	tr := keysOn(b, &IdempotencyKeys{})
	seen := map[string]bool{}
	for range 100 {
		sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))
	}
	for _, v := range b.Sent(defaultKeyHeader) {
		require.Len(t, v, 1)
		require.False(t, seen[v[0]], "key %s was used twice", v[0])
		seen[v[0]] = true
	}
}

func TestQuotedKeyIsAStructuredFieldString(t *testing.T) {
	t.Run("uuid", func(t *testing.T) {
		b := &testutil.Base{Answer: testutil.Statuses(503, 200)}
		tr := keysOn(b, &IdempotencyKeys{Quoted: true})
		sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))

		key := sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 2)
		require.True(t, len(key) == 38 && key[0] == '"' && key[37] == '"', "not an sf-string: %s", key)
		u, err := uuid.Parse(key[1:37])
		require.NoError(t, err)
		assert.Equal(t, uuid.Version(4), u.Version())
	})

	// RFC 9651 section 4.1.6: DQUOTE and backslash are escaped with a
	// backslash; other printable ASCII is copied.
	for _, tc := range []struct{ key, want string }{
		{`abc-123`, `"abc-123"`},
		{`a"b`, `"a\"b"`},
		{`a\b`, `"a\\b"`},
		{` ~!#$%&'()*+,-./:;<=>?@[]^_{|}`, `" ~!#$%&'()*+,-./:;<=>?@[]^_{|}"`},
	} {
		t.Run(tc.key, func(t *testing.T) {
			b := &testutil.Base{}
			tr := keysOn(b, &IdempotencyKeys{Quoted: true, Generate: func() (string, error) { return tc.key, nil }})
			sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))
			assert.Equal(t, [][]string{{tc.want}}, b.Sent(defaultKeyHeader))
		})
	}
}

func TestCustomKeyHeader(t *testing.T) {
	b := &testutil.Base{Answer: testutil.Statuses(503, 200)}
	tr := keysOn(b, &IdempotencyKeys{Header: "request-key"})
	sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))

	sameKeyOnEveryAttempt(t, b, "Request-Key", 2)
	assert.Equal(t, [][]string{nil, nil}, b.Sent(defaultKeyHeader), "the default header is not sent as well")

	t.Run("a caller's key under the custom name is kept", func(t *testing.T) {
		b := &testutil.Base{Answer: testutil.Statuses(503, 200)}
		tr := keysOn(b, &IdempotencyKeys{Header: "Request-Key"})
		req := newKeyRequest(t, http.MethodPost, "x")
		req.Header.Set("Request-Key", "order-7")
		sendOK(t, tr, req)
		assert.Equal(t, [][]string{{"order-7"}, {"order-7"}}, b.Sent("Request-Key"))
	})
}

func TestCustomGeneratorIsCalledOncePerLogicalRequest(t *testing.T) {
	var calls int
	gen := func() (string, error) {
		calls++
		return "order-42", nil
	}
	b := &testutil.Base{Answer: testutil.Statuses(503, 503, 503, 200)}
	tr := keysOn(b, &IdempotencyKeys{Generate: gen})
	sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))

	assert.Equal(t, 1, calls)
	assert.Equal(t, "order-42", sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 4))
}

func TestKeyGenerationFailureSendsNothing(t *testing.T) {
	boom := errors.New("entropy source unavailable")
	for _, tc := range []struct {
		name   string
		keys   IdempotencyKeys
		wantIs error // besides ErrIdempotencyKey
	}{
		{name: "generator error", keys: IdempotencyKeys{Generate: func() (string, error) { return "", boom }}, wantIs: boom},
		{name: "empty key", keys: IdempotencyKeys{Generate: func() (string, error) { return "", nil }}},
		{name: "line break in raw key", keys: IdempotencyKeys{Generate: func() (string, error) { return "a\r\nX-Evil: 1", nil }}},
		{name: "control byte in raw key", keys: IdempotencyKeys{Generate: func() (string, error) { return "a\x01b", nil }}},
		{name: "non-ASCII in quoted key", keys: IdempotencyKeys{Quoted: true, Generate: func() (string, error) { return "clé", nil }}},
		{name: "tab in quoted key", keys: IdempotencyKeys{Quoted: true, Generate: func() (string, error) { return "a\tb", nil }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &testutil.Base{}
			tr := keysOn(b, &tc.keys)
			body := testutil.NewCloseRecorder(strings.NewReader(`{"amount":1}`))
			req := newKeyRequest(t, http.MethodPost, "")
			req.Body, req.ContentLength = body, 12

			resp, err := tr.RoundTrip(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, ErrIdempotencyKey)
			if tc.wantIs != nil {
				require.ErrorIs(t, err, tc.wantIs)
			}
			assert.Zero(t, b.Attempts(), "nothing may be sent without a key")
			assert.EqualValues(t, 1, body.Closes(), "the caller's body is closed")
		})
	}
}

func TestCallersKeyIsNeverReplaced(t *testing.T) {
	for _, name := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		t.Run(name, func(t *testing.T) {
			generated := 0
			gen := func() (string, error) { generated++; return "generated", nil }
			b := &testutil.Base{Answer: testutil.Statuses(409, 503, 200)}
			tr := keysOn(b, &IdempotencyKeys{Generate: gen})
			req := newKeyRequest(t, http.MethodPost, "x")
			req.Header.Set(name, "caller-key-1")

			resp, _ := sendOK(t, tr, req)
			assert.Equal(t, 3, Attempts(resp), "a caller's key makes the POST retryable, 409 included")
			assert.Zero(t, generated, "no key is generated for a request that has one")
			assert.Equal(t, "caller-key-1", sameKeyOnEveryAttempt(t, b, name, 3))
			for i, h := range b.Sent("Idempotency-Key") {
				if name != "Idempotency-Key" {
					assert.Empty(t, h, "attempt %d: a second key was added", i+1)
				}
			}
		})
	}

	t.Run("with keys off", func(t *testing.T) {
		b := &testutil.Base{Answer: testutil.Statuses(409, 503, 200)}
		tr := keysOn(b, nil)
		req := newKeyRequest(t, http.MethodPatch, "x")
		req.Header.Set("Idempotency-Key", "caller-key-2")
		resp, _ := sendOK(t, tr, req)
		assert.Equal(t, 3, Attempts(resp), "the caller's own key makes the PATCH retryable")
		assert.Equal(t, "caller-key-2", sameKeyOnEveryAttempt(t, b, "Idempotency-Key", 3))
	})
}

func TestCallersRequestIsNotModified(t *testing.T) {
	b := &testutil.Base{Answer: testutil.Statuses(503, 200)}
	tr := keysOn(b, &IdempotencyKeys{})
	req := newKeyRequest(t, http.MethodPost, "x")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Trace", "t1")
	before := req.Header.Clone()

	sendOK(t, tr, req)
	assert.Equal(t, before, req.Header, "the caller's header map changed")
	sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 2)
	for i, sent := range b.Requests() {
		assert.NotSame(t, req, b.Request(i+1), "attempt %d sent the caller's request", i+1)
		header := sent.Header
		assert.Equal(t, "application/json", header.Get("Content-Type"), "attempt %d lost a header", i+1)
		assert.Equal(t, "t1", header.Get("X-Trace"), "attempt %d lost a header", i+1)
	}

	t.Run("nil header", func(t *testing.T) {
		b := &testutil.Base{}
		tr := keysOn(b, &IdempotencyKeys{})
		req := newKeyRequest(t, http.MethodPost, "")
		req.Header = nil
		sendOK(t, tr, req)
		assert.Nil(t, req.Header)
		sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 1)
	})
}

func TestKeyMethodsAreConfigurable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		methods []string
		keyed   map[string]bool
	}{
		{"default", nil, map[string]bool{"POST": true, "PATCH": true, "PUT": false, "GET": false, "DELETE": false}},
		{"POST only", []string{"POST"}, map[string]bool{"POST": true, "PATCH": false}},
		{"PATCH and PUT", []string{"PATCH", "PUT"}, map[string]bool{"POST": false, "PATCH": true, "PUT": true}},
		{"empty: the default", []string{}, map[string]bool{"POST": true, "PATCH": true, "PUT": false}},
	} {
		for method, keyed := range tc.keyed {
			t.Run(tc.name+"/"+method, func(t *testing.T) {
				b := &testutil.Base{}
				tr := keysOn(b, &IdempotencyKeys{Methods: tc.methods})
				sendOK(t, tr, newKeyRequest(t, method, ""))
				sent := b.Sent(defaultKeyHeader)
				require.Len(t, sent, 1)
				assert.Equal(t, keyed, len(sent[0]) == 1, "key on %s", method)
			})
		}
	}

	t.Run("a method without a key is not retried", func(t *testing.T) {
		b := &testutil.Base{Answer: testutil.Statuses(503, 200)}
		tr := keysOn(b, &IdempotencyKeys{Methods: []string{"POST"}})
		resp, _ := sendOK(t, tr, newKeyRequest(t, http.MethodPatch, "x"))
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, 1, b.Attempts())
	})
}

func TestKeyedRequestStatuses(t *testing.T) {
	for _, tc := range []struct {
		status   int
		attempts int
	}{
		{http.StatusConflict, 2},            // the original is still in progress
		{http.StatusServiceUnavailable, 2},  // transient, like any idempotent request
		{http.StatusBadRequest, 1},          // a malformed request stays malformed
		{http.StatusUnprocessableEntity, 1}, // the key was reused with another body
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			b := &testutil.Base{Answer: testutil.Statuses(tc.status, 200)}
			tr := keysOn(b, &IdempotencyKeys{})
			resp, _ := sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))
			assert.Equal(t, tc.attempts, b.Attempts())
			assert.Equal(t, tc.attempts, Attempts(resp))
		})
	}

	t.Run("409 without a key is not retried", func(t *testing.T) {
		b := &testutil.Base{Answer: testutil.Statuses(409, 200)}
		tr := keysOn(b, nil)
		resp, _ := sendOK(t, tr, newKeyRequest(t, http.MethodPut, ""))
		assert.Equal(t, http.StatusConflict, resp.StatusCode)
		assert.Equal(t, 1, b.Attempts())
	})
}

// errConnLost stands for a failure after the request may have been written.
var errConnLost = io.ErrUnexpectedEOF

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
			req := newKeyRequest(t, http.MethodPost, "x")
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

	t.Run("keyed: retried after the connection was lost", func(t *testing.T) {
		b := &testutil.Base{Answer: lostThenOK(traceWroteHeaders)}
		tr := keysOn(b, &IdempotencyKeys{})
		resp, _ := sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))
		assert.Equal(t, 2, Attempts(resp))
		sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 2)
	})
}

// wireHeads is a loopback server that answers the i-th request with the
// i-th of its statuses (the last repeats) and records the header lines of
// every request as they came off the wire: names spelled as sent, one line
// per value, before net/http's server canonicalizes and merges them.
type wireHeads struct {
	URL string

	mu       sync.Mutex
	codes    []int
	requests [][]wireLine // the header lines of each request, in arrival order
}

// wireLine is one header line: its name as sent and its value, trimmed.
type wireLine struct{ name, value string }

func (l wireLine) String() string { return l.name + ": " + l.value }

// wireConnKey is the context key of a connection's *wireConn.
type wireConnKey struct{}

// wireConn copies every byte read from a connection; done marks where the
// next request begins (requests on one connection are not pipelined).
type wireConn struct {
	net.Conn
	mu   sync.Mutex
	read []byte
	done int
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read = append(c.read, p[:n]...)
	c.mu.Unlock()
	return n, err
}

// nextHead returns the header lines of the request that begins at c.done;
// the request's head has been read whole by the time its handler runs.
func (c *wireConn) nextHead() ([]wireLine, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	raw := string(c.read[c.done:])
	head, _, ok := strings.Cut(raw, "\r\n\r\n")
	if !ok {
		return nil, fmt.Errorf("no complete request head in %q", raw)
	}
	lines := strings.Split(head, "\r\n")[1:] // after the request line
	out := make([]wireLine, 0, len(lines))
	for _, l := range lines {
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("malformed header line %q", l)
		}
		out = append(out, wireLine{name, strings.Trim(value, " \t")})
	}
	return out, nil
}

// markDone records that the request being served, body included, has been
// read whole: whatever comes next belongs to the next request.
func (c *wireConn) markDone() {
	c.mu.Lock()
	c.done = len(c.read)
	c.mu.Unlock()
}

type wireListener struct{ net.Listener }

func (l wireListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &wireConn{Conn: c}, nil
}

func newWireHeads(t *testing.T, codes ...int) *wireHeads {
	t.Helper()
	s := &wireHeads{codes: codes}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wc := r.Context().Value(wireConnKey{}).(*wireConn)
		head, err := wc.nextHead()
		if _, cerr := io.Copy(io.Discard, r.Body); cerr != nil && err == nil {
			err = cerr
		}
		wc.markDone()
		if err != nil {
			t.Error(err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		code := s.codes[min(len(s.requests), len(s.codes)-1)]
		s.requests = append(s.requests, head)
		s.mu.Unlock()
		w.WriteHeader(code)
	}))
	srv.Listener = wireListener{srv.Listener}
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, wireConnKey{}, c)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// linesNamed returns, of every request received, the lines whose name is
// one of names in any letter case.
func (s *wireHeads) linesNamed(names ...string) [][]wireLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]wireLine, len(s.requests))
	for i, head := range s.requests {
		out[i] = []wireLine{}
		for _, l := range head {
			if slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, l.name) }) {
				out[i] = append(out[i], l)
			}
		}
	}
	return out
}

// A caller's key is the key however the caller spelled its name (net/http
// sends a name set by direct map assignment as written) and whichever of
// its values is the non-empty one: the server receives exactly the key
// lines the caller set, on every attempt, and nothing is generated.
func TestCallersKeyInAnySpellingIsTheOnlyKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   *IdempotencyKeys // nil: keys off
		header http.Header      // as the caller set it, by direct assignment
		want   string           // the key
	}{
		{"canonical", &IdempotencyKeys{}, http.Header{"Idempotency-Key": {"k1"}}, "k1"},
		{"lower case", &IdempotencyKeys{}, http.Header{"idempotency-key": {"k1"}}, "k1"},
		{"upper case", &IdempotencyKeys{}, http.Header{"IDEMPOTENCY-KEY": {"k1"}}, "k1"},
		{"X- canonical", &IdempotencyKeys{}, http.Header{"X-Idempotency-Key": {"k1"}}, "k1"},
		{"X- lower case", &IdempotencyKeys{}, http.Header{"x-idempotency-key": {"k1"}}, "k1"},
		{"X- mixed case", &IdempotencyKeys{}, http.Header{"X-IDEMPOTENCY-key": {"k1"}}, "k1"},
		{"empty first value", &IdempotencyKeys{}, http.Header{"Idempotency-Key": {"", "k1"}}, "k1"},
		{"blank first value, lower case", &IdempotencyKeys{}, http.Header{"idempotency-key": {" \t", "k1"}}, "k1"},
		{"empty canonical, key in lower case", &IdempotencyKeys{},
			http.Header{"Idempotency-Key": {""}, "idempotency-key": {"k1"}}, "k1"},
		{"empty X-, key in upper case", &IdempotencyKeys{},
			http.Header{"X-Idempotency-Key": {""}, "X-IDEMPOTENCY-KEY": {"", "k1"}}, "k1"},
		{"configured header in lower case", &IdempotencyKeys{Header: "Request-Key"},
			http.Header{"request-key": {"k1"}}, "k1"},
		{"configured in lower case, sent in upper case", &IdempotencyKeys{Header: "request-key"},
			http.Header{"REQUEST-KEY": {"", "k1"}}, "k1"},
		{"keys off, lower case", nil, http.Header{"idempotency-key": {"k1"}}, "k1"},
		{"keys off, X- upper case after an empty value", nil, http.Header{"X-IDEMPOTENCY-KEY": {"", "k1"}}, "k1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newWireHeads(t, http.StatusServiceUnavailable, http.StatusOK)
			tr := keysOn(testutil.LoopbackBase(t), tc.keys)
			generated := 0
			names := []string{defaultKeyHeader, "X-Idempotency-Key"}
			if tc.keys != nil {
				tc.keys.Generate = func() (string, error) { generated++; return "generated", nil }
				if tc.keys.Header != "" {
					names = append(names, tc.keys.Header)
				}
			}
			req := testutil.NewRequest(t, http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount":5}`))
			var sent []wireLine // the key lines the caller set
			for name, values := range tc.header {
				req.Header[name] = values
				for _, v := range values {
					sent = append(sent, wireLine{name, strings.Trim(v, " \t")})
				}
			}

			resp, _ := sendOK(t, tr, req)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, 2, Attempts(resp), "a keyed POST is retried after a 503")
			assert.Zero(t, generated, "a key was generated for a request that had one")
			attempts := srv.linesNamed(names...)
			require.Len(t, attempts, 2)
			for i, lines := range attempts {
				assert.ElementsMatch(t, sent, lines, "attempt %d: the key lines received", i+1)
				var keys []string
				for _, l := range lines {
					if l.value != "" {
						keys = append(keys, l.value)
					}
				}
				assert.Equal(t, []string{tc.want}, keys, "attempt %d: exactly one key, the caller's", i+1)
			}
		})
	}
}

// A generator that returns a blank key gives no key: net/http trims the
// field value it sends, so the server gets an empty one and cannot
// deduplicate by it. The request is refused before anything is sent, as
// for an empty key, instead of being retried as if it carried a key (a
// POST applied twice). Found by the simulation (internal/sim).
func TestGeneratedBlankKeyIsRefused(t *testing.T) {
	for _, blank := range []string{" ", " \t "} {
		base := &testutil.Base{Answer: testutil.ResetByPeer} // after the request was written: it may be applied
		tr := keysOn(base, &IdempotencyKeys{Generate: func() (string, error) { return blank, nil }})
		req := testutil.NewRequest(t, http.MethodPost, "http://api.test/orders", strings.NewReader("{}"))
		_, err := tr.RoundTrip(req)
		assert.ErrorIs(t, err, ErrIdempotencyKey, "key %q", blank)
		assert.Zero(t, base.Attempts(), "key %q: nothing was sent", blank)
	}
}

// An empty Idempotency-Key is no key: a server cannot deduplicate by it, so
// the POST is not retried after it may have been applied.
func TestEmptyIdempotencyKeyIsNoKey(t *testing.T) {
	base := &testutil.Base{Answer: testutil.ThenOK(http.StatusServiceUnavailable, nil)}
	tr, ev := fakeTransport(base, Policy{Backoff: Constant(0)}, 0)
	req, err := http.NewRequest(http.MethodPost, "http://api.test/orders", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "")
	resp, _ := sendOK(t, tr, req)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, 1, base.Attempts())
	require.Equal(t, []Reason{ReasonUnsafe}, ev.reasons())
}

// Methods are case-sensitive (RFC 9110 section 9.1): "post" is not POST and
// gets no key from the default Methods.
func TestKeyMethodsAreCaseSensitive(t *testing.T) {
	k := (&IdempotencyKeys{}).compile()
	assert.True(t, k.applies(http.MethodPost))
	assert.False(t, k.applies("post"))
}
