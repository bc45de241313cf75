package testutil

import (
	"sync"
	"time"
)

// Every calls fn(i) from a goroutine of its own at begin + i*gap, for i
// from 0 while i*gap < d, and returns the number of calls; wg counts them.
// A slow scheduler delays the calls, never drops one.
func Every(wg *sync.WaitGroup, begin time.Time, gap, d time.Duration, fn func(i int)) int {
	n := 0
	for ; time.Duration(n)*gap < d; n++ {
		time.Sleep(time.Until(begin.Add(time.Duration(n) * gap)))
		i := n
		wg.Go(func() { fn(i) })
	}
	return n
}

// lagProbeTick is how often a LagProbe asks to be woken.
const lagProbeTick = 2 * time.Millisecond

// A LagProbe measures how late the Go scheduler runs a goroutine whose
// timer has fired: on a machine busy with other work, every call that
// ends at its deadline ends that much later, whatever the client does,
// and a scenario's figures are the machine's as much as the client's.
type LagProbe struct {
	done, stopped chan struct{}
	worst         time.Duration
}

// StartLagProbe starts a probe.
func StartLagProbe() *LagProbe {
	p := &LagProbe{done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(p.stopped)
		tick := time.NewTimer(lagProbeTick)
		defer tick.Stop()
		for {
			due := time.Now().Add(lagProbeTick)
			tick.Reset(lagProbeTick)
			select {
			case <-p.done:
				return
			case <-tick.C:
				p.worst = max(p.worst, time.Since(due))
			}
		}
	}()
	return p
}

// Stop ends the probe and returns the worst lag it saw.
func (p *LagProbe) Stop() time.Duration {
	close(p.done)
	<-p.stopped
	return p.worst
}
