package retryhttp

// A response body cut mid-way continues where it broke (ResumeResponse),
// against a file server on loopback (http.ServeContent), or ends with an
// error: never with bytes missing, repeated or from two versions.

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
	"github.com/retryhttp/retryhttp/retryhttptest"
)

// download serves d on loopback, answer i cut after cuts[i] bytes, and
// reads its body through a Transport with policy p (no backoff unless set,
// unlimited budget); it returns what the read gave, the response, the
// Transport and the read's error.
func download(t *testing.T, d *testutil.Download, p Policy, cuts ...int) ([]byte, *http.Response, *Transport, error) {
	t.Helper()
	srv := retryhttptest.NewServer(d.Cut(cuts...))
	t.Cleanup(srv.Close)
	tr := newTestTransport(t, p)
	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL+"/file", nil))
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	return got, resp, tr, err
}

// A 1 MiB body cut three times is read whole: each resume asks for the rest
// from the first byte not read, if the ETag still holds, and the server
// sends each byte once but for what the cut connections held.
func TestABodyCutThreeTimesIsReadWhole(t *testing.T) {
	body := testutil.Payload(1 << 20)
	d := &testutil.Download{Body: body}
	cuts := []int{100_000, 300_000, 1}
	got, resp, tr, err := download(t, d, Policy{ResumeResponse: true, Timeline: true}, cuts...)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(body, got), "the body, whole and in order")

	asked := d.Asked()
	require.Len(t, asked, 4)
	assert.Empty(t, asked[0].Get("Range"))
	at := 0
	for i, cut := range cuts {
		at += cut
		assert.Equal(t, fmt.Sprintf("bytes=%d-", at), asked[i+1].Get("Range"))
		assert.Equal(t, `"v1"`, asked[i+1].Get("If-Range"))
	}
	assert.LessOrEqual(t, d.Written(), int64(len(body)+3*32<<10), "each byte sent once (see Written)")
	s := tr.Stats()
	assert.Equal(t, uint64(3), s.Resumes)
	assert.Equal(t, uint64(3), s.Retries)
	assert.Equal(t, uint64(4), s.Attempts)

	tl := Timeline(resp, nil)
	require.Len(t, tl, 4)
	assert.Equal(t, 200, tl[0].Response.StatusCode)
	assert.ErrorContains(t, tl[0].Err, "response body cut after 100000 bytes")
	for _, a := range tl[1:] {
		assert.Equal(t, 206, a.Response.StatusCode)
		assert.Equal(t, "backoff", a.Source)
	}
}

// Without ResumeResponse, a cut body ends with the cut: the request is not
// sent again.
func TestACutBodyEndsUnlessResumed(t *testing.T) {
	d := &testutil.Download{Body: testutil.Payload(1 << 20)}
	got, _, _, err := download(t, d, Policy{}, 100_000)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Len(t, got, 100_000)
	assert.Len(t, d.Asked(), 1)
}

// What cannot continue the same body ends the read with an error that says
// why, after the bytes read before the cut: never a body mixed from two
// answers.
func TestAnAnswerThatIsNotTheRestEndsTheBody(t *testing.T) {
	body := testutil.Payload(1 << 20)
	cases := []struct {
		name  string
		d     *testutil.Download
		err   string
		asked int
	}{
		{"a server that ignores Range", &testutil.Download{IgnoreRange: true}, "answered 200 OK", 2},
		{"an ETag that changed", &testutil.Download{ETag: func(i int) string { return fmt.Sprintf(`"v%d"`, i) }},
			"answered 200 OK", 2},
		{"a weak ETag", &testutil.Download{ETag: func(int) string { return `W/"v1"` }}, "unexpected EOF", 1},
		{"no validator", &testutil.Download{ETag: func(int) string { return "" }}, "unexpected EOF", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.d.Body = body
			got, _, _, err := download(t, tc.d, Policy{ResumeResponse: true}, 100_000)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
			assert.True(t, bytes.Equal(body[:100_000], got), "the bytes before the cut, and no more")
			assert.Len(t, tc.d.Asked(), tc.asked)
		})
	}
}

// Without an ETag, a Last-Modified a minute before the Date is a strong
// validator, and resumes the body.
func TestLastModifiedResumesWithoutAnETag(t *testing.T) {
	body := testutil.Payload(1 << 20)
	modified := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := &testutil.Download{Body: body, ETag: func(int) string { return "" }, Modified: modified}
	got, _, _, err := download(t, d, Policy{ResumeResponse: true}, 5000)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(body, got))
	require.Len(t, d.Asked(), 2)
	assert.Equal(t, modified.Format(http.TimeFormat), d.Asked()[1].Get("If-Range"))
}

// A body cut more often than MaxAttempts allows ends with the request's
// *Error (ReasonExhausted) after MaxAttempts attempts, the resumes counted.
func TestResumesCountAsAttempts(t *testing.T) {
	body := testutil.Payload(1 << 20)
	d := &testutil.Download{Body: body}
	got, _, tr, err := download(t, d, Policy{ResumeResponse: true, MaxAttempts: 3}, 1000, 1000, 1000, 1000)
	e := gaveUp(t, err, ReasonExhausted, 3)
	assert.ErrorIs(t, e, io.ErrUnexpectedEOF)
	assert.True(t, bytes.Equal(body[:3000], got))
	assert.Len(t, d.Asked(), 3)
	assert.Equal(t, uint64(1), tr.Stats().GiveUps[ReasonExhausted])
}

// A body whose answer is compressed (net/http's transparent gzip) is not
// resumed: its offsets are not the server's.
func TestACompressedBodyIsNotResumed(t *testing.T) {
	body := strings.Repeat("a", 1<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("Content-Encoding", "gzip")
		var zipped bytes.Buffer
		zw := gzip.NewWriter(&zipped)
		zw.Write([]byte(body))
		zw.Close()
		w.Write(zipped.Bytes()[:500])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	tr := newTestTransport(t, Policy{ResumeResponse: true})
	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Error(t, err)
	assert.Zero(t, tr.Stats().Resumes)
}

// In fake time: a resume waits its backoff, and none goes past the
// deadline (ReasonDeadline); the budget's line, the hooks and the logs see
// each as a retry.
func TestAResumeWaitsItsBackoffWithinTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := testutil.Payload(10_000)
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			h := http.Header{"Etag": {`"v1"`}, "Accept-Ranges": {"bytes"}}
			from := 0
			code := 200
			if n > 1 {
				fmt.Sscanf(req.Header.Get("Range"), "bytes=%d-", &from)
				h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, len(body)-1, len(body)))
				code = 206
			}
			resp := testutil.Response(req, code, h, "")
			resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[from:from+1000]), iotest.ErrReader(testutil.ErrReset())))
			resp.ContentLength = int64(len(body) - from)
			return resp, nil
		}}
		tr, hooks := fakeTransport(base, Policy{ResumeResponse: true, MaxAttempts: 10, Backoff: Constant(time.Second)}, 0)
		ctx := testutil.WithTimeout(t, 2500*time.Millisecond)
		resp, err := tr.RoundTrip(testutil.Get(t, ctx))
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		gaveUp(t, err, ReasonDeadline, 3)
		assert.True(t, bytes.Equal(body[:3000], got))
		assert.Equal(t, time.Second, base.Gap(t, 1))
		assert.Equal(t, time.Second, base.Gap(t, 2))
		assert.Len(t, base.Calls(), 3, "no resume past the deadline")
		assert.Equal(t, []Reason{ReasonDeadline}, hooks.reasons())
		require.Len(t, hooks.retries, 2)
		assert.ErrorContains(t, hooks.retries[0].Err, "response body cut after 1000 bytes")
	})
}

// A 206 whose Content-Range does not start at the first byte not read ends
// the body with an error that names it.
func TestAWrongRangeEndsTheBody(t *testing.T) {
	body := testutil.Payload(10_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Accept-Ranges", "bytes")
		if r.Header.Get("Range") != "" {
			w.Header().Set("Content-Range", "bytes 0-9999/10000") // the whole body again, as a 206
			w.WriteHeader(http.StatusPartialContent)
			w.Write(body)
			return
		}
		w.Header().Set("Content-Length", "10000")
		w.Write(body[:4000])
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer srv.Close()
	tr := newTestTransport(t, Policy{ResumeResponse: true})
	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	e := gaveUp(t, err, ReasonNotTransient, 2)
	assert.ErrorContains(t, e, `the rest came as Content-Range "bytes 0-9999/10000"`)
	assert.True(t, bytes.Equal(body[:4000], got))
}

// A QUERY resumes too, its body sent again whole with the Range.
func TestAQueryResumesWithItsBodySentAgain(t *testing.T) {
	body := testutil.Payload(1 << 20)
	d := &testutil.Download{Body: body}
	srv := retryhttptest.NewServer(d.Cut(70_000))
	defer srv.Close()
	tr := newTestTransport(t, Policy{ResumeResponse: true})
	resp, err := tr.RoundTrip(testutil.NewRequest(t, "QUERY", srv.URL, strings.NewReader("select *")))
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.True(t, bytes.Equal(body, got))
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		assert.Equal(t, testutil.SHA256Hex([]byte("select *")), r.BodySHA256, "the query, whole")
	}
	assert.Equal(t, "bytes=70000-", d.Asked()[1].Get("Range"))
}

// A caller that closes a resumable body mid-way ends the request: no
// further attempt, and the host forgets nothing it should not (the request
// leaves it).
func TestClosingAResumableBodyEndsTheRequest(t *testing.T) {
	d := &testutil.Download{Body: testutil.Payload(1 << 20)}
	srv := retryhttptest.NewServer(d.Cut(100_000))
	defer srv.Close()
	tr := newTestTransport(t, Policy{ResumeResponse: true})
	resp, err := tr.RoundTrip(testutil.NewRequest(t, http.MethodGet, srv.URL, nil))
	require.NoError(t, err)
	h := tr.enterHost(resp.Request)
	h.leave()
	assert.Equal(t, int32(1), h.active.Load(), "in flight while its body may resume")
	_, err = io.ReadFull(resp.Body, make([]byte, 1000))
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Zero(t, h.active.Load(), "left as its body closed")
	_, err = resp.Body.Read(make([]byte, 1))
	assert.Error(t, err)
	assert.Len(t, d.Asked(), 1)
}

func TestContentRange(t *testing.T) {
	for v, want := range map[string][3]int64{
		"bytes 0-9/10":   {0, 9, 10},
		"bytes 5-9/*":    {5, 9, -1},
		"bytes 9-9/10":   {9, 9, 10},
		"bytes 5-10/10":  {-1},
		"bytes 6-5/10":   {-1},
		"bytes -1-5/10":  {-1},
		"bytes */10":     {-1},
		"items 0-9/10":   {-1},
		"bytes 0-9/ten":  {-1},
		"bytes 0-9":      {-1},
		"":               {-1},
		"bytes 0-9/10 x": {-1},
		"bytes +5-9/10":  {-1},
		"bytes 0-0/0":    {-1},
		"bytes 5-9/-1":   {-1},
		"bytes 05-9/10":  {-1},
		"bytes  5-9/10":  {-1},
	} {
		first, last, size, ok := contentRange(v)
		if want[0] < 0 {
			assert.False(t, ok, v)
			continue
		}
		assert.True(t, ok, v)
		assert.Equal(t, want, [3]int64{first, last, size}, v)
	}
}

func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-9/*", "bytes */10", "bytes 1-0/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		first, last, size, ok := contentRange(v)
		if !ok {
			return
		}
		if first < 0 || last < first || (size != -1 && last >= size) || size < -1 {
			t.Fatalf("%q: %d-%d/%d", v, first, last, size)
		}
		rest := strings.TrimPrefix(v, "bytes ")
		if strings.Trim(rest, "0123456789-/*") != "" || strings.Count(rest, "-") != 1 {
			t.Fatalf("%q: accepted with other than digits", v)
		}
	})
}

// cutOnce answers a GET with a resumable 200 whose body breaks after 1000
// bytes, and any later attempt with the rest (a 206).
func cutOnce(body []byte) *testutil.Base {
	return &testutil.Base{Answer: testutil.CutOnce(body, 1000)}
}

// A Close from another goroutine while a resume waits its backoff ends the
// read at once: no further attempt, and the request leaves its host.
func TestACloseAbortsAResumeUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := cutOnce(testutil.Payload(5000))
		tr, hooks := fakeTransport(base, Policy{ResumeResponse: true, Backoff: Constant(time.Hour)}, 0)
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		start := time.Now()
		go func() {
			time.Sleep(time.Second)
			resp.Body.Close()
		}()
		got, err := io.ReadAll(resp.Body)
		assert.Len(t, got, 1000)
		gaveUp(t, err, ReasonCanceled, 1)
		assert.Equal(t, time.Second, time.Since(start), "at the Close, not after the backoff")
		assert.Len(t, base.Calls(), 1)
		assert.Equal(t, []Reason{ReasonCanceled}, hooks.reasons())
		h := tr.enterHost(resp.Request)
		h.leave()
		assert.Zero(t, h.active.Load(), "the request left its host")
	})
}

// A hook that panics during a resume ends the request: the panic goes on
// in the caller's Read, and the request leaves its host.
func TestAPanicDuringAResumeEndsTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr, _ := fakeTransport(cutOnce(testutil.Payload(5000)), Policy{ResumeResponse: true}, 0)
		tr.OnRetry = func(*RetryEvent) { panic("hook") }
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		assert.PanicsWithValue(t, "hook", func() { io.ReadAll(resp.Body) })
		_, err = resp.Body.Read(make([]byte, 1))
		assert.Error(t, err, "the body has ended")
		h := tr.enterHost(resp.Request)
		h.leave()
		assert.Zero(t, h.active.Load())
	})
}

// A hedged request whose first attempt answers after the hedge went, and
// whose body is then cut: the cut is the first attempt's in the timeline,
// and the resume is attempt 3.
func TestACutIsTheAttemptWhoseBodyBroke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := testutil.Payload(5000)
		cut := cutOnce(body)
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			switch n {
			case 1:
				time.Sleep(60 * time.Millisecond)
				return cut.Answer(1, req)
			case 2: // the hedge, at 50 ms: it loses
				<-req.Context().Done()
				return nil, req.Context().Err()
			}
			return cut.Answer(n, req)
		}}
		tr, _ := fakeTransport(base, Policy{ResumeResponse: true, Timeline: true, Backoff: Constant(0),
			Hedge: &Hedge{After: 50 * time.Millisecond, Fraction: 1}}, 0)
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(body, got))
		tl := Timeline(resp, nil)
		require.Len(t, tl, 3)
		assert.ErrorContains(t, tl[0].Err, "response body cut after 1000 bytes")
		assert.Equal(t, 200, tl[0].Response.StatusCode)
		assert.True(t, tl[1].Hedge)
		assert.ErrorIs(t, tl[1].Err, errAttemptCanceled)
		assert.Equal(t, 206, tl[2].Response.StatusCode)
	})
}

// Only a Last-Modified at least a second before the Date is a strong
// validator (RFC 9110, section 8.8.2.2), and only without an ETag; a weak
// ETag resumes nothing.
func TestResumeValidator(t *testing.T) {
	lm := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Time) string { return d.Format(http.TimeFormat) }
	for _, tc := range []struct {
		h         http.Header
		validator string
	}{
		{http.Header{"Etag": {`"a"`}}, `"a"`},
		{http.Header{"Etag": {`""`}}, `""`}, // an empty entity tag is one
		{http.Header{"Etag": {`W/"a"`}, "Last-Modified": {at(lm)}, "Date": {at(lm.Add(time.Hour))}}, ""},
		{http.Header{"Etag": {`a`}}, ""},
		{http.Header{"Last-Modified": {at(lm)}, "Date": {at(lm.Add(time.Second))}}, at(lm)},
		{http.Header{"Last-Modified": {at(lm)}, "Date": {at(lm)}}, ""},
		{http.Header{"Last-Modified": {at(lm)}}, ""},
		{http.Header{"Last-Modified": {"yesterday"}, "Date": {at(lm)}}, ""},
	} {
		got, _ := resumeValidator(tc.h)
		assert.Equal(t, tc.validator, got, "%v", tc.h)
	}
}

// dataErr returns its data and an error in one Read, as a body may: the
// bytes it gives with the error count.
type dataErr struct {
	data []byte
	err  error
}

func (d *dataErr) Read(p []byte) (int, error) {
	n := copy(p, d.data)
	d.data = d.data[n:]
	if len(d.data) == 0 {
		return n, d.err
	}
	return n, nil
}

// A first answer of unknown length (chunked) learns the body's size from
// the first 206: an early clean end after it is a cut, and is resumed too.
// A Read that returns bytes with the error that cut the body keeps them.
func TestABodyOfUnknownLengthLearnsItsSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := testutil.Payload(5000)
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			h := http.Header{"Etag": {`"v1"`}, "Accept-Ranges": {"bytes"}}
			from, to, end := 0, 1000, testutil.ErrReset() // bytes [from, to), then end
			switch n {
			case 2:
				from, to, end = 1000, 3000, io.EOF // a clean end, short of the size
			case 3:
				from, to, end = 3000, 5000, io.EOF
			}
			code := 200
			if n > 1 {
				code = 206
				h.Set("Content-Range", fmt.Sprintf("bytes %d-4999/5000", from))
			}
			resp := testutil.Response(req, code, h, "")
			resp.Body = io.NopCloser(&dataErr{data: body[from:to], err: end})
			if n == 2 { // the end alone, after the bytes: a Read of none
				resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[from:to]), iotest.ErrReader(end)))
			}
			resp.ContentLength = -1
			return resp, nil
		}}
		tr, hooks := fakeTransport(base, Policy{ResumeResponse: true, Backoff: Constant(0)}, 0)
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		var got []byte
		buf := make([]byte, 700)
		for err == nil {
			var n int
			n, err = resp.Body.Read(buf)
			require.True(t, n > 0 || err != nil, "a Read gave neither bytes nor an error")
			got = append(got, buf[:n]...)
		}
		require.ErrorIs(t, err, io.EOF)
		assert.True(t, bytes.Equal(body, got), "%d bytes", len(got))
		assert.Equal(t, []string{"", "bytes=1000-", "bytes=3000-"}, headerValues(base.Sent("Range")))
		require.Len(t, hooks.retries, 2)
		assert.ErrorIs(t, hooks.retries[0].Err, syscall.ECONNRESET, "the cut's own error")
		assert.ErrorIs(t, hooks.retries[1].Err, io.ErrUnexpectedEOF, "an end short of the size")
	})
}

// headerValues returns the first value of each list, "" for none.
func headerValues(lists [][]string) []string {
	out := make([]string, len(lists))
	for i, l := range lists {
		if len(l) > 0 {
			out[i] = l[0]
		}
	}
	return out
}

// check accepts a 206 only if it is the rest of the same body, from the
// first byte not read to the end, as sent.
func TestCheckTakesOnlyTheRest(t *testing.T) {
	r := &resumable{read: 1000, size: 5000, etag: `"v1"`}
	answer := func(code int, kv ...string) *http.Response {
		h := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return &http.Response{StatusCode: code, Header: h}
	}
	assert.NoError(t, r.check(answer(206, "Content-Range", "bytes 1000-4999/5000", "ETag", `"v1"`)))
	assert.NoError(t, r.check(answer(206, "Content-Range", "bytes 1000-4999/5000")), "no ETag: If-Range vouched")
	for _, resp := range []*http.Response{
		answer(200),
		answer(416, "Content-Range", "bytes */5000"),
		answer(206, "Content-Range", "bytes 999-4999/5000"),
		answer(206, "Content-Range", "bytes 1000-3999/5000"), // stops short of the end
		answer(206, "Content-Range", "bytes 1000-5999/6000"), // another body's size
		answer(206, "Content-Range", "bytes 1000-4999/5000", "ETag", `"v2"`),
		answer(206, "Content-Range", "bytes 1000-4999/5000", "Content-Encoding", "gzip"),
		answer(206),
	} {
		assert.Error(t, r.check(resp), "%d %v", resp.StatusCode, resp.Header)
	}
	var none *resumable
	assert.NoError(t, none.check(answer(200)), "a call that resumes nothing takes any answer")
}

// A body cut where no resume may follow (the deadline has passed) is
// closed once: as it broke, not again as the caller closes the response.
func TestACutBodyThatIsNotResumedIsClosedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := testutil.Payload(5000)
		var cut *testutil.CloseRecorder
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			resp := testutil.Response(req, 200, http.Header{"Etag": {`"v1"`}, "Accept-Ranges": {"bytes"}}, "")
			cut = testutil.NewCloseRecorder(io.MultiReader(bytes.NewReader(body[:1000]),
				iotest.ErrReader(io.ErrUnexpectedEOF)))
			resp.Body, resp.ContentLength = cut, int64(len(body))
			return resp, nil
		}}
		tr, _ := fakeTransport(base, Policy{ResumeResponse: true, Backoff: Constant(time.Second)}, 0)
		ctx := testutil.WithTimeout(t, 500*time.Millisecond)
		resp, err := tr.RoundTrip(testutil.Get(t, ctx))
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		gaveUp(t, err, ReasonDeadline, 1)
		assert.Len(t, got, 1000)
		resp.Body.Close()
		assert.Equal(t, 1, cut.Closes(), "the cut body, closed once")
		assert.Len(t, base.Calls(), 1)
	})
}

// A resume answered with a failure status the policy retries, when no
// retry is left, ends the body with the request's *Error: the failure's
// body is not the rest of the one cut.
func TestAFailedResumeGivenUpOnEndsTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := testutil.Payload(5000)
		cut := cutOnce(body)
		base := &testutil.Base{Answer: func(n int, req *http.Request) (*http.Response, error) {
			if n == 1 {
				return cut.Answer(1, req)
			}
			return testutil.Response(req, http.StatusServiceUnavailable, nil, "busy"), nil
		}}
		tr, hooks := fakeTransport(base, Policy{ResumeResponse: true, MaxAttempts: 2}, 0)
		resp, err := tr.RoundTrip(testutil.Get(t, t.Context()))
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		e := gaveUp(t, err, ReasonExhausted, 2)
		assert.ErrorContains(t, e, "answered 503")
		assert.True(t, bytes.Equal(body[:1000], got), "the bytes before the cut, and no more: %q", got[min(len(got), 1000):])
		assert.Equal(t, []Reason{ReasonExhausted}, hooks.reasons())
	})
}
