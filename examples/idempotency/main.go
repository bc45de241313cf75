// Command idempotency shows why a POST needs an idempotency key before it
// can be retried, against a small payments server on the loopback interface.
//
// The server charges a customer for each POST /charges and honours the
// Idempotency-Key header: it stores the reply to each key and answers a
// repeat with it instead of charging again. Its network is flaky in the worst
// way: the first charge made for each customer is applied, and then the
// connection drops before the reply is sent. The client cannot tell whether
// the customer was charged.
//
// Three clients meet that fault:
//
//  1. A plain client that tries again by hand, without a key: two charges.
//  2. retryhttp with keys off: it does not send the POST again (it may have
//     been applied) and returns the error. One charge, but the caller is
//     left not knowing.
//  3. retryhttp with keys on: the retry carries the same key, the server
//     replays the stored reply, and the caller gets it. One charge.
//
// Run it with
//
//	go run ./examples/idempotency
//
// It checks the ledger at the end and exits with status 1 if any customer
// was charged a number of times other than the one shown above.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp"
)

func main() {
	bank := newPayments()
	srv := httptest.NewServer(bank)
	defer srv.Close()
	url := srv.URL + "/charges"

	fmt.Printf("payments server on %s: it honours Idempotency-Key and loses the reply to\n", srv.URL)
	fmt.Println("the first charge it makes for each customer (charge applied, then the connection drops).")

	fmt.Println()
	fmt.Println("1. alice: plain net/http client, no key, tries again by hand")
	plain := &http.Client{Transport: newBase(), Timeout: 5 * time.Second}
	for try := 1; try <= 2; try++ {
		reply, err := charge(plain, url, "alice", 1999)
		if err != nil {
			fmt.Printf("   client: try %d failed: %v\n", try, shortErr(err))
			fmt.Println("   client: was alice charged? unknown. Trying again...")
			continue
		}
		fmt.Printf("   client: try %d succeeded: %s\n", try, reply)
		break
	}

	fmt.Println()
	fmt.Println("2. carol: retryhttp, idempotency keys off")
	off := &http.Client{Transport: newTransport(nil), Timeout: 5 * time.Second}
	if reply, err := charge(off, url, "carol", 4500); err != nil {
		fmt.Printf("   client: %v\n", shortErr(err))
		var e *retryhttp.Error
		if errors.As(err, &e) && e.Reason == retryhttp.ReasonUnsafe {
			fmt.Println("   client: not retried: the POST reached the server and may have been applied")
		}
	} else {
		fmt.Printf("   client: succeeded: %s\n", reply)
	}

	fmt.Println()
	fmt.Println("3. bob: retryhttp, idempotency keys on")
	on := &http.Client{Transport: newTransport(&retryhttp.IdempotencyKeys{}), Timeout: 5 * time.Second}
	if reply, err := charge(on, url, "bob", 2500); err != nil {
		fmt.Printf("   client: failed: %v\n", shortErr(err))
	} else {
		fmt.Printf("   client: succeeded: %s\n", reply)
	}

	for _, c := range []*http.Client{plain, off, on} {
		c.CloseIdleConnections()
	}

	fmt.Println()
	fmt.Println("ledger:")
	want := map[string]int{"alice": 2, "carol": 1, "bob": 1}
	ok := true
	for _, name := range []string{"alice", "carol", "bob"} {
		charges := bank.chargesOf(name)
		note := "charged once"
		if len(charges) > 1 {
			note = "DOUBLE CHARGE"
		}
		total := 0
		for _, c := range charges {
			total += c.AmountCents
		}
		fmt.Printf("   %-6s %d charge(s), %6.2f EUR  %s\n", name, len(charges), float64(total)/100, note)
		ok = ok && len(charges) == want[name]
	}
	if !ok {
		fmt.Println("unexpected ledger")
		os.Exit(1)
	}
}

// newBase returns a transport with a pool of its own, so that each client
// starts on a new connection.
func newBase() *http.Transport {
	return &http.Transport{MaxIdleConnsPerHost: 1, IdleConnTimeout: 5 * time.Second}
}

// newTransport returns a retryhttp Transport that retries after 20 ms and
// reports each retry.
func newTransport(keys *retryhttp.IdempotencyKeys) *retryhttp.Transport {
	return &retryhttp.Transport{
		Base: newBase(),
		Policy: retryhttp.Policy{
			Backoff:         retryhttp.Constant(20 * time.Millisecond),
			IdempotencyKeys: keys,
		},
		OnRetry: func(e *retryhttp.RetryEvent) {
			fmt.Printf("   retryhttp: attempt %d failed (%v); retrying in %v\n", e.Attempt, e.Err, e.Delay)
		},
	}
}

type chargeRequest struct {
	Customer    string `json:"customer"`
	AmountCents int    `json:"amount_cents"`
}

type chargeReply struct {
	ID          string `json:"id"`
	Customer    string `json:"customer"`
	AmountCents int    `json:"amount_cents"`
}

// charge asks the server to charge customer and returns its reply.
func charge(c *http.Client, url, customer string, cents int) (string, error) {
	body, _ := json.Marshal(chargeRequest{Customer: customer, AmountCents: cents})
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(reply))
	}
	n := retryhttp.Attempts(resp)
	plural := "s"
	if n == 1 {
		plural = ""
	}
	return fmt.Sprintf("%s (%d attempt%s)", bytes.TrimSpace(reply), n, plural), nil
}

// payments is the server: a ledger of charges and the stored reply to each
// idempotency key.
type payments struct {
	mu      sync.Mutex
	ledger  []chargeReply
	byKey   map[string]stored
	dropped map[string]bool // customers whose first reply was lost
}

type stored struct {
	bodySum [32]byte // the request the key was first used with
	reply   []byte
}

func newPayments() *payments {
	return &payments{byKey: map[string]stored{}, dropped: map[string]bool{}}
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/charges" {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req chargeRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil || req.Customer == "" || req.AmountCents <= 0 {
		http.Error(w, "malformed charge", http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	sum := sha256.Sum256(body)
	keyNote := "no key"
	if key != "" {
		keyNote = "key " + key[:min(8, len(key))] + "..."
	}

	p.mu.Lock()
	if s, ok := p.byKey[key]; ok && key != "" {
		p.mu.Unlock()
		if s.bodySum != sum {
			http.Error(w, "idempotency key reused with another request", http.StatusUnprocessableEntity)
			return
		}
		fmt.Printf("   server: POST for %s, %s: seen before, its reply replayed, no new charge\n",
			req.Customer, keyNote)
		w.Header().Set("Content-Type", "application/json")
		w.Write(s.reply)
		return
	}
	c := chargeReply{ID: fmt.Sprintf("ch_%d", len(p.ledger)+1), Customer: req.Customer, AmountCents: req.AmountCents}
	p.ledger = append(p.ledger, c)
	reply, _ := json.Marshal(c)
	if key != "" {
		p.byKey[key] = stored{bodySum: sum, reply: reply}
	}
	lose := !p.dropped[req.Customer]
	p.dropped[req.Customer] = true
	p.mu.Unlock()

	fmt.Printf("   server: POST for %s, %s: charged %.2f EUR as %s", req.Customer, keyNote, float64(c.AmountCents)/100, c.ID)
	if lose {
		fmt.Println(", then the reply was lost")
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	fmt.Println()
	w.Header().Set("Content-Type", "application/json")
	w.Write(reply)
}

func (p *payments) chargesOf(customer string) []chargeReply {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []chargeReply
	for _, c := range p.ledger {
		if c.Customer == customer {
			out = append(out, c)
		}
	}
	return out
}

// shortErr drops the method and URL that http.Client puts before an
// error, so that the line fits the terminal.
func shortErr(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
