package main

import (
	"math"
	"slices"
	"time"

	"github.com/retryhttp/retryhttp/bench"
)

// The calibration of the fixed delay: pilot runs of failsafe-go's fixed
// policy, each pilotRun long, at most maxPilots of them, until one sends
// the adaptive run's extra requests within pilotTol.
const (
	pilotRun   = time.Second
	maxPilots  = 10
	pilotTol   = 0.01
	pilotGrain = 10 * time.Microsecond // delays tried are multiples of it
)

// A pilot is one short run of the fixed policy at a delay, and the extra
// requests it sent.
type pilot struct {
	Delay time.Duration
	Extra float64
}

// calibrate looks for the fixed delay at which try, a short run of a
// policy hedging every request unanswered after the delay, sends target
// extra requests, within tol. The first delay tried is start; while no
// delay tried is known to send too few hedges it grows by a quarter,
// while none is known to send too many it shrinks by a fifth, then it
// bisects the two nearest delays that bracket target. It stops at the first pilot within
// tol, after most of them, or when the bracket is down to one grain; then
// it returns the delay of the pilot nearest target (the shorter on a tie)
// and every pilot, in the order run.
func calibrate(target, tol float64, start time.Duration, most int, try func(time.Duration) float64) (time.Duration, []pilot) {
	round := func(d time.Duration) time.Duration { return max(d.Round(pilotGrain), pilotGrain) }
	var (
		pilots []pilot
		short  time.Duration // the longest delay tried that sent too many hedges; 0 if none
		long   time.Duration // the shortest delay tried that sent too few; 0 if none
	)
	d := round(start)
	for len(pilots) < most {
		e := try(d)
		pilots = append(pilots, pilot{d, e})
		if math.Abs(e-target) <= tol {
			break
		}
		if e > target {
			short = max(short, d)
		} else if long == 0 || d < long {
			long = d
		}
		switch {
		case long == 0:
			d = round(d * 5 / 4)
		case short == 0:
			d = round(d * 4 / 5)
		default:
			d = round((short + long) / 2)
		}
		if d == short || d == long {
			break
		}
	}
	best := slices.MinFunc(pilots, func(a, b pilot) int {
		da, db := math.Abs(a.Extra-target), math.Abs(b.Extra-target)
		switch {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return int(a.Delay - b.Delay)
	})
	return best.Delay, pilots
}

// startDelay is where the calibration begins: the median delay of the
// adaptive run's hedges, or, if it sent none, the latency that share of
// the unhedged run's requests exceeded.
func startDelay(adaptive, none bench.HedgeResult, share float64) time.Duration {
	var ds []time.Duration
	for _, h := range adaptive.Hedges {
		ds = append(ds, h.Delay)
	}
	if len(ds) == 0 {
		return bench.DelayFor(none, share)
	}
	slices.Sort(ds)
	return bench.Quantile(ds, 0.5)
}
