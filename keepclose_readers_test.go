package retryhttp

import (
	"bytes"
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
	tr := &Transport{clock: clock.Real{}}
	body := bytes.Repeat([]byte("503 "), 40)
	big := bytes.Repeat([]byte("x"), drainLimit)
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
		{"CL 10, drainLimit bytes", 10, bytes.NewReader(big), true, big},
		{"CL drainLimit, one more", drainLimit, bytes.NewReader(append(bytes.Clone(big), 'y')), false, nil},
		{"timeout error in body", 160, iotest.TimeoutReader(bytes.NewReader(body)), false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &rc{Reader: tc.r}
			resp := &http.Response{StatusCode: 503, ContentLength: tc.cl, Body: b}
			require.Equal(t, tc.kept, tr.keepClose(resp, time.Minute))
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
// and the next keepClose (a pooled cutter, or a fresh one) works.
func TestCutterFiresDuringProbe(t *testing.T) {
	tr := &Transport{clock: clock.Real{}}
	body := bytes.Repeat([]byte("503 "), 40)
	b := &blockAfter{b: bytes.Clone(body), closed: make(chan struct{})}
	resp := &http.Response{StatusCode: 503, ContentLength: 160, Body: b}
	start := time.Now()
	assert.False(t, tr.keepClose(resp, 30*time.Millisecond))
	assert.Less(t, time.Since(start), time.Second)
	assert.EqualValues(t, 1, b.closes.Load())
	for range 100 {
		r := &rc{Reader: bytes.NewReader(body)}
		resp := &http.Response{StatusCode: 503, ContentLength: 159, Body: r}
		require.True(t, tr.keepClose(resp, time.Minute))
		require.Equal(t, body, resp.Body.(*keptBody).b)
	}
}
