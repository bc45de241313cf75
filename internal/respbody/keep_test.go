package respbody

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
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

// Keep keeps exactly the body that came, whatever its Content-Length
// said, and loses it (false) where it cannot: past Limit, on a read
// error, or from a reader that stops making progress.
func TestKeepCloseKeepsTheBodyThatCame(t *testing.T) {
	body := bytes.Repeat([]byte("503 "), 40) // 160 bytes
	big := bytes.Repeat([]byte("x"), Limit)
	for _, tc := range []struct {
		name string
		cl   int64
		body *lyingBody
		kept bool
		want []byte
	}{
		{"as announced", 160, &lyingBody{b: body, err: io.EOF}, true, body},
		{"shorter than announced", 200, &lyingBody{b: body, err: io.EOF}, true, body},
		{"one byte longer", 159, &lyingBody{b: body, err: io.EOF}, true, body},
		{"far longer", 10, &lyingBody{b: body, err: io.EOF}, true, body},
		{"unknown length", -1, &lyingBody{b: body, err: io.EOF}, true, body},
		{"longer than Limit", 10, &lyingBody{b: append(big, 'y'), err: io.EOF}, false, nil},
		{"as long as Limit", Limit, &lyingBody{b: big, err: io.EOF}, true, big},
		{"read error after the end", 160, &lyingBody{b: body, err: io.ErrUnexpectedEOF}, false, nil},
		{"no progress after the end", 160, &lyingBody{b: body, stuck: true}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: 503, ContentLength: tc.cl, Body: tc.body}
			require.Equal(t, tc.kept, Keep(context.Background(), resp, time.Minute, clock.Real{}))
			if !tc.kept {
				return
			}
			assert.Equal(t, tc.want, resp.Body.(*keptBody).b)
		})
	}
}

// A body of announced length is kept in a buffer of that size: 512 bytes
// take 512, not the next size class up, 576, that one byte more to find the
// end would take.
func TestKeepCloseHoldsNoMoreThanTheBody(t *testing.T) {
	content := bytes.Repeat([]byte("x"), 512)
	resp := &http.Response{StatusCode: 503, ContentLength: 512, Body: &lyingBody{b: content, err: io.EOF}}
	require.True(t, Keep(context.Background(), resp, time.Minute, clock.Real{}))
	kept, ok := resp.Body.(*keptBody)
	require.True(t, ok)
	assert.Equal(t, 512, cap(kept.b), "the buffer that holds it")
	assert.Equal(t, content, kept.b)
}

type rc struct {
	io.Reader
	closes atomic.Int32
}

func (r *rc) Close() error { r.closes.Add(1); return nil }

// zeroThen answers (0, nil) zeros times before each read of r.
type zeroThen struct {
	r     io.Reader
	zeros int
	left  int
}

func (z *zeroThen) Read(p []byte) (int, error) {
	if z.left > 0 {
		z.left--
		return 0, nil
	}
	z.left = z.zeros
	return z.r.Read(p)
}

func TestKeepCloseReaders(t *testing.T) {
	body := bytes.Repeat([]byte("503 "), 40)
	big := bytes.Repeat([]byte("x"), Limit)
	for _, tc := range []struct {
		name string
		cl   int64
		r    io.Reader
		kept bool
		want []byte
	}{
		{"data with EOF", 160, iotest.DataErrReader(bytes.NewReader(body)), true, body},
		{"one byte at a time", 160, iotest.OneByteReader(bytes.NewReader(body)), true, body},
		{"zero reads between", 160, &zeroThen{r: iotest.HalfReader(bytes.NewReader(body)), zeros: 3}, true, body},
		{"seven zero reads at the end", 160, &zeroThen{r: bytes.NewReader(body), zeros: 7}, true, body},
		{"longer, extra byte with EOF", 159, iotest.DataErrReader(bytes.NewReader(body)), true, body},
		{"CL 10, Limit bytes", 10, bytes.NewReader(big), true, big},
		{"CL Limit, one more", Limit, bytes.NewReader(append(bytes.Clone(big), 'y')), false, nil},
		{"timeout error in body", 160, iotest.TimeoutReader(bytes.NewReader(body)), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &rc{Reader: tc.r}
			resp := &http.Response{StatusCode: 503, ContentLength: tc.cl, Body: b}
			require.Equal(t, tc.kept, Keep(context.Background(), resp, time.Minute, clock.Real{}))
			assert.EqualValues(t, 1, b.closes.Load())
			if tc.kept {
				assert.Equal(t, tc.want, resp.Body.(*keptBody).b)
			}
		})
	}
}

// blockAfter returns its bytes, then blocks until closed (a stream whose
// end is late).
type blockAfter struct {
	b      []byte
	once   sync.Once
	closed chan struct{}
	closes atomic.Int32
}

func (b *blockAfter) Read(p []byte) (int, error) {
	if len(b.b) > 0 {
		n := copy(p, b.b)
		b.b = b.b[n:]
		return n, nil
	}
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *blockAfter) Close() error {
	b.closes.Add(1)
	b.once.Do(func() { close(b.closed) })
	return nil
}

// The cutter fires during the probe read: the body is lost, closed once,
// and the next Keep (a pooled cutter, or a fresh one) works.
func TestCutterFiresDuringProbe(t *testing.T) {
	body := bytes.Repeat([]byte("503 "), 40)
	b := &blockAfter{b: bytes.Clone(body), closed: make(chan struct{})}
	resp := &http.Response{StatusCode: 503, ContentLength: 160, Body: b}
	start := time.Now()
	assert.False(t, Keep(context.Background(), resp, 30*time.Millisecond, clock.Real{}))
	assert.Less(t, time.Since(start), time.Second)
	assert.EqualValues(t, 1, b.closes.Load())
	for range 100 {
		r := &rc{Reader: bytes.NewReader(body)}
		resp := &http.Response{StatusCode: 503, ContentLength: 159, Body: r}
		require.True(t, Keep(context.Background(), resp, time.Minute, clock.Real{}))
		require.Equal(t, body, resp.Body.(*keptBody).b)
	}
}

// A body of unknown length is kept up to Limit bytes, inclusive; a byte
// more loses it.
func TestKeepUnknownLengthUpToLimit(t *testing.T) {
	big := bytes.Repeat([]byte("x"), Limit)
	resp := &http.Response{StatusCode: 503, ContentLength: -1, Body: &rc{Reader: bytes.NewReader(big)}}
	require.True(t, Keep(context.Background(), resp, time.Minute, clock.Real{}))
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, big, got)

	b := &rc{Reader: bytes.NewReader(append(bytes.Clone(big), 'y'))}
	resp = &http.Response{StatusCode: 503, ContentLength: -1, Body: b}
	assert.False(t, Keep(context.Background(), resp, time.Minute, clock.Real{}))
	assert.EqualValues(t, 1, b.closes.Load())
}

// A body far longer than its Content-Length is read no further than a
// byte past Limit: enough to know it cannot be kept.
func TestKeepReadsALongerBodyNoFurtherThanLimit(t *testing.T) {
	for _, cl := range []int64{10, -1} {
		cr := &countingReader{r: bytes.NewReader(make([]byte, 3*Limit))}
		b := &rc{Reader: cr}
		resp := &http.Response{StatusCode: 503, ContentLength: cl, Body: b}
		assert.False(t, Keep(context.Background(), resp, time.Minute, clock.Real{}), "Content-Length %d", cl)
		assert.LessOrEqual(t, cr.n, Limit+1, "bytes read, Content-Length %d", cl)
		assert.EqualValues(t, 1, b.closes.Load())
	}
}

// A small body of unknown length, kept while its retry waits, holds
// little more memory than its bytes, not the room it was read into.
func TestKeepSmallUnknownLengthHoldsLittleMore(t *testing.T) {
	content := bytes.Repeat([]byte("x"), 100)
	resp := &http.Response{StatusCode: 503, ContentLength: -1, Body: &rc{Reader: bytes.NewReader(content)}}
	require.True(t, Keep(context.Background(), resp, time.Minute, clock.Real{}))
	kept := resp.Body.(*keptBody)
	assert.Equal(t, content, kept.b)
	assert.LessOrEqual(t, cap(kept.b), 2*len(content), "room held")
}

// A body known empty, by its length or as NoBody, is kept as NoBody, the
// original closed.
func TestKeepEmptyBodyIsNoBody(t *testing.T) {
	b := &rc{Reader: bytes.NewReader(nil)}
	resp := &http.Response{StatusCode: 503, ContentLength: 0, Body: b}
	require.True(t, Keep(context.Background(), resp, time.Minute, clock.Real{}))
	assert.Equal(t, http.NoBody, resp.Body)
	assert.EqualValues(t, 1, b.closes.Load())

	resp = &http.Response{StatusCode: 503, ContentLength: -1, Body: http.NoBody}
	require.True(t, Keep(context.Background(), resp, time.Minute, clock.Real{}))
	assert.Equal(t, http.NoBody, resp.Body)
}
