package retryhttp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
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

// sameKeyOnEveryAttempt asserts that each of attempts attempts carried
// exactly one value of header, the same non-empty one, and returns it.
func sameKeyOnEveryAttempt(t *testing.T, b *testutil.Base, header string, attempts int) string {
	t.Helper()
	sent := b.Sent(header)
	require.Len(t, sent, attempts)
	for i, v := range sent {
		require.Len(t, v, 1, "attempt %d: values of %s", i+1, header)
		require.NotEmpty(t, v[0], "attempt %d: an empty key", i+1)
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
			tr := keysOn(b, &IdempotencyKeys{Quoted: true, Generate: func(*http.Request) (string, error) { return tc.key, nil }})
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
}

func TestCustomGeneratorIsCalledOncePerLogicalRequest(t *testing.T) {
	var calls int
	gen := func(*http.Request) (string, error) {
		calls++
		return "order-42", nil
	}
	b := &testutil.Base{Answer: testutil.Statuses(503, 503, 503, 200)}
	tr := keysOn(b, &IdempotencyKeys{Generate: gen})
	sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))

	assert.Equal(t, 1, calls)
	assert.Equal(t, "order-42", sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 4))
}

// A key that cannot be generated, or that is not a valid key, stops the
// request before anything is sent, and the caller's body is closed. A blank
// key is no key, as an empty one is: net/http trims the field value it
// sends, so the server would receive an empty key and could not deduplicate
// by it. Sent, the request would be retried as if it carried a key, and a
// POST could be applied twice.
func TestKeyGenerationFailureSendsNothing(t *testing.T) {
	boom := errors.New("entropy source unavailable")
	for _, tc := range []struct {
		name   string
		keys   IdempotencyKeys
		wantIs error // besides ErrIdempotencyKey
	}{
		{name: "generator error", keys: IdempotencyKeys{Generate: func(*http.Request) (string, error) { return "", boom }}, wantIs: boom},
		{name: "empty key", keys: IdempotencyKeys{Generate: func(*http.Request) (string, error) { return "", nil }}},
		{name: "blank key", keys: IdempotencyKeys{Generate: func(*http.Request) (string, error) { return " ", nil }}},
		{name: "blank key with a tab", keys: IdempotencyKeys{Generate: func(*http.Request) (string, error) { return " \t ", nil }}},
		{name: "blank quoted key", keys: IdempotencyKeys{Quoted: true, Generate: func(*http.Request) (string, error) { return " ", nil }}},
		{name: "line break in raw key", keys: IdempotencyKeys{Generate: func(*http.Request) (string, error) { return "a\r\nX-Evil: 1", nil }}},
		{name: "control byte in raw key", keys: IdempotencyKeys{Generate: func(*http.Request) (string, error) { return "a\x01b", nil }}},
		{name: "non-ASCII in quoted key", keys: IdempotencyKeys{Quoted: true, Generate: func(*http.Request) (string, error) { return "clé", nil }}},
		{name: "tab in quoted key", keys: IdempotencyKeys{Quoted: true, Generate: func(*http.Request) (string, error) { return "a\tb", nil }}},
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

// Methods lists the methods that get a key, POST and PATCH by default.
// Methods are case-sensitive (RFC 9110 section 9.1): "post" is not POST and
// gets no key. A method without a key is not retried once sent.
func TestKeyMethodsAreConfigurable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		methods []string
		keyed   map[string]bool
	}{
		{"default", nil, map[string]bool{"POST": true, "PATCH": true, "PUT": false, "GET": false, "DELETE": false, "post": false, "Patch": false}},
		{"POST only", []string{"POST"}, map[string]bool{"POST": true, "PATCH": false, "post": false}},
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

// A keyed request is retried after a 409, which says the original is still
// being processed, and after a transient status, with the same key. It is
// not retried after a 400 or a 422, which say the request itself is wrong
// (a 422: the key was used with another request), and that response goes
// back to the caller. Without a key, a 409 is not retried.
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
			resp, _ := sendOK(t, tr, newKeyRequest(t, http.MethodPost, `{"amount":5}`))
			want := http.StatusOK
			if tc.attempts == 1 {
				want = tc.status // not retried: the response goes back to the caller
			}
			assert.Equal(t, want, resp.StatusCode)
			assert.Equal(t, tc.attempts, b.Attempts())
			assert.Equal(t, tc.attempts, Attempts(resp))
			sameKeyOnEveryAttempt(t, b, defaultKeyHeader, tc.attempts)
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

// A Statuses list the caller sets is the whole list: the 409 rule for
// keyed requests comes with the default statuses, not with a list that
// leaves 409 out (an empty one retries errors only). Found by review,
// then by the simulation (internal/sim, checkStatuses).
func TestAnExplicitStatusesListIsTheWholeList(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		attempts int
	}{{"nil", nil, 2}, {"empty", []int{}, 1}, {"[503]", []int{503}, 1}, {"[409]", []int{409}, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			base := &testutil.Base{Answer: testutil.Statuses(http.StatusConflict, http.StatusOK)}
			tr := keysOn(base, &IdempotencyKeys{})
			tr.Policy.Statuses = tc.statuses
			req := testutil.NewRequest(t, http.MethodPost, "http://api.test/charges", strings.NewReader("amount=5"))
			sendOK(t, tr, req)
			assert.Equal(t, tc.attempts, base.Attempts())
		})
	}
}

// bodyFaults is a server that resets the connection on a request's first
// arrival (after reading its body), answers 503 to the second and 200 to
// the third.
func bodyFaults(t *testing.T) *retryhttptest.Server {
	return testutil.NewServer(t, retryhttptest.Reset(), retryhttptest.Status(503), retryhttptest.Status(200))
}

// bodiesReceived returns the SHA-256 of every body srv received.
func bodiesReceived(srv *retryhttptest.Server) []string {
	var sums []string
	for _, r := range srv.Requests() {
		sums = append(sums, r.BodySHA256)
	}
	return sums
}

// Every attempt of a keyed POST sends the whole body, the same, whether it
// is replayed through GetBody or from the Transport's buffer. A stream of
// unknown length, which neither can send again, is not retried although it
// carries a key.
func TestKeyedBodyIsIdenticalOnEveryAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		wrap func(*http.Request) // how the caller built the body
	}{
		{"GetBody, 200 KiB", testutil.Payload(200 << 10), func(*http.Request) {}},
		{"buffered, 48 KiB", testutil.Payload(48 << 10), func(r *http.Request) { r.GetBody = nil; r.Body = io.NopCloser(r.Body) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := bodyFaults(t)
			tr := keysOn(testutil.LoopbackBase(t), &IdempotencyKeys{})

			req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(tc.body))
			require.NoError(t, err)
			tc.wrap(req)
			resp, _ := sendOK(t, tr, req)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, 3, Attempts(resp))

			sums := bodiesReceived(srv)
			require.Len(t, sums, 3)
			for i, sum := range sums {
				assert.Equal(t, testutil.SHA256Hex(tc.body), sum, "attempt %d sent another body", i+1)
			}
		})
	}

	t.Run("stream of unknown length", func(t *testing.T) {
		srv := bodyFaults(t)
		tr := keysOn(testutil.LoopbackBase(t), &IdempotencyKeys{})

		body := testutil.Payload(1 << 10)
		req, err := http.NewRequest(http.MethodPost, srv.URL, io.MultiReader(bytes.NewReader(body)))
		require.NoError(t, err)
		require.EqualValues(t, 0, req.ContentLength)
		_, err = tr.RoundTrip(req)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, ReasonUnsafe, e.Reason, "a body read once cannot be sent again")
		assert.Equal(t, []string{testutil.SHA256Hex(body)}, bodiesReceived(srv))
	})
}

// wireHeads is a loopback server that answers the i-th request with the
// i-th of its statuses (the last repeats), or closes the connection without
// a response where that status is wireDrop, and records the header lines of
// every request as they came off the wire: names spelled as sent, one line
// per value, before net/http's server canonicalizes and merges them.
type wireHeads struct {
	URL string

	mu       sync.Mutex
	codes    []int
	requests [][]wireLine // the header lines of each request, in arrival order
}

// wireDrop is the status with which wireHeads closes the connection, after
// reading the whole request, instead of answering: the client cannot know
// whether the request was applied.
const wireDrop = 0

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
		if code != wireDrop {
			w.WriteHeader(code)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err) // HTTP/1.1 loopback server: hijacking is supported
			return
		}
		conn.Close()
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
// sends a name set by direct map assignment as written), whichever of its
// values is the non-empty one, and whether keys are on or off: the server
// receives exactly the key lines the caller set, on every attempt, and
// nothing is generated. The key makes a POST or a PATCH retryable, after a
// connection lost once the request was sent (it may have been applied) as
// after a 409.
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
		{"configured header", &IdempotencyKeys{Header: "Request-Key"}, http.Header{"Request-Key": {"k1"}}, "k1"},
		{"configured header in lower case", &IdempotencyKeys{Header: "Request-Key"},
			http.Header{"request-key": {"k1"}}, "k1"},
		{"configured in lower case, sent in upper case", &IdempotencyKeys{Header: "request-key"},
			http.Header{"REQUEST-KEY": {"", "k1"}}, "k1"},
		{"keys off", nil, http.Header{"Idempotency-Key": {"k1"}}, "k1"},
		{"keys off, X-", nil, http.Header{"X-Idempotency-Key": {"k1"}}, "k1"},
		{"keys off, lower case", nil, http.Header{"idempotency-key": {"k1"}}, "k1"},
		{"keys off, X- upper case after an empty value", nil, http.Header{"X-IDEMPOTENCY-KEY": {"", "k1"}}, "k1"},
	} {
		for _, method := range []string{http.MethodPost, http.MethodPatch} {
			t.Run(method+" "+tc.name, func(t *testing.T) {
				callersKeyIsTheOnlyKey(t, method, tc.keys, tc.header, tc.want)
			})
		}
	}
}

// callersKeyIsTheOnlyKey sends a request of method with the caller's key
// fields header through a Transport with keys (nil: off) to a server that
// drops the first attempt's connection, answers 409 to the second and 200
// to the third. It asserts that the request succeeded on the third attempt,
// that no key was generated, and that every attempt carried exactly the key
// lines of header and one key, want.
func callersKeyIsTheOnlyKey(t *testing.T, method string, keys *IdempotencyKeys, header http.Header, want string) {
	t.Helper()
	srv := newWireHeads(t, wireDrop, http.StatusConflict, http.StatusOK)
	generated := 0
	names := []string{defaultKeyHeader, "X-Idempotency-Key"}
	if keys != nil {
		keys = &IdempotencyKeys{Header: keys.Header, Generate: func(*http.Request) (string, error) { generated++; return "generated", nil }}
		if keys.Header != "" {
			names = append(names, keys.Header)
		}
	}
	tr := keysOn(testutil.LoopbackBase(t), keys)
	req := testutil.NewRequest(t, method, srv.URL+"/charges", strings.NewReader(`{"amount":5}`))
	var sent []wireLine // the key lines the caller set
	for name, values := range header {
		req.Header[name] = values
		for _, v := range values {
			sent = append(sent, wireLine{name, strings.Trim(v, " \t")})
		}
	}

	resp, _ := sendOK(t, tr, req)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 3, Attempts(resp), "retried after the lost connection and after the 409")
	assert.Zero(t, generated, "a key was generated for a request that had one")
	attempts := srv.linesNamed(names...)
	require.Len(t, attempts, 3, "requests received")
	for i, lines := range attempts {
		assert.ElementsMatch(t, sent, lines, "attempt %d: the key lines received", i+1)
		var got []string
		for _, l := range lines {
			if l.value != "" {
				got = append(got, l.value)
			}
		}
		assert.Equal(t, []string{want}, got, "attempt %d: exactly one key, the caller's", i+1)
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

// A caller may declare a POST or PATCH idempotent as net/http's Transport
// lets it: an Idempotency-Key or X-Idempotency-Key field present with a nil
// value. It is then retried, with no key sent nor added; a plain POST is
// still never retried after it was sent.
func TestAPostDeclaredIdempotentByANilKeyIsRetried(t *testing.T) {
	for _, name := range []string{"Idempotency-Key", "X-Idempotency-Key", ""} {
		for _, keys := range []*IdempotencyKeys{nil, {}} {
			t.Run(fmt.Sprintf("%q, keys %v", name, keys != nil), func(t *testing.T) {
				var sent []http.Header
				base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
					sent = append(sent, req.Header.Clone())
					return testutil.ThenOK(http.StatusServiceUnavailable, nil)(n, req)
				}}
				tr, _ := fakeTransport(base, Policy{Backoff: Constant(0), IdempotencyKeys: keys}, 0)
				req := testutil.NewRequest(t, http.MethodPost, "http://api.test/search", strings.NewReader(`{"q":1}`))
				if name != "" {
					req.Header[name] = nil
				}
				resp, _ := sendOK(t, tr, req)
				switch {
				case name != "":
					assert.Equal(t, http.StatusOK, resp.StatusCode, "declared idempotent: retried")
					require.Len(t, sent, 2)
					for _, h := range sent {
						assert.Empty(t, h.Get("Idempotency-Key"), "no key added")
						assert.Empty(t, h.Get("X-Idempotency-Key"))
					}
				case keys != nil:
					assert.Equal(t, http.StatusOK, resp.StatusCode, "keyed by the Transport: retried")
				default:
					assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "a plain POST: not retried")
					assert.Len(t, sent, 1)
				}
			})
		}
	}
}

// payments is a loopback server that honours idempotency keys the way a
// payments API does: the first request with a key applies its effect (a
// charge) and stores the reply; a repeat of the key gets the stored reply
// and applies nothing. A request without a key applies its effect every
// time. It records every arrival.
//
// It injects the worst fault a client can meet: on the first arrival of
// each logical call (named by the test's X-Call header) it applies the
// effect and then drops the connection without a response, so the client
// cannot know whether the charge happened. (retryhttptest.ApplyThenDrop
// plays this fault by the order of arrival; the calls here arrive
// interleaved, so the server tracks each call itself.)
type payments struct {
	mu       sync.Mutex
	effects  int
	arrivals []paymentArrival
	calls    map[string]int    // arrivals per logical call
	replies  map[string]string // stored reply per key
}

type paymentArrival struct {
	call    string   // X-Call: the logical call
	key     string   // Idempotency-Key as received, "" if absent
	xkey    string   // X-Idempotency-Key as received, "" if absent
	keys    int      // number of key header fields received (both names)
	bodySum [32]byte // SHA-256 of the body received
	applied bool     // this arrival applied an effect
	dropped bool     // the connection was dropped before a reply
}

func (s *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a := paymentArrival{
		call:    r.Header.Get("X-Call"),
		key:     r.Header.Get("Idempotency-Key"),
		xkey:    r.Header.Get("X-Idempotency-Key"),
		keys:    len(r.Header["Idempotency-Key"]) + len(r.Header["X-Idempotency-Key"]),
		bodySum: sha256.Sum256(body),
	}
	key := a.key
	if key == "" {
		key = a.xkey
	}

	s.mu.Lock()
	s.calls[a.call]++
	first := s.calls[a.call] == 1
	reply, repeat := s.replies[key]
	if key == "" || !repeat {
		s.effects++
		a.applied = true
		reply = "charge " + strconv.Itoa(s.effects) + " for call " + a.call
		if key != "" {
			s.replies[key] = reply
		}
	}
	a.dropped = first
	s.arrivals = append(s.arrivals, a)
	s.mu.Unlock()

	if a.dropped {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err) // HTTP/1.1 loopback server: hijacking is supported
		}
		conn.Close()
		return
	}
	io.WriteString(w, reply)
}

// snapshot returns the effects applied and a copy of the arrivals.
func (s *payments) snapshot() (int, []paymentArrival) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.effects, append([]paymentArrival(nil), s.arrivals...)
}

// byCall groups arrivals by logical call.
func byCall(arrivals []paymentArrival) map[string][]paymentArrival {
	m := make(map[string][]paymentArrival)
	for _, a := range arrivals {
		m[a.call] = append(m[a.call], a)
	}
	return m
}

// startPayments starts a payments server on loopback and returns it, its
// URL and a base transport to reach it; all are cleaned up when the test
// ends.
func startPayments(t *testing.T) (*payments, string, *http.Transport) {
	t.Helper()
	s := &payments{calls: map[string]int{}, replies: map[string]string{}}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	base := srv.Client().Transport.(*http.Transport).Clone()
	t.Cleanup(base.CloseIdleConnections)
	return s, srv.URL, base
}

// callOutcome is what one logical POST returned to its caller.
type callOutcome struct {
	reply    string
	attempts int
	err      error
}

// postCalls makes n logical POSTs to url through client, at most workers at
// a time. Call i carries "X-Call: i" and a body naming i.
func postCalls(t *testing.T, client *http.Client, url string, n, workers int) []callOutcome {
	t.Helper()
	out := make([]callOutcome, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				body := fmt.Sprintf(`{"call":%d,"amount_cents":1999,"currency":"EUR"}`, i)
				req, err := http.NewRequest(http.MethodPost, url+"/charges", bytes.NewBufferString(body))
				if err != nil {
					out[i].err = err
					continue
				}
				req.Header.Set("X-Call", strconv.Itoa(i))
				resp, err := client.Do(req)
				if err != nil {
					out[i].err = err
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				out[i] = callOutcome{reply: string(b), attempts: Attempts(resp), err: err}
				if err == nil && resp.StatusCode != http.StatusOK {
					out[i].err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	return out
}

const (
	lostResponseCalls   = 1000
	lostResponseWorkers = 8
)

// TestLostResponsesWithKeysApplyEachChargeOnce is the proof of exactly-once
// effects: every first attempt is applied by the server and its response is
// lost; with idempotency keys every call is retried with its key, succeeds,
// and the server applies exactly one charge per call.
//
// Over pooled connections net/http itself retries a keyed request once when
// a reused connection breaks before the response (it recognises the
// Idempotency-Key field), so some retries happen below the Transport; with a
// new connection per attempt every retry is the Transport's.
func TestLostResponsesWithKeysApplyEachChargeOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pooled bool
	}{
		{"new connection per attempt", false},
		{"pooled connections", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, url, base := startPayments(t)
			base.DisableKeepAlives = !tc.pooled
			tr := keysOn(base, &IdempotencyKeys{})

			start := time.Now()
			outcomes := postCalls(t, &http.Client{Transport: tr}, url, lostResponseCalls, lostResponseWorkers)
			elapsed := time.Since(start)

			effects, arrivals := checkExactlyOnce(t, srv, outcomes)
			var retried uint64
			for i, o := range outcomes {
				if !tc.pooled {
					require.Equal(t, 2, o.attempts, "call %d: attempts", i)
				}
				if o.attempts == 2 {
					retried++
				}
			}
			st := tr.Stats()
			assert.Equal(t, uint64(lostResponseCalls), st.Requests)
			assert.Equal(t, retried, st.Retries)
			if !tc.pooled {
				assert.Equal(t, uint64(2*lostResponseCalls), st.Attempts)
			}
			t.Logf("keys on, %s: %d calls, %d succeeded, %d charges applied, %d requests received, %d attempts (%d retries by the Transport, %d by net/http), %v",
				tc.name, lostResponseCalls, countOK(outcomes), effects, arrivals, st.Attempts, st.Retries, uint64(arrivals)-st.Attempts, elapsed.Round(time.Millisecond))
		})
	}
}

// checkExactlyOnce asserts that every call succeeded, that the server
// received each call twice with the same key and body, and that it applied
// exactly one charge per call. It returns the charges and requests counted.
func checkExactlyOnce(t *testing.T, srv *payments, outcomes []callOutcome) (effects, received int) {
	t.Helper()
	for i, o := range outcomes {
		require.NoError(t, o.err, "call %d", i)
		// The reply is the stored reply of the charge the first attempt made.
		require.Regexp(t, `^charge \d+ for call `+strconv.Itoa(i)+`$`, o.reply)
	}
	effects, arrivals := srv.snapshot()
	assert.Equal(t, len(outcomes), effects, "charges applied")
	assert.Len(t, arrivals, 2*len(outcomes), "requests received")

	calls := byCall(arrivals)
	require.Len(t, calls, len(outcomes))
	for call, as := range calls {
		require.Len(t, as, 2, "call %s", call)
		first, retry := as[0], as[1]
		assert.True(t, first.applied && first.dropped, "call %s: first attempt applied, then dropped", call)
		assert.False(t, retry.applied, "call %s: the retry applied a second charge", call)
		assert.NotEmpty(t, first.key, "call %s: no key", call)
		assert.Equal(t, first.key, retry.key, "call %s: the retry carried another key", call)
		assert.Equal(t, first.bodySum, retry.bodySum, "call %s: the retry carried another body", call)
	}
	return effects, len(arrivals)
}

// TestLostResponsesWithoutKeysAreNotRetried is the same fault with keys off:
// a POST that reached the server may have been applied, so it is never sent
// again. Each caller gets an error, and the server applies exactly one
// charge per call, the one of its only attempt.
func TestLostResponsesWithoutKeysAreNotRetried(t *testing.T) {
	srv, url, base := startPayments(t)
	tr := keysOn(base, nil)
	client := &http.Client{Transport: tr}

	start := time.Now()
	outcomes := postCalls(t, client, url, lostResponseCalls, lostResponseWorkers)
	elapsed := time.Since(start)

	for i, o := range outcomes {
		var e *Error
		require.ErrorAs(t, o.err, &e, "call %d", i)
		assert.Equal(t, ReasonUnsafe, e.Reason, "call %d", i)
		assert.Equal(t, 1, e.Attempts, "call %d", i)
	}
	effects, arrivals := srv.snapshot()
	assert.Equal(t, lostResponseCalls, effects, "charges applied")
	assert.Len(t, arrivals, lostResponseCalls, "requests received")
	for call, as := range byCall(arrivals) {
		require.Len(t, as, 1, "call %s was sent again", call)
		assert.Empty(t, as[0].key, "call %s carried a key", call)
	}

	st := tr.Stats()
	assert.Equal(t, uint64(lostResponseCalls), st.Attempts)
	assert.Zero(t, st.Retries)
	assert.Equal(t, uint64(lostResponseCalls), st.GiveUps[ReasonUnsafe])
	t.Logf("keys off: %d calls, %d errors, %d charges applied, %d requests received, %d attempts (%d retries), %v",
		lostResponseCalls, lostResponseCalls-countOK(outcomes), effects, len(arrivals), st.Attempts, st.Retries, elapsed.Round(time.Millisecond))
}

func countOK(outcomes []callOutcome) int {
	n := 0
	for _, o := range outcomes {
		if o.err == nil {
			n++
		}
	}
	return n
}

// The key a request was sent with can be read from what RoundTrip returns:
// a response's Request carries the key the Transport added (a copy: the
// caller's request is left as it was), and an Error names the key, added
// or the caller's.
func TestTheKeySentIsReadFromWhatRoundTripReturns(t *testing.T) {
	t.Run("a response", func(t *testing.T) {
		b := &testutil.Base{Answer: testutil.Statuses(503, 200)}
		tr := keysOn(b, &IdempotencyKeys{})
		req := newKeyRequest(t, http.MethodPost, "x")
		resp, _ := sendOK(t, tr, req)
		sent := sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 2)
		assert.Equal(t, sent, resp.Request.Header.Get(defaultKeyHeader))
		assert.Empty(t, req.Header.Get(defaultKeyHeader), "the caller's request is left as it was")
	})
	t.Run("a response given up on", func(t *testing.T) {
		b := &testutil.Base{Answer: testutil.Statuses(503)}
		tr := keysOn(b, &IdempotencyKeys{})
		tr.Policy.MaxAttempts = 2
		resp, _ := sendOK(t, tr, newKeyRequest(t, http.MethodPost, "x"))
		assert.Equal(t, ReasonExhausted, StopReason(resp))
		assert.Equal(t, sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 2), resp.Request.Header.Get(defaultKeyHeader))
	})
	for _, own := range []string{"", "caller-7"} {
		t.Run(fmt.Sprintf("an error, key %q", own), func(t *testing.T) {
			b := &testutil.Base{Answer: testutil.Refused}
			tr := keysOn(b, &IdempotencyKeys{})
			tr.Policy.MaxAttempts = 2
			req := newKeyRequest(t, http.MethodPost, "x")
			if own != "" {
				req.Header.Set(defaultKeyHeader, own)
			}
			_, err := tr.RoundTrip(req)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 2), e.Key)
			if own != "" {
				assert.Equal(t, own, e.Key)
			}
		})
	}
	t.Run("an error, no key", func(t *testing.T) {
		tr := keysOn(&testutil.Base{Answer: testutil.Refused}, nil)
		_, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Empty(t, e.Key)
	})
}

// Generate gets the caller's request, so a key can come from the caller's
// own ID of what it sends: a redelivery of the same event gets the same key.
func TestAKeyDerivedFromTheRequestIsTheSameOnARedelivery(t *testing.T) {
	b := &testutil.Base{Answer: testutil.Statuses(503, 200, 503, 200)}
	tr := keysOn(b, &IdempotencyKeys{Generate: func(req *http.Request) (string, error) {
		return "webhook-" + req.Header.Get("X-Event-ID"), nil
	}})
	for range 2 { // the event, then its redelivery
		req := newKeyRequest(t, http.MethodPost, "x")
		req.Header.Set("X-Event-ID", "evt_42")
		resp, _ := sendOK(t, tr, req)
		assert.Equal(t, "webhook-evt_42", resp.Request.Header.Get(defaultKeyHeader))
	}
	assert.Equal(t, "webhook-evt_42", sameKeyOnEveryAttempt(t, b, defaultKeyHeader, 4))
}
