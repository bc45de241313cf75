package respbody

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Release calls its Fn once, when its body is read to its end, not
// before, and not again when it is closed.
func TestReleaseCallsFnAtTheBodysEnd(t *testing.T) {
	calls := 0
	rb := &Release{Body: io.NopCloser(strings.NewReader("hello")), Fn: func() { calls++ }}
	head := make([]byte, 3)
	_, err := io.ReadFull(rb, head)
	require.NoError(t, err)
	assert.Zero(t, calls, "the body is not over")
	rest, err := io.ReadAll(rb)
	require.NoError(t, err)
	assert.Equal(t, "lo", string(rest))
	assert.Equal(t, 1, calls, "read to its end")
	require.NoError(t, rb.Close())
	assert.Equal(t, 1, calls, "once")
}

// A Release closed before its end calls Fn once, after closing the body,
// whose error it returns; an abort (a drain's cut-off) calls Fn too.
func TestReleaseCallsFnOnClose(t *testing.T) {
	errClose := errors.New("close failed")
	calls := 0
	body := &closeErr{Reader: strings.NewReader("hello"), err: errClose}
	rb := &Release{Body: body, Fn: func() {
		calls++
		assert.Equal(t, 1, body.closes, "Fn runs after the body is closed")
	}}
	assert.ErrorIs(t, rb.Close(), errClose)
	assert.Equal(t, 1, calls)
	rb.abort()
	assert.Equal(t, 1, calls, "once")

	aborted := 0
	rb = &Release{Body: io.NopCloser(strings.NewReader("hello")), Fn: func() { aborted++ }}
	rb.abort()
	assert.Equal(t, 1, aborted, "abort ends the attempt")
	require.NoError(t, rb.Close())
	assert.Equal(t, 1, aborted, "once")
}

// rwBody is the read-write body of an upgraded connection.
type rwBody struct {
	io.Reader
	written bytes.Buffer
}

func (b *rwBody) Write(p []byte) (int, error) { return b.written.Write(p) }
func (*rwBody) Close() error                  { return nil }

// Wrap keeps the body of a 101 Switching Protocols writable, its writes
// reaching the connection; any other response's body is the Release.
func TestWrapKeepsAnUpgradedBodyWritable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		code     int
		body     io.ReadCloser
		writable bool
	}{
		{"101 read-write", http.StatusSwitchingProtocols, &rwBody{Reader: strings.NewReader("hi")}, true},
		{"200 read-write", http.StatusOK, &rwBody{Reader: strings.NewReader("hi")}, false},
		{"101 read-only", http.StatusSwitchingProtocols, io.NopCloser(strings.NewReader("hi")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			resp := &http.Response{StatusCode: tc.code, Body: tc.body}
			rb := &Release{Body: tc.body, Fn: func() { calls++ }}
			Wrap(resp, rb)
			w, ok := resp.Body.(io.Writer)
			require.Equal(t, tc.writable, ok, "writable")
			if !ok {
				assert.Same(t, rb, resp.Body)
				return
			}
			_, err := w.Write([]byte("ping"))
			require.NoError(t, err)
			assert.Equal(t, "ping", tc.body.(*rwBody).written.String(), "written to the connection")
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, "hi", string(got))
			require.NoError(t, resp.Body.Close())
			assert.Equal(t, 1, calls, "the Release's Fn, once")
		})
	}
}
