package budget

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/retryhttp/retryhttp/internal/clock"
	"github.com/retryhttp/retryhttp/internal/hosts"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// wait in line must end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// sameTime asserts that got is the instant want.
func sameTime(t *testing.T, want, got time.Time, msg ...any) {
	t.Helper()
	assert.True(t, want.Equal(got), append([]any{"want %v, got %v", want, got}, msg...)...)
}

// spend spends the credit of l at now until it refuses (or limit retries
// were paid for) and returns how many it paid for.
func spend(l *Account, now time.Time, limit int) int {
	n := 0
	for n < limit && l.Spend(now) {
		n++
	}
	return n
}

func TestCreditIsEarnedBySuccesses(t *testing.T) {
	l := New(0.2, 10).Start("h")
	assert.Equal(t, 10, spend(l, at(0), 100), "a new account holds the whole credit")
	for range 4 {
		l.Success(clock.Real{}, false)
	}
	assert.Equal(t, 0, spend(l, at(0), 100), "4 successes earn 0.8 of a retry")
	l.Success(clock.Real{}, false)
	assert.Equal(t, 1, spend(l, at(0), 100), "the fifth earns the whole retry")
	for range 1000 {
		l.Success(clock.Real{}, false)
	}
	assert.Equal(t, 10, spend(l, at(0), 100), "credit never exceeds the budget's size")
}

// A ratio far below a thousandth still earns: a success in 2,500 earns a
// retry, so 5,000 earn two (held up to the credit of one).
func TestASmallRatioEarns(t *testing.T) {
	l := New(0.0004, 1).Start("h")
	assert.Equal(t, 1, spend(l, at(0), 100))
	for range 2499 {
		l.Success(clock.Real{}, false)
	}
	assert.Equal(t, 0, spend(l, at(0), 100), "2,499 successes earn less than a retry")
	l.Success(clock.Real{}, false)
	assert.Equal(t, 1, spend(l, at(0), 100), "the 2,500th earns the whole retry")
	for range 5000 {
		l.Success(clock.Real{}, false)
	}
	assert.Equal(t, 1, spend(l, at(0), 100), "5,000 earn two, held up to the credit")
	ratio, _ := New(1e-6, 1).Params()
	assert.Equal(t, 1e-6, ratio, "a ratio is kept to a billionth")
}

// The credit refills by itself, all of it in 10 s: a tenth a second.
func TestCreditRefillsInTenSeconds(t *testing.T) {
	l := New(0, 10).Start("h")
	assert.Equal(t, 10, spend(l, at(0), 100))
	assert.Equal(t, 0, spend(l, at(ms(99)), 100))
	assert.Equal(t, 1, spend(l, at(ms(1100)), 100), "1.1 s: a retry and a tenth")
	assert.Equal(t, 1, spend(l, at(ms(2000)), 100), "with the tenth left, 0.9 s more make one")
	assert.Equal(t, 10, spend(l, at(time.Hour), 100), "never more than the credit")
	assert.Equal(t, 0, spend(l, at(0), 100), "a clock that goes back (another bubble's) refills nothing")
}

func TestNewBudgetArguments(t *testing.T) {
	assert.Equal(t, 0, spend(New(-1, -5).Start("h"), at(0), 100), "no credit")
	l := New(-1, 1).Start("h")
	assert.Equal(t, 1, spend(l, at(0), 100))
	for range 100 {
		l.Success(clock.Real{}, false)
	}
	assert.Equal(t, 0, spend(l, at(0), 100), "a negative ratio earns nothing")
	ratio, credit := New(2000, 2_000_000).Params()
	assert.Equal(t, 1000.0, ratio)
	assert.Equal(t, 1_000_000, credit)
	ratio, credit = new(Budget).Params()
	assert.Equal(t, DefaultRatio, ratio)
	assert.Equal(t, DefaultCredit, credit)
}

// A nil Budget, and its nil Account, allow every retry at no cost.
func TestNilBudgetAllowsEveryRetry(t *testing.T) {
	var b *Budget
	l := b.Start("h")
	assert.Nil(t, l)
	var id uint64
	l.Failure(t0, &id)
	l.Success(clock.Real{}, false)
	l.Refund()
	l.End()
	assert.Equal(t, Go, l.Retry(t0, id))
	assert.Equal(t, 100_000, spend(l, t0, 100_000))
	released, _ := l.Wait(clock.Real{}, t.Context(), t0, 0)
	assert.True(t, released, "let go at once")
}

// A retry that paid for itself and succeeded gives its retry of credit
// back; any other success earns the ratio: a host whose retries all
// succeed never runs out of credit.
func TestASuccessfulRetryGivesItsCreditBack(t *testing.T) {
	l := New(0, 2).Start("h")
	var id uint64
	for i := range 1000 {
		l.Failure(at(ms(i)), &id)
		if !assert.Equal(t, Go, l.Retry(at(ms(i)), id), "retry %d", i+1) {
			break
		}
		l.Success(clock.Real{}, true)
	}
	assert.Equal(t, 2, spend(l, at(time.Second), 100), "the credit whole")
	l.Success(clock.Real{}, false)
	assert.Zero(t, spend(l, at(time.Second), 100), "a success that paid nothing earns the ratio, 0")
	l.End()
}

// Alone (no other request to the host in flight), a retry goes while the
// credit pays for it, whatever the request's own failures, and is refused
// at once when it cannot.
func TestAloneARetryGoesOnCredit(t *testing.T) {
	b := New(0, 3)
	l := b.Start("h")
	var id uint64
	for i := range 3 {
		l.Failure(at(ms(i)), &id)
		assert.Equal(t, Go, l.Retry(at(ms(i)), id), "retry %d: its own failures are no evidence", i+1)
	}
	l.Failure(at(ms(3)), &id)
	assert.Equal(t, Refuse, l.Retry(at(ms(3)), id), "the credit is spent, and no news is coming")
	l.End()
}

// With another request in flight, a retry waits in line when another
// request failed the host in the last 10 s, or when the credit cannot pay
// for it; a failure older than 10 s is no evidence.
func TestOthersInFlightAndTheirFailuresHoldARetry(t *testing.T) {
	b := New(0, 2)
	mine, other := b.Start("h"), b.Start("h")
	var me, them uint64
	other.Failure(at(0), &them)
	mine.Failure(at(ms(5)), &me)
	assert.Equal(t, Wait, mine.Retry(at(ms(5)), me), "another request failed: evidence")
	assert.Equal(t, Go, mine.Retry(at(10*time.Second), me), "10 s later it is no evidence")
	assert.Equal(t, Go, mine.Retry(at(10*time.Second), me), "paid")
	assert.Equal(t, Wait, mine.Retry(at(10*time.Second), me), "no credit, but news may come: the other is in flight")
	other.End()
	assert.Equal(t, Refuse, mine.Retry(at(10*time.Second), me), "nothing else in flight: refused")
	mine.End()
}

// Only failures count as evidence; a request's id is given at its first
// failure and kept.
func TestFailureGivesARequestItsID(t *testing.T) {
	l := New(0, 10).Start("h")
	var a, b uint64
	l.Failure(at(0), &a)
	l.Failure(at(0), &b)
	id := a
	l.Failure(at(0), &a)
	assert.NotZero(t, a)
	assert.NotEqual(t, a, b)
	assert.Equal(t, id, a, "kept")
	l.End()
}

// Each host has its own account: its credit, its evidence and its line. Host
// names compare in ASCII lower case.
func TestEachHostHasItsOwnAccount(t *testing.T) {
	b := New(0, 1)
	a := b.Start("a.test")
	assert.Same(t, a, b.Start("A.TEST"))
	other := b.Start("b.test")
	assert.Equal(t, 1, spend(a, at(0), 10))
	assert.Equal(t, 1, spend(other, at(0), 10), "a's spent credit is not b's")
	var id uint64
	a.Failure(at(0), &id)
	assert.True(t, a.failing.Load())
	assert.False(t, other.failing.Load())
	for _, l := range []*Account{a, a, other} {
		l.End()
	}
}

// Past 1,024 hosts, accounts with no request in flight are forgotten, oldest
// first; an account with a request in flight is kept, and a request starting
// on an account being forgotten gets the new one.
func TestIdleAccountsAreForgotten(t *testing.T) {
	b := New(0, 1)
	busy := b.Start("busy.test")
	spend(busy, at(0), 1)
	for i := range hosts.Most + 10 {
		b.Start(fmt.Sprintf("h%d.test", i)).End()
	}
	assert.LessOrEqual(t, b.accounts.Len(), hosts.Most)
	assert.Same(t, busy, b.Start("busy.test"), "in flight: kept")
	assert.Zero(t, spend(busy, at(0), 1), "with its spent credit")
	first := b.Start("h0.test")
	assert.Equal(t, 1, spend(first, at(0), 1), "forgotten: a new account, its credit full")
	first.End()
	busy.End()
	busy.End()

	gone := &Account{b: b}
	gone.active.Store(forgotten)
	assert.False(t, gone.Enter())
	assert.EqualValues(t, forgotten, gone.active.Load(), "left as it was")
}

// Concurrent retries never spend more than the credit.
func TestConcurrentRetriesNeverExceedTheCredit(t *testing.T) {
	b := New(0, 100)
	l := b.Start("h")
	var paid atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if l.Spend(at(0)) {
					paid.Add(1)
				}
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 100, paid.Load())
	l.End()
}

// A success is lock-free and reads no clock unless the host failed last or
// retries wait.
func TestSuccessReadsTheClockOnlyWhenItIsNews(t *testing.T) {
	l := New(0, 1).Start("h")
	clk := &countingClock{}
	l.Success(clk, false)
	assert.Zero(t, clk.reads.Load())
	var id uint64
	l.Failure(at(0), &id)
	l.Success(clk, false)
	assert.EqualValues(t, 1, clk.reads.Load(), "the host failed last: news")
	l.Success(clk, false)
	assert.EqualValues(t, 1, clk.reads.Load(), "no longer")
	l.End()
}

// countingClock is the real clock, counting its reads.
type countingClock struct {
	clock.Real
	reads atomic.Int32
}

func (c *countingClock) Now() time.Time { c.reads.Add(1); return c.Real.Now() }

func BenchmarkAccount(b *testing.B) {
	bg := New(0.55, 10)
	b.Run("start-success-end", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l := bg.Start("api.test:443")
				l.Success(clock.Real{}, false)
				l.End()
			}
		})
	})
}

// The credit refills at its rate however often it is read: a credit of one
// retry, read every 15 ms (each read refilling 0.15 % of a retry),
// holds a whole retry again 10 s after it was spent, as one never read.
func TestCreditRefillsAtItsRateHoweverOftenRead(t *testing.T) {
	quiet, read := New(0, 1).Start("h"), New(0, 1).Start("h")
	assert.True(t, quiet.Spend(at(0)))
	assert.True(t, read.Spend(at(0)))
	paid := 0
	for d := ms(15); d < 10*time.Second; d += ms(15) {
		if read.Spend(at(d)) {
			paid++
		}
	}
	assert.Zero(t, paid, "no whole retry refilled before 10 s")
	assert.True(t, quiet.Spend(at(10*time.Second)), "unread: refilled at 10 s")
	assert.True(t, read.Spend(at(10*time.Second)), "read every 15 ms: refilled at 10 s")
	quiet.End()
	read.End()
}

// A Budget keeps an account for up to 1,024 hosts; making the 1,025th forgets
// the oldest idle accounts, down to half of 1,024, before the new one joins.
func TestAnAccountPast1024ForgetsTheOldestIdleHalf(t *testing.T) {
	b := New(0, 1)
	accounts := make([]*Account, hosts.Most)
	for i := range accounts {
		accounts[i] = b.Start(fmt.Sprintf("h%d.test", i))
		accounts[i].End()
	}
	assert.Equal(t, hosts.Most, b.accounts.Len(), "1,024 hosts: every account kept")
	b.Start("new.test").End()
	assert.Equal(t, hosts.Most/2+1, b.accounts.Len(), "half of 1,024 kept, and the new one")
	kept := b.Start(fmt.Sprintf("h%d.test", hosts.Most/2))
	assert.Same(t, accounts[hosts.Most/2], kept, "the oldest of the newer half is kept")
	kept.End()
	for _, i := range []int{0, hosts.Most/2 - 1} {
		l := b.Start(fmt.Sprintf("h%d.test", i))
		assert.NotSame(t, accounts[i], l, "h%d, of the older half, was forgotten", i)
		l.End()
	}
}
