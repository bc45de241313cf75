package retryhttp

import "sync/atomic"

// Stats are counters of a Transport since its first use.
//
// Attempts counts the attempts the Transport made; the server may see more
// requests than that. net/http sends a request again by itself, within one
// attempt, when a reused connection fails before any byte of the response
// and the request is replayable (a GET, HEAD, OPTIONS or TRACE, or one with
// an idempotency key, whose body can be sent again). NetHTTPResends counts
// these resends in the attempts the Transport watches: those of a request
// it added an idempotency key to, and, when MaxAttempts allows a retry, of
// a request whose body streams and of a POST or PATCH (any method that is
// not idempotent) without a key under an AttemptTimeout. Other attempts (a
// GET's, a request's with the caller's own key) are not watched, so that
// watching costs them nothing: each of their resends is one request more
// at the server than Attempts counts, and is not in NetHTTPResends.
type Stats struct {
	Requests         uint64 // logical requests (calls of RoundTrip)
	Attempts         uint64 // attempts sent to the base transport
	Retries          uint64 // attempts after a failed one (hedges are Hedges)
	BudgetWaits      uint64 // retries the budget's line held, then let go
	BudgetRefusals   uint64 // requests given up because the budget refused a retry
	Throttled        uint64 // attempts throttling rejected in the client, retries too
	RetriesFromAbove uint64 // requests that were a layer above's retry (an SDK's)
	NetHTTPResends   uint64 // resends net/http made within an attempt, if watched
	Hedges           uint64 // hedges sent; they count as attempts too
	HedgeWins        uint64 // requests a hedge answered first
	Resumes          uint64 // retries that asked for the rest of a broken body (ResumeResponse)

	// GiveUps counts the requests that ended with a failure, by reason.
	GiveUps map[Reason]uint64
}

// The counters behind Stats, by index.
const (
	nRequests = iota
	nAttempts
	nRetries
	nBudgetWaits
	nBudgetRefusals
	nThrottled
	nRetriesFromAbove
	nNetHTTPResends
	nHedges
	nHedgeWins
	nResumes
	numCounters
)

// counters are the atomic counts behind a Stats. A nil *counters counts
// nothing.
type counters struct {
	n       [numCounters]atomic.Uint64
	giveUps [numReasons]atomic.Uint64
}

func (c *counters) stats() Stats {
	s := Stats{
		Requests:         c.n[nRequests].Load(),
		Attempts:         c.n[nAttempts].Load(),
		Retries:          c.n[nRetries].Load(),
		BudgetWaits:      c.n[nBudgetWaits].Load(),
		BudgetRefusals:   c.n[nBudgetRefusals].Load(),
		Throttled:        c.n[nThrottled].Load(),
		RetriesFromAbove: c.n[nRetriesFromAbove].Load(),
		NetHTTPResends:   c.n[nNetHTTPResends].Load(),
		Hedges:           c.n[nHedges].Load(),
		HedgeWins:        c.n[nHedgeWins].Load(),
		Resumes:          c.n[nResumes].Load(),
		GiveUps:          make(map[Reason]uint64),
	}
	for r := range c.giveUps {
		if n := c.giveUps[r].Load(); n > 0 {
			s.GiveUps[Reason(r)] = n
		}
	}
	return s
}

// Stats returns the Transport's counters. It may be called at any time.
func (t *Transport) Stats() Stats { return t.stats.stats() }

// HostStats returns the counters of each host tracked (see TrackHosts),
// by host (URL host, port included, in lower case). It may be called at any
// time.
func (t *Transport) HostStats() map[string]Stats {
	out := make(map[string]Stats)
	t.table.Range(func(name string, h *host) bool {
		if h.counters != nil {
			out[name] = h.counters.stats()
		}
		return true
	})
	return out
}
