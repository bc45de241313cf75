package clock

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
)

// MonoNowIn tells a bubble's read from the real world's, as InBubble does
// from a time read, and on the scale Mono gives the time read there: in a
// bubble, an hour later by the bubble's clock is an hour later by it.
func TestMonoNowInTellsABubble(t *testing.T) {
	before := Mono(time.Now())
	m, bubble := MonoNowIn()
	assert.False(t, bubble, "outside a bubble")
	assert.False(t, InBubble(time.Now()))
	assert.LessOrEqual(t, before, m)
	assert.LessOrEqual(t, m, Mono(time.Now()))
	synctest.Test(t, func(t *testing.T) {
		m, bubble := MonoNowIn()
		assert.True(t, bubble, "in a bubble")
		assert.True(t, InBubble(time.Now()))
		assert.Equal(t, Mono(time.Now()), m, "a bubble's time stands still until its goroutines block")
		time.Sleep(time.Hour)
		m2, _ := MonoNowIn()
		assert.Equal(t, int64(time.Hour), m2-m)
	})
}
