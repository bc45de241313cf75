package mark

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

type otherKey struct{}

// A mark is found through the contexts made from its own, is live until its
// attempt is done, and leaves the parent's values readable.
func TestAMarkIsLiveUntilItsAttemptIsDone(t *testing.T) {
	parent := context.WithValue(context.Background(), otherKey{}, "v")
	c := New(parent, 3)
	child, cancel := context.WithCancel(c)
	defer cancel()
	m, live := Live(child)
	assert.Same(t, &c.Mark, m)
	assert.True(t, live)
	assert.Equal(t, 3, m.N)
	assert.Equal(t, "v", child.Value(otherKey{}))
	m.Done()
	_, live = Live(child)
	assert.False(t, live, "done")
	assert.Same(t, m, Of(With(context.Background(), m)), "With carries the same mark")
	m, live = Live(context.Background())
	assert.Nil(t, m)
	assert.False(t, live)
	assert.Nil(t, OfRequest(nil))
	req, _ := http.NewRequestWithContext(child, http.MethodGet, "http://x.test/", nil)
	assert.Same(t, &c.Mark, OfRequest(req))
}
