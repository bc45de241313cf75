package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/retryhttp/retryhttp"
)

// SDK-like retries: each charge is tried up to sdkTries times with one
// Idempotency-Key while the answer is 429, as stripe-go does; charges of
// them run at once.
const (
	sdkTries = 3
	charges  = 3
)

// An sdkRow is what the SDK's retry loop did over retryhttp.
type sdkRow struct {
	Shared bool // one Transport under every try, else a new one for each try

	PerCharge        []int  // attempts the server received for each charge
	RetriesFromAbove uint64 // tries the Transports knew for the SDK's retries (Stats.RetriesFromAbove)
}

// Attempts returns the attempts the server received in all.
func (r *sdkRow) Attempts() int {
	n := 0
	for _, a := range r.PerCharge {
		n += a
	}
	return n
}

// runSDK runs the charges against a server that answers 429 to each, over
// Transports with the default policy but for cfg.Backoff (nil: the
// default).
func runSDK(row *sdkRow, cfg config) {
	var mu sync.Mutex
	seen := map[string]int{} // attempts by key
	srv := cfg.newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		http.Error(w, "rate limited", http.StatusTooManyRequests)
	}))
	defer srv.Close()

	base := cfg.newBase()
	defer base.CloseIdleConnections()
	var transports []*retryhttp.Transport
	var tmu sync.Mutex
	transport := func() *retryhttp.Transport {
		tmu.Lock()
		defer tmu.Unlock()
		if row.Shared && len(transports) > 0 {
			return transports[0]
		}
		tr := &retryhttp.Transport{Base: base, Policy: retryhttp.Policy{Backoff: cfg.Backoff}}
		transports = append(transports, tr)
		return tr
	}

	var wg sync.WaitGroup
	for i := range charges {
		key := fmt.Sprintf("charge-%d", i+1)
		wg.Go(func() { sdkCharge(transport, srv.URL+"/v1/charges", key) })
	}
	wg.Wait()

	for i := range charges {
		row.PerCharge = append(row.PerCharge, seen[fmt.Sprintf("charge-%d", i+1)])
	}
	for _, tr := range transports {
		row.RetriesFromAbove += tr.Stats().RetriesFromAbove
	}
}

// sdkCharge is the SDK's retry loop: up to sdkTries POSTs with one
// Idempotency-Key while the answer is a 429, each through the Transport
// that transport returns.
func sdkCharge(transport func() *retryhttp.Transport, url, key string) {
	for range sdkTries {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("amount=2000&currency=eur"))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", key)
		resp, err := (&http.Client{Transport: transport()}).Do(req)
		if err != nil {
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests {
			return
		}
	}
}
