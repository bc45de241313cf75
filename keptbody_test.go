package retryhttp

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/clock"
)

// A kept body reads back exactly the bytes kept, as an io.Reader must,
// and copies them whole through WriteTo.
func TestAKeptBodyReadsBackWhatWasKept(t *testing.T) {
	content := []byte(`{"type":"about:blank","title":"Service Unavailable","status":503}`)
	require.NoError(t, iotest.TestReader(&keptBody{bytes.Clone(content)}, content))
	require.NoError(t, iotest.TestReader(&keptBody{}, nil))

	var out bytes.Buffer
	k := &keptBody{bytes.Clone(content)}
	head := make([]byte, 9)
	_, err := io.ReadFull(k, head)
	require.NoError(t, err)
	n, err := io.Copy(&out, k)
	require.NoError(t, err)
	assert.EqualValues(t, len(content)-9, n)
	assert.Equal(t, content, append(head, out.Bytes()...))
	n, err = k.WriteTo(&out)
	assert.Zero(t, n, "nothing left")
	assert.NoError(t, err)
}

// lyingBody is a body whose Content-Length says otherwise: it holds b, then
// returns err (io.EOF for a plain end), and with stuck it answers nothing,
// without an error, forever.
type lyingBody struct {
	b     []byte
	err   error
	stuck bool
}

func (l *lyingBody) Read(p []byte) (int, error) {
	if len(l.b) == 0 {
		if l.stuck {
			return 0, nil
		}
		return 0, l.err
	}
	n := copy(p, l.b)
	l.b = l.b[n:]
	return n, nil
}

func (*lyingBody) Close() error { return nil }

// keepClose keeps exactly the body that came, whatever its Content-Length
// said, and loses it (false) where it cannot: past drainLimit, on a read
// error, or from a reader that stops making progress.
func TestKeepCloseKeepsTheBodyThatCame(t *testing.T) {
	tr := &Transport{clock: clock.Real{}}
	body := bytes.Repeat([]byte("503 "), 40) // 160 bytes
	big := bytes.Repeat([]byte("x"), drainLimit)
	for _, tc := range []struct {
		name   string
		cl     int64
		body   *lyingBody
		kept   bool
		want   []byte
		capAll bool // the buffer is exactly the body's size
	}{
		{"as announced", 160, &lyingBody{b: body, err: io.EOF}, true, body, true},
		{"shorter than announced", 200, &lyingBody{b: body, err: io.EOF}, true, body, false},
		{"one byte longer", 159, &lyingBody{b: body, err: io.EOF}, true, body, false},
		{"far longer", 10, &lyingBody{b: body, err: io.EOF}, true, body, false},
		{"unknown length", -1, &lyingBody{b: body, err: io.EOF}, true, body, false},
		{"longer than drainLimit", 10, &lyingBody{b: append(big, 'y'), err: io.EOF}, false, nil, false},
		{"as long as drainLimit", drainLimit, &lyingBody{b: big, err: io.EOF}, true, big, true},
		{"read error after the end", 160, &lyingBody{b: body, err: io.ErrUnexpectedEOF}, false, nil, false},
		{"no progress after the end", 160, &lyingBody{b: body, stuck: true}, false, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 503, ContentLength: tc.cl, Body: tc.body}
			require.Equal(t, tc.kept, tr.keepClose(resp, time.Minute))
			if !tc.kept {
				return
			}
			k := resp.Body.(*keptBody)
			assert.Equal(t, tc.want, k.b)
			if tc.capAll {
				assert.Equal(t, len(k.b), cap(k.b), "a buffer of the body's size")
			}
		})
	}
}
