package respbody

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// Buffer checks a body against its Content-Length, whatever the base.
func TestBufferBodyChecksContentLength(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		cl    int64
		whole bool
		err   string
	}{
		{"exact", "hello", 5, true, ""},
		{"shorter", "hel", 5, false, "unexpected EOF"},
		{"longer", "hello!", 5, false, "longer than its Content-Length"},
		{"unknown length", "hello", -1, true, ""},
		{"unknown length over the bound", strings.Repeat("y", 20), -1, false, ""},
		{"known length over the bound", strings.Repeat("y", 20), 20, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := testutil.NewCloseRecorder(strings.NewReader(tc.body))
			resp := &http.Response{Body: rc, ContentLength: tc.cl}
			whole, err := Buffer(context.Background(), resp, 10)
			assert.Equal(t, tc.whole, whole)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.Equal(t, 1, rc.Closes(), "closed on error")
				return
			}
			require.NoError(t, err)
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, tc.body, string(got), "the same bytes, from memory or streaming")
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, 1, rc.Closes())
		})
	}
}

// An answer that has no content by its request's method or its status (a
// HEAD's, a 1xx, 204, 304) is empty, whatever its Content-Length says:
// its body is closed, nothing read, and NoBody given in its place. Any
// other status is read.
func TestBufferAnswerWithoutContentIsEmpty(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		code   int
		empty  bool
	}{
		{"HEAD 200", http.MethodHead, http.StatusOK, true},
		{"100 Continue", http.MethodGet, http.StatusContinue, true},
		{"199", http.MethodGet, 199, true},
		{"204 No Content", http.MethodGet, http.StatusNoContent, true},
		{"304 Not Modified", http.MethodGet, http.StatusNotModified, true},
		{"GET 200", http.MethodGet, http.StatusOK, false},
		{"GET 205", http.MethodGet, http.StatusResetContent, false},
		{"GET 503", http.MethodGet, http.StatusServiceUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := testutil.NewCloseRecorder(strings.NewReader("hello"))
			req := testutil.NewRequest(t, tc.method, "http://api.test/things", nil)
			resp := &http.Response{StatusCode: tc.code, Request: req, Body: rc, ContentLength: 5}
			whole, err := Buffer(context.Background(), resp, 10)
			require.NoError(t, err)
			assert.True(t, whole)
			assert.Equal(t, 1, rc.Closes())
			if tc.empty {
				assert.Equal(t, http.NoBody, resp.Body)
				return
			}
			assert.Equal(t, "hello", testutil.ReadBody(t, resp))
		})
	}
}

// NoBody is whole as it is.
func TestBufferNoBodyIsWhole(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}
	whole, err := Buffer(context.Background(), resp, 10)
	require.NoError(t, err)
	assert.True(t, whole)
	assert.Equal(t, http.NoBody, resp.Body)
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// The limit is inclusive: a body of limit bytes, by its Content-Length or
// by what came, is whole in memory; one of a byte more streams, all its
// bytes given back, and one known longer is not read at all.
func TestBufferLimitIsInclusive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		cl     int64
		whole  bool
		unread bool // given back without a byte read
	}{
		{"known length at the limit", 10, 10, true, false},
		{"known length over the limit", 11, 11, false, true},
		{"unknown length at the limit", 10, -1, true, false},
		{"unknown length over the limit", 11, -1, false, false},
		{"unknown length far over the limit", 5000, -1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := strings.Repeat("x", tc.size)
			cr := &countingReader{r: strings.NewReader(content)}
			rc := testutil.NewCloseRecorder(cr)
			resp := &http.Response{StatusCode: http.StatusOK, Body: rc, ContentLength: tc.cl}
			whole, err := Buffer(context.Background(), resp, 10)
			require.NoError(t, err)
			assert.Equal(t, tc.whole, whole)
			if tc.whole {
				assert.Equal(t, tc.size, cr.n, "read whole before Buffer returns")
			}
			if tc.unread {
				assert.Zero(t, cr.n, "nothing read")
			}
			assert.Equal(t, content, testutil.ReadBody(t, resp))
			assert.Equal(t, 1, rc.Closes())
		})
	}
}

// However the body's bytes come (one at a time, in halves, with the last
// of them io.EOF), Buffer reads them all, and checks them against the
// Content-Length: a body of its length whose stream then fails with
// io.ErrUnexpectedEOF (a connection lost after the last byte) is whole.
func TestBufferReadsTheBodyInPieces(t *testing.T) {
	content := strings.Repeat("0123456789", 100) // 1000 bytes: past the first room of 512
	both, lengthOnly := []int64{1000, -1}, []int64{1000}
	for _, tc := range []struct {
		name string
		cls  []int64 // a failed stream is whole only by its length
		r    func() io.Reader
	}{
		{"one byte at a time", both, func() io.Reader { return iotest.OneByteReader(strings.NewReader(content)) }},
		{"halves", both, func() io.Reader { return iotest.HalfReader(strings.NewReader(content)) }},
		{"data with EOF", both, func() io.Reader { return iotest.DataErrReader(strings.NewReader(content)) }},
		{"unexpected EOF after the body", lengthOnly, func() io.Reader {
			return io.MultiReader(strings.NewReader(content), &failing{io.ErrUnexpectedEOF})
		}},
	} {
		for _, cl := range tc.cls {
			t.Run(fmt.Sprintf("%s, Content-Length %d", tc.name, cl), func(t *testing.T) {
				rc := testutil.NewCloseRecorder(tc.r())
				resp := &http.Response{StatusCode: http.StatusOK, Body: rc, ContentLength: cl}
				whole, err := Buffer(context.Background(), resp, 4096)
				require.NoError(t, err)
				assert.True(t, whole)
				assert.Equal(t, content, testutil.ReadBody(t, resp))
			})
		}
	}
}

// A body that fails, or ends short of its Content-Length, fails the
// attempt: the error wraps the read's (io.ErrUnexpectedEOF for a short
// body), and the body is closed.
func TestBufferFailsABrokenBody(t *testing.T) {
	errReset := errors.New("connection reset")
	for _, tc := range []struct {
		name string
		r    io.Reader
		cl   int64
		is   error
	}{
		{"reset, known length", io.MultiReader(strings.NewReader("hel"), &failing{errReset}), 5, errReset},
		{"reset, unknown length", io.MultiReader(strings.NewReader("hel"), &failing{errReset}), -1, errReset},
		{"cut short", io.MultiReader(strings.NewReader("hel"), &failing{io.ErrUnexpectedEOF}), 5, io.ErrUnexpectedEOF},
		{"ends short", strings.NewReader("hel"), 5, io.ErrUnexpectedEOF},
		{"empty", strings.NewReader(""), 5, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := testutil.NewCloseRecorder(tc.r)
			resp := &http.Response{StatusCode: http.StatusOK, Body: rc, ContentLength: tc.cl}
			whole, err := Buffer(context.Background(), resp, 10)
			assert.False(t, whole)
			require.ErrorIs(t, err, tc.is)
			assert.ErrorContains(t, err, "reading response body")
			assert.Equal(t, 1, rc.Closes())
		})
	}
}

// A body of Content-Length 0 must be empty, and is whole however its
// stream ends (io.EOF, or io.ErrUnexpectedEOF once its no bytes came); a
// byte more is a body longer than its length.
func TestBufferZeroContentLength(t *testing.T) {
	for _, r := range []io.Reader{strings.NewReader(""), &failing{io.ErrUnexpectedEOF}} {
		rc := testutil.NewCloseRecorder(r)
		resp := &http.Response{StatusCode: http.StatusOK, Body: rc, ContentLength: 0}
		whole, err := Buffer(context.Background(), resp, 10)
		require.NoError(t, err)
		assert.True(t, whole)
		assert.Empty(t, testutil.ReadBody(t, resp))
		assert.Equal(t, 1, rc.Closes())
	}

	rc := testutil.NewCloseRecorder(strings.NewReader("x"))
	resp := &http.Response{StatusCode: http.StatusOK, Body: rc, ContentLength: 0}
	whole, err := Buffer(context.Background(), resp, 10)
	assert.False(t, whole)
	require.ErrorContains(t, err, "longer than its Content-Length")
	assert.Equal(t, 1, rc.Closes())
}

// A body found longer than its Content-Length is read no further than
// the one byte that tells it.
func TestBufferReadsALongerBodyOneBytePastItsLength(t *testing.T) {
	for _, cl := range []int64{0, 1, 5, 9} {
		t.Run(fmt.Sprint(cl), func(t *testing.T) {
			cr := &countingReader{r: strings.NewReader(strings.Repeat("x", 100))}
			resp := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(cr), ContentLength: cl}
			_, err := Buffer(context.Background(), resp, 10)
			require.ErrorContains(t, err, "longer than its Content-Length")
			assert.LessOrEqual(t, cr.n, int(cl)+1, "bytes read")
		})
	}
}

// No limit (the largest int64) still buffers a body of unknown length.
func TestBufferWithoutALimit(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("hello")), ContentLength: -1}
	whole, err := Buffer(context.Background(), resp, math.MaxInt64)
	require.NoError(t, err)
	assert.True(t, whole)
	assert.Equal(t, "hello", testutil.ReadBody(t, resp))
}

// A body that stalls is ended by the context's end: Buffer fails with the
// context's cause, the body closed once.
func TestBufferEndsAStalledBodyAtTheContextsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errGone := errors.New("caller gone")
		ctx, cancel := context.WithCancelCause(t.Context())
		body := testutil.NewStalledBody()
		time.AfterFunc(time.Second, func() { cancel(errGone) })
		resp := &http.Response{StatusCode: http.StatusOK, Body: body, ContentLength: 5}
		whole, err := Buffer(ctx, resp, 10)
		assert.False(t, whole)
		require.ErrorIs(t, err, errGone)
		assert.Equal(t, 1, body.Closes())
	})
}

// sizesReader records the room each read offers, reading from r.
type sizesReader struct {
	r     io.Reader
	sizes []int
}

func (s *sizesReader) Read(p []byte) (int, error) {
	s.sizes = append(s.sizes, len(p))
	return s.r.Read(p)
}

// readUpTo's first read offers room for hint+1 bytes (512 when the hint
// is unknown), at most readStart, never more than most; no read offers
// room past most, and all of a reader's bytes up to most are read.
func TestReadUpToFirstRoom(t *testing.T) {
	for _, tc := range []struct {
		name       string
		most, hint int64
		first      int
	}{
		{"unknown length", 100000, -1, 512},
		{"empty", 100000, 0, 1},
		{"known length", 100000, 100, 101},
		{"large length", 1 << 30, 1 << 20, readStart},
		{"length past most", 50, 100, 50},
		{"unknown length past most", 50, -1, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := strings.Repeat("x", 3000)
			sr := &sizesReader{r: strings.NewReader(content)}
			buf, err := readUpTo(sr, tc.most, tc.hint)
			require.NoError(t, err)
			assert.Equal(t, content[:min(int64(len(content)), tc.most)], string(buf))
			require.NotEmpty(t, sr.sizes)
			assert.Equal(t, tc.first, sr.sizes[0], "first room")
			read := 0
			for _, size := range sr.sizes {
				assert.LessOrEqual(t, int64(read+size), tc.most, "room past most")
				read += min(size, len(content)-read)
			}
		})
	}
}
