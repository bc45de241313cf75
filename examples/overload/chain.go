package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/retryhttp/retryhttp"
)

// A chainRow is one run of the chain: three services, the first two
// calling the next through retryhttp, the last down; one request from a
// plain client to the first.
type chainRow struct {
	Verdict   bool // AdviceHandler wraps every service
	Unlimited bool // each service's Transport has UnlimitedBudget, else the default budget

	AtLast      int32         // requests the last service received
	Status      int           // the status the client got from the first
	ShouldRetry string        // the X-Should-Retry field of that response
	Took        time.Duration // how long the client waited
	Err         error         // the client's error, if any
}

// chainDeadline is the deadline of the client's request, which each
// service passes on to its own call.
const chainDeadline = 2 * time.Second

// runChain starts the chain of row, sends it one request and fills in
// what happened. The services' Policy.Backoff is cfg.Backoff (nil: the
// default).
func runChain(row *chainRow, cfg config) {
	var hits atomic.Int32
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	if row.Verdict {
		h = retryhttp.AdviceHandler(h)
	}
	last := cfg.newServer(h)
	defer last.Close()

	next := last.URL
	for range 2 {
		tr := &retryhttp.Transport{Base: cfg.newBase(), Policy: retryhttp.Policy{Backoff: cfg.Backoff}}
		if row.Unlimited {
			tr.Budget = retryhttp.UnlimitedBudget()
		}
		defer tr.CloseIdleConnections()
		var h http.Handler = forwarder(&http.Client{Transport: tr}, next)
		if row.Verdict {
			h = retryhttp.AdviceHandler(h)
		}
		srv := cfg.newServer(h)
		defer srv.Close()
		next = srv.URL
	}

	client := &http.Client{Transport: cfg.newBase()}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), chainDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
	if err != nil {
		row.Err = err
		return
	}
	start := time.Now()
	resp, err := client.Do(req)
	row.Took = time.Since(start)
	row.AtLast = hits.Load()
	if err != nil {
		row.Err = err
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	row.Status, row.ShouldRetry = resp.StatusCode, resp.Header.Get("X-Should-Retry")
}

// forwarder is a service's handler: it answers with what a GET of target,
// sent through client with the request's context, returns, and with 503
// when that call fails.
func forwarder(client *http.Client, target string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 500 {
			http.Error(w, fmt.Sprintf("dependency answered %d", resp.StatusCode), http.StatusServiceUnavailable)
			return
		}
		io.Copy(w, resp.Body)
	}
}
