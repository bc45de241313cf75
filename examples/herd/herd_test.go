package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// small is a herd small enough to simulate in a few milliseconds that
// still overwhelms the dependency when it comes back.
func small() scenario {
	return scenario{
		Clients:     200,
		Spread:      10 * time.Millisecond,
		Outage:      500 * time.Millisecond,
		Capacity:    5,
		MaxAttempts: 8,
		Transports:  1,
		Seed:        7,
	}
}

// byName runs every strategy on sc and returns the results by name.
func byName(sc scenario) map[string]*result {
	out := map[string]*result{}
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		out[s.Name] = simulate(sc, s)
	}
	return out
}

func TestSameSeedSameRunOtherSeedOtherRun(t *testing.T) {
	sc := small()
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		assert.Equal(t, simulate(sc, s), simulate(sc, s), "%s: a seed must give one result", s.Name)
	}

	other := sc
	other.Seed++
	jittered := strategies(100*time.Millisecond, 10*time.Second)[1]
	assert.False(t, reflect.DeepEqual(simulate(sc, jittered).Served, simulate(other, jittered).Served), "another seed must draw other delays")
}

func TestTheProgramPrintsTheSameForASeed(t *testing.T) {
	dir := t.TempDir()
	outputs := make([]string, 2)
	svgs := make([][]byte, 2)
	for i := range outputs {
		var buf bytes.Buffer
		path := filepath.Join(dir, "herd.svg")
		require.NoError(t, run(&buf, small(), 100*time.Millisecond, 10*time.Second, path))
		outputs[i] = strings.ReplaceAll(buf.String(), path, "FILE")
		var err error
		svgs[i], err = os.ReadFile(path)
		require.NoError(t, err)
	}
	assert.Equal(t, outputs[0], outputs[1])
	assert.Equal(t, svgs[0], svgs[1])
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		assert.Contains(t, outputs[0], "\n"+s.Name+"\n", "a histogram per strategy")
	}
}

func TestWithoutJitterTheHerdHitsInLockstep(t *testing.T) {
	r := byName(small())
	noJitter, full := r["no jitter"].Peak(small().Outage), r["full jitter"].Peak(small().Outage)

	// Every client that is still failing comes back in the same 10 ms.
	assert.Greater(t, noJitter, 150, "no jitter: peak once the dependency is back")
	assert.Less(t, full, 30, "full jitter: peak once the dependency is back")
	assert.Greater(t, noJitter, 8*full)
	assert.Positive(t, r["no jitter"].Exhausted, "a lockstep herd drains at capacity per volley, too slowly for 8 attempts")
	for _, name := range []string{"full jitter", "equal jitter", "decorrelated"} {
		assert.Zero(t, r[name].Unfinished(), "%s serves every client within 8 attempts", name)
	}
}

func TestTheBudgetBoundsTheAttempts(t *testing.T) {
	sc := small()
	r := byName(sc)
	// Retries within one window: 20 % of the requests plus 10/s over 10 s.
	allowed := int(retryhttp.DefaultBudgetRatio*float64(sc.Clients)) +
		int(retryhttp.DefaultBudgetMinPerSec*retryhttp.DefaultBudgetWindow.Seconds())
	for _, name := range []string{"no jitter", "full jitter", "equal jitter", "decorrelated"} {
		with, without := r[name+" + budget"], r[name]
		assert.Less(t, with.Attempts, without.Attempts, name)
		assert.LessOrEqual(t, with.Attempts, sc.Clients+allowed, "%s + budget: the whole run fits in one budget window", name)
		assert.Positive(t, with.BudgetDenied, "%s + budget", name)
	}
}

func TestABudgetPerClientAllowsEveryRetry(t *testing.T) {
	sc := small()
	sc.Transports = sc.Clients // each client its own Transport: the floor covers all its retries
	r := byName(sc)
	for _, name := range []string{"no jitter", "full jitter", "equal jitter", "decorrelated"} {
		assert.Equal(t, r[name], withoutBudgetName(r[name+" + budget"]), name)
	}
}

// withoutBudgetName returns r as if its strategy had no budget, for
// comparing everything else.
func withoutBudgetName(r *result) *result {
	c := *r
	c.Strategy.Name = strings.TrimSuffix(c.Strategy.Name, " + budget")
	c.Strategy.Budget = false
	return &c
}

func TestEnoughAttemptsServeEveryClient(t *testing.T) {
	sc := small()
	// The lockstep herd gets capacity served per volley: clients/capacity
	// volleys after the outage's.
	sc.MaxAttempts = 60
	for name, r := range byName(sc) {
		if r.Strategy.Budget {
			continue
		}
		assert.Zero(t, r.Unfinished(), name)
		assert.Equal(t, sc.Clients, r.Succeeded, name)
	}
}

func TestTheDependencyServesOnlyWhenUpAndWithinCapacity(t *testing.T) {
	sc := small()
	for name, r := range byName(sc) {
		arrivals, served := 0, 0
		for i := range r.Served {
			assert.LessOrEqual(t, r.Served[i], sc.Capacity, "%s: slot %d", name, i)
			if time.Duration(i)*slot < sc.Outage {
				assert.Zero(t, r.Served[i], "%s: slot %d is in the outage", name, i)
			}
			arrivals += r.Served[i] + r.Failed[i]
			served += r.Served[i]
		}
		assert.Equal(t, r.Attempts, arrivals, name)
		assert.Equal(t, r.Succeeded, served, name)
		assert.Equal(t, sc.Clients, r.Succeeded+r.Exhausted+r.BudgetDenied, "%s: every client ends once", name)
	}
}

func TestOneClientFollowsTheBackoffSchedule(t *testing.T) {
	sc := scenario{Clients: 1, Outage: time.Second, Capacity: 1, MaxAttempts: 8, Transports: 1, Seed: 1}
	r := simulate(sc, strategy{Name: "no jitter", Backoff: retryhttp.Exponential{Base: 100 * time.Millisecond, Cap: 10 * time.Second}})
	// Attempts at 0, 0.1, 0.3, 0.7 s fail; the one at 1.5 s is served.
	assert.Equal(t, 5, r.Attempts)
	assert.Equal(t, 1500*time.Millisecond, r.LastSuccess)
	for _, i := range []int{0, 10, 30, 70} {
		assert.Equal(t, 1, r.Failed[i], "slot %d", i)
	}
	assert.Equal(t, 1, r.Served[150])
}

func TestTheSVGIsWellFormed(t *testing.T) {
	var buf bytes.Buffer
	sc := small()
	var results []*result
	for _, s := range strategies(100*time.Millisecond, 10*time.Second) {
		results = append(results, simulate(sc, s))
	}
	writeSVG(&buf, sc, results)

	d := xml.NewDecoder(&buf)
	paths := 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "path" {
			paths++
		}
	}
	assert.Equal(t, 2*len(results), paths, "a served and a failed path per strategy")
}

func TestBadFlagsAreRefused(t *testing.T) {
	sc := small()
	sc.Clients = 0
	assert.Error(t, run(io.Discard, sc, 100*time.Millisecond, 10*time.Second, ""))
}
