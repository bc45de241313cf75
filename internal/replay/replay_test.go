package replay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// context.AfterFunc that closes a body being buffered must end with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// request returns a POST whose body reads body (nil: no body), recording
// its closes, with the given ContentLength.
func request(t *testing.T, body io.Reader, cl int64) (*http.Request, *testutil.CloseRecorder) {
	t.Helper()
	req := testutil.NewRequest(t, http.MethodPost, "http://api.test/things", nil)
	if body == nil {
		return req, nil
	}
	rc := testutil.NewCloseRecorder(body)
	req.Body, req.ContentLength = rc, cl
	return req, rc
}

// readAll reads and closes body.
func readAll(t *testing.T, body io.ReadCloser) string {
	t.Helper()
	require.NotNil(t, body)
	b, err := io.ReadAll(body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	return string(b)
}

// Prepare picks how a body is replayed: none without a body, the caller's
// GetBody where there is one, memory for a body of known length up to the
// limit, and a single stream for any other.
func TestPrepareChoosesHowTheBodyIsReplayed(t *testing.T) {
	getBody := func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("hello")), nil }
	for _, tc := range []struct {
		name    string
		body    io.ReadCloser
		cl      int64
		getBody func() (io.ReadCloser, error)
		limit   int64
		want    Kind
	}{
		{"nil body", nil, 0, nil, 10, None},
		{"NoBody", http.NoBody, 0, nil, 10, None},
		{"GetBody, even when small", io.NopCloser(strings.NewReader("hello")), 5, getBody, 10, GetBody},
		{"known length below the limit", io.NopCloser(strings.NewReader("hello")), 5, nil, 10, Buffered},
		{"known length at the limit", io.NopCloser(strings.NewReader("hello")), 5, nil, 5, Buffered},
		{"known length one past the limit", io.NopCloser(strings.NewReader("hello!")), 6, nil, 5, Stream},
		{"unknown length (-1)", io.NopCloser(strings.NewReader("hello")), -1, nil, 10, Stream},
		{"unknown length (0 with a body)", io.NopCloser(strings.NewReader("hello")), 0, nil, 10, Stream},
		{"no buffering (limit 0)", io.NopCloser(strings.NewReader("hello")), 5, nil, 0, Stream},
		{"no buffering (limit < 0)", io.NopCloser(strings.NewReader("hello")), 5, nil, -1, Stream},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := testutil.NewRequest(t, http.MethodPost, "http://api.test/things", nil)
			req.Body, req.ContentLength, req.GetBody = tc.body, tc.cl, tc.getBody
			b, err := Prepare(req, tc.limit)
			require.NoError(t, err)
			assert.Equal(t, tc.want, b.Kind)
		})
	}
}

// A buffered body is read once, closed once, and every attempt gets all of
// it, as does the GetBody handed to the transport with it.
func TestBufferedBodyGivesEachAttemptTheWholeBody(t *testing.T) {
	req, rc := request(t, strings.NewReader("hello"), 5)
	b, err := Prepare(req, 1024)
	require.NoError(t, err)
	require.Equal(t, Buffered, b.Kind)
	assert.Equal(t, 1, rc.Closes(), "the caller's body is closed once read")
	for n := 1; n <= 3; n++ {
		assert.True(t, b.NeedsCopy(n), "attempt %d sends a copy", n)
		body, get, err := b.Next(req, n)
		require.NoError(t, err)
		assert.Equal(t, "hello", readAll(t, body), "attempt %d", n)
		require.NotNil(t, get)
		again, err := get()
		require.NoError(t, err)
		assert.Equal(t, "hello", readAll(t, again), "attempt %d's GetBody", n)
		assert.True(t, b.CanReplay(false), "a buffered body is whole for any next attempt")
	}
	b.Finish()
	assert.Equal(t, 1, rc.Closes(), "Finish does not close it again")
}

// errReader returns its bytes, then err.
type errReader struct {
	b   string
	err error
}

func (r *errReader) Read(p []byte) (int, error) {
	if r.b == "" {
		return 0, r.err
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// A body to buffer that does not match its ContentLength, or fails, is not
// sent: Prepare returns a LengthError for a mismatch, the read's error for
// a failure, and the caller's body is closed either way.
func TestPrepareRejectsABodyThatDoesNotMatchItsLength(t *testing.T) {
	errReset := errors.New("connection reset")
	for _, tc := range []struct {
		name    string
		body    io.Reader
		cl      int64
		want    *LengthError // nil: wantErr
		wantErr error
	}{
		{"one byte longer", strings.NewReader("hello!"), 5, &LengthError{5, -1}, nil},
		{"far longer", strings.NewReader(strings.Repeat("x", 100)), 5, &LengthError{5, -1}, nil},
		{"shorter", strings.NewReader("hel"), 5, &LengthError{5, 3}, nil},
		{"empty", strings.NewReader(""), 5, &LengthError{5, 0}, nil},
		{"read error", &errReader{"he", errReset}, 5, nil, errReset},
		{"read error after the whole body", &errReader{"hello", errReset}, 5, nil, errReset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, rc := request(t, tc.body, tc.cl)
			b, err := Prepare(req, 1024)
			var le *LengthError
			if tc.want != nil {
				require.ErrorAs(t, err, &le)
				assert.Equal(t, tc.want, le)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
				assert.False(t, errors.As(err, &le), "a failed read is not a length mismatch")
			}
			assert.Equal(t, None, b.Kind, "no body to send")
			assert.Equal(t, 1, rc.Closes(), "the caller's body is closed once")
		})
	}
}

// A body being buffered whose reads block (a pipe) is closed when the
// caller's context ends, and Prepare returns the context's cause; the body
// is closed once.
func TestPrepareEndsAtTheContextsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errGone := errors.New("caller gone")
		ctx, cancel := context.WithCancelCause(t.Context())
		body := testutil.NewStalledBody()
		req := testutil.NewRequest(t, http.MethodPost, "http://api.test/things", nil).WithContext(ctx)
		req.Body, req.ContentLength = body, 5
		time.AfterFunc(time.Second, func() { cancel(errGone) })
		start := time.Now()
		_, err := Prepare(req, 1024)
		require.ErrorIs(t, err, errGone)
		assert.Equal(t, time.Second, time.Since(start), "ended by the context")
		synctest.Wait()
		assert.Equal(t, 1, body.Closes(), "closed once")
	})
}

// A context that ended before Prepare ends the buffering at once.
func TestPrepareWithAnEndedContextFails(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	body := testutil.NewStalledBody()
	req := testutil.NewRequest(t, http.MethodPost, "http://api.test/things", nil).WithContext(ctx)
	req.Body, req.ContentLength = body, 5
	_, err := Prepare(req, 1024)
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, body.WaitClosed())
	assert.Equal(t, 1, body.Closes(), "closed once")
}

// withGetBody returns a request whose GetBody returns get's answers,
// counting its calls.
func withGetBody(t *testing.T, get func() (io.ReadCloser, error)) (*http.Request, *int) {
	t.Helper()
	calls := new(int)
	req, _ := request(t, strings.NewReader("hello"), 5)
	req.GetBody = func() (io.ReadCloser, error) { *calls++; return get() }
	return req, calls
}

// With GetBody, the first attempt sends the caller's own body (no copy of
// the request needed) and each later one a body GetBody re-created; the
// transport is handed the caller's GetBody each time.
func TestGetBodyRecreatesTheBodyFromTheSecondAttempt(t *testing.T) {
	req, calls := withGetBody(t, func() (io.ReadCloser, error) {
		return testutil.NewCloseRecorder(strings.NewReader("hello")), nil
	})
	b, err := Prepare(req, 1024)
	require.NoError(t, err)
	require.Equal(t, GetBody, b.Kind)
	assert.False(t, b.NeedsCopy(1), "the first attempt sends the caller's request")
	body, get, err := b.Next(req, 1)
	require.NoError(t, err)
	assert.Same(t, req.Body, body, "the caller's own body")
	assert.Zero(t, *calls, "GetBody not called for the first attempt")
	require.NotNil(t, get)
	_, _ = get()
	assert.Equal(t, 1, *calls, "the caller's GetBody is handed on")
	for n := 2; n <= 3; n++ {
		assert.True(t, b.NeedsCopy(n), "attempt %d carries a re-created body", n)
		before := *calls
		body, get, err := b.Next(req, n)
		require.NoError(t, err)
		assert.Equal(t, before+1, *calls, "attempt %d's body from GetBody", n)
		assert.NotSame(t, req.Body, body)
		assert.Equal(t, "hello", readAll(t, body))
		require.NotNil(t, get)
		_, _ = get()
		assert.Equal(t, before+2, *calls, "the caller's GetBody is handed on")
		assert.True(t, b.CanReplay(false), "GetBody re-creates the whole body whatever was sent")
	}
}

// A GetBody that fails, or returns no body, fails the attempt that needs
// it, with an error that says so.
func TestGetBodyFailureFailsTheAttempt(t *testing.T) {
	errGet := errors.New("cannot rewind")
	for _, tc := range []struct {
		name string
		get  func() (io.ReadCloser, error)
		is   error
	}{
		{"error", func() (io.ReadCloser, error) { return nil, errGet }, errGet},
		{"nil body", func() (io.ReadCloser, error) { return nil, nil }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := withGetBody(t, tc.get)
			b, err := Prepare(req, 1024)
			require.NoError(t, err)
			body, get, err := b.Next(req, 2)
			require.ErrorContains(t, err, "re-creating request body")
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.Nil(t, body)
			assert.Nil(t, get)
		})
	}
}

// A request without a body is sent as it is, to every attempt.
func TestNoBodyIsSentAsItIs(t *testing.T) {
	req := testutil.NewRequest(t, http.MethodGet, "http://api.test/things", nil)
	b, err := Prepare(req, 1024)
	require.NoError(t, err)
	require.Equal(t, None, b.Kind)
	for n := 1; n <= 2; n++ {
		assert.False(t, b.NeedsCopy(n), "attempt %d", n)
		body, get, err := b.Next(req, n)
		require.NoError(t, err)
		assert.Nil(t, body)
		assert.Nil(t, get)
	}
	assert.True(t, b.CanReplay(false))
	b.Finish()
}

// A GetBody request's body is its first attempt's transport's to close
// once handed to it; if no attempt took it (the request ended before its
// first), Finish closes it, once.
func TestFinishClosesAGetBodyBodyNoAttemptTook(t *testing.T) {
	for _, sent := range []bool{true, false} {
		req, _ := withGetBody(t, func() (io.ReadCloser, error) { return http.NoBody, nil })
		rc := req.Body.(*testutil.CloseRecorder)
		b, err := Prepare(req, 1024)
		require.NoError(t, err)
		require.Equal(t, GetBody, b.Kind)
		if sent {
			body, _, err := b.Next(req, 1)
			require.NoError(t, err)
			assert.Same(t, rc, body)
		}
		b.Finish()
		b.Finish()
		assert.Equal(t, map[bool]int{true: 0, false: 1}[sent], rc.Closes(), "taken by an attempt: %v", sent)
	}
}

// stream returns a Stream Body over a body of unknown length reading
// content.
func stream(t *testing.T, content string) (*Body, *http.Request, *testutil.CloseRecorder) {
	t.Helper()
	req, rc := request(t, strings.NewReader(content), -1)
	b, err := Prepare(req, 1024)
	require.NoError(t, err)
	require.Equal(t, Stream, b.Kind)
	return &b, req, rc
}

// A stream is sent as it comes, with no GetBody (it cannot be re-created),
// and always in a copy of the request, whose Close the Body tracks.
func TestStreamIsSentOnceWithoutGetBody(t *testing.T) {
	b, req, rc := stream(t, "hello")
	assert.True(t, b.NeedsCopy(1))
	body, get, err := b.Next(req, 1)
	require.NoError(t, err)
	assert.Nil(t, get, "no GetBody for a body that cannot be re-created")
	got, err := io.ReadAll(body)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	assert.Zero(t, rc.Closes(), "nothing closed the body yet")
}

// Another attempt can carry a stream only if the failed one provably sent
// nothing and none of it was read.
func TestStreamCanBeReplayedOnlyWhileUnread(t *testing.T) {
	b, req, _ := stream(t, "hello")
	body, _, err := b.Next(req, 1)
	require.NoError(t, err)
	assert.True(t, b.CanReplay(true), "nothing sent, nothing read")
	assert.False(t, b.CanReplay(false), "the attempt may have sent some")
	_, err = body.Read(make([]byte, 0))
	require.NoError(t, err)
	assert.True(t, b.CanReplay(true), "an empty read reads nothing")
	one := make([]byte, 1)
	n, err := body.Read(one)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	assert.False(t, b.CanReplay(true), "a byte of it was read: lost to a retry")
}

// An empty stream read to its end read nothing of it: it can still be
// replayed (there is nothing to lose).
func TestEmptyStreamReadToItsEndCanBeReplayed(t *testing.T) {
	b, req, _ := stream(t, "")
	body, _, err := b.Next(req, 1)
	require.NoError(t, err)
	n, err := body.Read(make([]byte, 8))
	assert.Zero(t, n)
	assert.Equal(t, io.EOF, err)
	assert.True(t, b.CanReplay(true))
}

// The caller's stream is closed once, when no attempt will use it and
// every attempt handed it has closed it, whichever comes last.
func TestStreamIsClosedAfterTheLastAttemptAndFinish(t *testing.T) {
	t.Run("attempt closes, then Finish", func(t *testing.T) {
		b, req, rc := stream(t, "hello")
		body, _, _ := b.Next(req, 1)
		require.NoError(t, body.Close())
		assert.Zero(t, rc.Closes(), "a retry may still send it")
		b.Finish()
		assert.Equal(t, 1, rc.Closes())
	})
	t.Run("Finish, then the attempt closes", func(t *testing.T) {
		b, req, rc := stream(t, "hello")
		body, _, _ := b.Next(req, 1)
		b.Finish()
		assert.Zero(t, rc.Closes(), "the transport still holds it")
		require.NoError(t, body.Close())
		assert.Equal(t, 1, rc.Closes())
	})
	t.Run("two attempts", func(t *testing.T) {
		b, req, rc := stream(t, "hello")
		first, _, _ := b.Next(req, 1)
		require.NoError(t, first.Close())
		second, _, _ := b.Next(req, 2)
		b.Finish()
		assert.Zero(t, rc.Closes(), "the second attempt's transport still holds it")
		require.NoError(t, second.Close())
		assert.Equal(t, 1, rc.Closes())
		require.NoError(t, second.Close())
		b.Finish()
		assert.Equal(t, 1, rc.Closes(), "closed once, however often closed")
	})
	t.Run("never sent", func(t *testing.T) {
		b, _, rc := stream(t, "hello")
		b.Finish()
		assert.Equal(t, 1, rc.Closes(), "no attempt holds it")
	})
}

// failingCloser is a body whose Close fails.
type failingCloser struct {
	io.Reader
	err error
}

func (f failingCloser) Close() error { return f.err }

// The Close that closes the caller's stream returns its error.
func TestStreamCloseReturnsTheCallersCloseError(t *testing.T) {
	errClose := errors.New("close failed")
	req := testutil.NewRequest(t, http.MethodPost, "http://api.test/things", nil)
	req.Body, req.ContentLength = failingCloser{strings.NewReader("hello"), errClose}, -1
	b, err := Prepare(req, 1024)
	require.NoError(t, err)
	body, _, _ := b.Next(req, 1)
	b.Finish()
	assert.ErrorIs(t, body.Close(), errClose)
}
