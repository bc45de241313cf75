package retryhttp

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

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

// keysReceived returns the Idempotency-Key of every request srv received.
func keysReceived(srv *retryhttptest.Server) []string {
	var keys []string
	for _, r := range srv.Requests() {
		keys = append(keys, r.Header.Get("Idempotency-Key"))
	}
	return keys
}

// TestConflictIsRetriedWithTheSameKey: a 409 to a keyed request means the
// original is still being processed; the retry carries the same key.
func TestConflictIsRetriedWithTheSameKey(t *testing.T) {
	srv := testutil.NewServer(t, retryhttptest.Status(http.StatusConflict), retryhttptest.Status(http.StatusOK))
	tr := keysOn(testutil.LoopbackBase(t), &IdempotencyKeys{})

	resp, _ := postOnce(t, tr, srv.URL, []byte(`{"amount":5}`), nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 2, Attempts(resp))
	keys := keysReceived(srv)
	require.Len(t, keys, 2)
	assert.NotEmpty(t, keys[0])
	assert.Equal(t, keys[0], keys[1], "the retry after 409 carried another key")
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

// TestKeyedRequestIsNotRetriedOnClientErrors: 400 and 422 say the request
// itself is wrong (422: the key was used with another request); sending it
// again cannot help.
func TestKeyedRequestIsNotRetriedOnClientErrors(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusUnprocessableEntity} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			srv := testutil.NewServer(t, retryhttptest.Status(status), retryhttptest.Status(http.StatusOK))
			tr := keysOn(testutil.LoopbackBase(t), &IdempotencyKeys{})

			resp, _ := postOnce(t, tr, srv.URL, []byte(`{"amount":5}`), nil)
			assert.Equal(t, status, resp.StatusCode, "the response goes back to the caller")
			assert.Equal(t, 1, Attempts(resp))
			keys := keysReceived(srv)
			require.Len(t, keys, 1, "requests received")
			assert.NotEmpty(t, keys[0], "the request was keyed")
		})
	}
}

// TestCallersKeyIsKeptOnTheWire: a lost response to a POST carrying the
// caller's own key is retried with that key, and no key is added.
func TestCallersKeyIsKeptOnTheWire(t *testing.T) {
	for _, name := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		t.Run(name, func(t *testing.T) {
			srv, url, base := startPayments(t)
			tr := keysOn(base, &IdempotencyKeys{})
			tr.Policy.IdempotencyKeys.Generate = func() (string, error) {
				t.Error("a key was generated for a request that had one")
				return "generated", nil
			}

			resp, reply := postOnce(t, tr, url+"/charges", []byte(`{"amount":5}`),
				http.Header{name: {"order-1001"}, "X-Call": {"c"}})
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, 2, Attempts(resp))
			assert.Equal(t, "charge 1 for call c", reply)

			effects, arrivals := srv.snapshot()
			assert.Equal(t, 1, effects)
			require.Len(t, arrivals, 2)
			for i, a := range arrivals {
				assert.Equal(t, 1, a.keys, "attempt %d: key fields received", i+1)
				got := a.key
				if name == "X-Idempotency-Key" {
					got = a.xkey
				}
				assert.Equal(t, "order-1001", got, "attempt %d", i+1)
			}
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

// TestKeyedBodyIsIdenticalOnEveryAttempt: whether replayed through GetBody
// or from the Transport's buffer, every attempt sends the full body.
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

// TestUnkeyedPOSTIsRetriedAfterADialError: a refused connection proves the
// request never left the client, so even a POST without a key is sent
// again. The first dial goes to a loopback port nobody listens on.
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
