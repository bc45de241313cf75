package recent

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Keys are bounded: the least recently used go first, and each after its
// TTL.
func TestRecentKeysAreBounded(t *testing.T) {
	var r Keys
	now := time.Now()
	for i := range MaxKeys + 100 {
		r.Add(fmt.Sprint("k", i), 0, 1, now)
	}
	assert.Len(t, r.keys, MaxKeys)
	assert.Zero(t, r.Prior("k0", now), "the oldest went first")
	assert.Equal(t, 1, r.Prior(fmt.Sprint("k", MaxKeys+99), now))
	r.Add("k5000", 1, 2, now)
	assert.Equal(t, 3, r.Prior("k5000", now), "attempts add up")
	assert.Equal(t, 3, r.Prior("k5000", now.Add(TTL)))
	assert.Zero(t, r.Prior("k5000", now.Add(TTL+1)), "forgotten after the TTL")
}

// A key leaves once its time is over, counted from its last use, not only
// when newer keys push it out.
func TestRecentKeysForgetKeysWhoseTimeIsOver(t *testing.T) {
	var r Keys
	now := time.Now()
	for i := range 100 {
		r.Add(fmt.Sprint("old", i), 0, 1, now)
	}
	r.Add("used again", 0, 1, now)
	r.Add("used again", 1, 1, now.Add(9*time.Minute))
	r.Add("late", 0, 1, now.Add(TTL+time.Minute))
	assert.Equal(t, 2, len(r.keys), "the old keys left")
	assert.Equal(t, 2, r.Prior("used again", now.Add(TTL+time.Minute)))
	assert.Equal(t, 1, r.Prior("late", now.Add(TTL+time.Minute)))
	assert.LessOrEqual(t, len(r.uses), 2*len(r.keys)+64, "uses recorded")
}

// A key used again and again while older keys stay does not pile up uses.
func TestRecentKeysCompactTheirUses(t *testing.T) {
	var r Keys
	now := time.Now()
	r.Add("first", 0, 1, now)
	for i := range 10000 {
		r.Add("again", i, 1, now)
	}
	assert.Len(t, r.keys, 2)
	assert.LessOrEqual(t, len(r.uses), 2*len(r.keys)+64, "uses recorded")
	assert.Equal(t, 1, r.Prior("first", now))
	assert.Equal(t, 10000, r.Prior("again", now))
}
