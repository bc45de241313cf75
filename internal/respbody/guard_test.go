package respbody

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retryhttp/retryhttp/internal/testutil"
)

// At its context's end a Guard closes a body whose reads ignore contexts,
// which ends a read in progress; that read and every later one fail with
// the context's cause, not the closed body's error.
func TestGuardEndsAStalledReadAtTheContextsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errGone := errors.New("caller gone")
		ctx, cancel := context.WithCancelCause(t.Context())
		body := testutil.NewStalledBody()
		g := NewGuard(ctx, body)
		defer g.Stop()
		time.AfterFunc(time.Second, func() { cancel(errGone) })
		start := time.Now()
		_, err := g.Read(make([]byte, 8))
		assert.ErrorIs(t, err, errGone)
		assert.Equal(t, time.Second, time.Since(start), "ended by the context")
		_, err = g.Read(make([]byte, 8))
		assert.ErrorIs(t, err, errGone, "and every read after")
		require.NoError(t, g.Close())
		assert.Equal(t, 1, body.Closes(), "closed once, by the context's end")
	})
}

// Before its context's end, a Guard passes the body's bytes and errors on
// as they are.
func TestGuardPassesTheBodysOwnErrorsBeforeTheEnd(t *testing.T) {
	errReset := errors.New("connection reset")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	g := NewGuard(ctx, io.NopCloser(io.MultiReader(strings.NewReader("hi"), &failing{errReset})))
	defer g.Stop()
	got, err := io.ReadAll(g)
	assert.Equal(t, "hi", string(got))
	assert.ErrorIs(t, err, errReset)
	assert.NotErrorIs(t, err, context.Canceled)
}

// failing is a reader whose every read fails with err.
type failing struct{ err error }

func (f *failing) Read([]byte) (int, error) { return 0, f.err }

// Once stopped, a Guard no longer closes the body at its context's end.
func TestStoppedGuardLeavesTheBodyOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		body := testutil.NewCloseRecorder(strings.NewReader("hello"))
		g := NewGuard(ctx, body)
		g.Stop()
		cancel()
		synctest.Wait()
		assert.Zero(t, body.Closes())
		got, err := io.ReadAll(g)
		require.NoError(t, err)
		assert.Equal(t, "hello", string(got))
	})
}

// A Guard on a context that never ends is the body itself; Stop is
// harmless.
func TestGuardOnAContextThatNeverEnds(t *testing.T) {
	body := testutil.NewCloseRecorder(strings.NewReader("hello"))
	g := NewGuard(context.Background(), body)
	got, err := io.ReadAll(g)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	g.Stop()
	require.NoError(t, g.Close())
	assert.Equal(t, 1, body.Closes())
}

// closeErr is a body whose Close fails with err, counting its calls.
type closeErr struct {
	io.Reader
	err    error
	closes int
}

func (c *closeErr) Close() error { c.closes++; return c.err }

// A Guard closes its body once, however often it is closed, and every
// Close returns that Close's error.
func TestGuardClosesTheBodyOnce(t *testing.T) {
	errClose := errors.New("close failed")
	body := &closeErr{Reader: strings.NewReader(""), err: errClose}
	g := NewGuard(context.Background(), body)
	assert.ErrorIs(t, g.Close(), errClose)
	assert.ErrorIs(t, g.Close(), errClose)
	assert.Equal(t, 1, body.closes)
}
