package chaos

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of this file check the harness itself: that the draws pair the
// clients' attempts, that the ledger catches what TestChaos counts on it to
// catch, and that each fault does to a call what the fault table says.

func TestDrawIsFixedAndEven(t *testing.T) {
	assert.Equal(t, draw(seed, 7, 2), draw(seed, 7, 2))
	assert.NotEqual(t, draw(seed, 7, 2), draw(seed+1, 7, 2))
	assert.NotEqual(t, draw(seed, 7, 2), draw(seed, 7, 3))

	// 20,000 draws below faultRate: 6,000 expected, binomial sd 65.
	below, both := 0, 0
	for id := range 10000 {
		a, b := draw(seed, id, 1) < faultRate, draw(seed, id, 2) < faultRate
		if a {
			below++
		}
		if b {
			below++
		}
		if a && b {
			both++
		}
	}
	assert.InDelta(t, 6000, below, 200)
	assert.InDelta(t, 900, both, 90, "a call's attempts draw independently") // sd 29
}

// fakeNet answers like the network behind the router, without one: an
// attempt sent to the faulty host fails with a connection reset, one sent
// to the clean host gets the server's answer. It records where each
// attempt went.
type fakeNet struct {
	mu    sync.Mutex
	hosts map[[2]int]string // call, attempt -> host
}

func (f *fakeNet) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	c := callOf(req.Context())
	f.mu.Lock()
	f.hosts[[2]int{c.id, int(c.attempts.Load())}] = req.URL.Host
	f.mu.Unlock()
	if req.URL.Host == "faulty:1" {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	}
	body := responseBodies[c.id]
	return &http.Response{
		StatusCode:    http.StatusOK,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{hashHeader: {responseHashes[c.id]}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// Every client's attempt n of call i goes where draw(seed, i, n) says: the
// first attempts of all clients meet the same fault, and a retrying client
// meets it again exactly where its draws say.
func TestRouterSendsEachAttemptWhereItsDrawSays(t *testing.T) {
	const n = 64
	f := fault{name: "fake resets", rate: 0.5}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			fn := &fakeNet{hosts: make(map[[2]int]string)}
			rt := &router{next: fn, clean: "clean:1", faulty: "faulty:1", rate: f.rate, seed: seed}
			hc := c.new(rt, f)
			outs := make([]outcome, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { outs[i] = send(hc, "http://clean:1/pay", i) })
			}
			wg.Wait()

			for id, o := range outs {
				require.GreaterOrEqual(t, o.attempts, 1)
				clean := false
				for a := 1; a <= o.attempts; a++ {
					want := "clean:1"
					if draw(seed, id, a) < f.rate {
						want = "faulty:1"
					}
					assert.Equal(t, want, fn.hosts[[2]int{id, a}], "call %d attempt %d", id, a)
					clean = clean || want == "clean:1"
				}
				assert.Equal(t, clean, o.ok, "call %d succeeds when one of its attempts was clean (%s)", id, o.why)
				if c.role == baseline {
					assert.Equal(t, 1, o.attempts)
				}
			}
		})
	}
}

func TestLedgerAppliesAKeyOnceAndCountsWhatWentWrong(t *testing.T) {
	l := newLedger(0, seed)
	srv := startServer(h1, l)
	defer srv.Close()
	c := srv.Client()

	post := func(id int, key string, body []byte, hash string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/pay", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set(callHeader, strconv.Itoa(id))
		req.Header.Set(hashHeader, hash)
		if key != "" {
			req.Header.Set(keyHeader, key)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			assert.Equal(t, responseBodies[id], got)
			assert.Equal(t, responseHashes[id], resp.Header.Get(hashHeader))
		}
		return resp
	}

	// A key is applied once; its repeat gets the stored answer.
	resp := post(2, "k2", requestBodies[2], requestHashes[2])
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Empty(t, resp.Header.Get(replayedHeader))
	resp = post(2, "k2", requestBodies[2], requestHashes[2])
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "true", resp.Header.Get(replayedHeader))
	// The same key with another body is refused, and counted.
	resp = post(2, "k2", requestBodies[3], requestHashes[3])
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	// A POST without a key is applied each time it arrives.
	post(3, "", requestBodies[3], requestHashes[3])
	post(3, "", requestBodies[3], requestHashes[3])
	// A body that is not what its sender hashed is applied, and counted.
	post(6, "", requestBodies[6][:100], requestHashes[6])

	assert.Equal(t, map[int]int{2: 1, 3: 2, 6: 1}, l.applied)
	assert.Equal(t, 1, l.twice())
	assert.Equal(t, 1, l.misused)
	assert.Equal(t, 1, l.badBodies)
}

// faultNamed returns the fault of the table with that name.
func faultNamed(t *testing.T, name string) fault {
	for _, f := range faults {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no fault %q", name)
	return fault{}
}

// Each fault, met on every attempt, does to one keyed POST of the bare
// client what the fault table says, as the server's ledger sees it.
func TestFaultsDoWhatTheTableSays(t *testing.T) {
	const id = 2 // a POST with the caller's key
	const (
		no = iota
		yes
		either
	)
	for _, tc := range []struct {
		name, fault string
		proto       proto
		answered    bool // response headers reached the client
		arrived     int  // the request reached the server's handler
		applied     bool // the server applied it
	}{
		{"the request never arrives", "reset_peer upstream", h1, false, no, false},
		{"applied, the answer lost", "reset_peer downstream", h1, false, yes, true},
		{"over TLS, reset in the handshake", "reset_peer downstream", h2, false, no, false},
		{"applied, the answer never comes", "timeout downstream", h1, false, yes, true},
		// The cut also closes the server's side, which may see the close
		// before it reads the request's headers (rarely, over HTTP/1.1),
		// and whose HTTP/2 writes can fail before it reads them: whether
		// the request arrived varies; that it was not applied does not.
		{"the cut body is not applied", "limit_data upstream 4 KiB", h1, false, either, false},
		{"over TLS, the cut body is not applied", "limit_data upstream 4 KiB", h2, false, either, false},
		{"applied, the answer cut in its body", "limit_data downstream 8 KiB", h1, true, yes, true},
		{"over TLS, the answer cut in its body", "limit_data downstream 8 KiB", h2, true, yes, true},
		{"applied, the connection closed under it", "h2 connection close", h2, false, yes, true},
	} {
		t.Run(tc.fault+" "+tc.proto.name()+": "+tc.name, func(t *testing.T) {
			f := faultNamed(t, tc.fault)
			if f.rate > 0 {
				f.rate = 1 // every attempt meets the toxics
			}
			if f.kill > 0 {
				f.kill = 1
			}
			rg, err := newRig(seed, f, tc.proto)
			require.NoError(t, err)
			o := send(&http.Client{Transport: rg.router}, rg.url, id)
			rg.close()

			assert.False(t, o.ok, "the call failed")
			assert.Equal(t, 1, o.attempts)
			assert.Equal(t, tc.answered, o.answered, "response headers arrived")
			if tc.answered {
				// The body ends early: at a clean close of the connection, or
				// at a reset when the proxy closes it with data unread.
				assert.Contains(t, []string{"unexpected EOF", "connection reset by peer"}, o.why,
					"the body was cut")
			}
			l := rg.ledger
			if tc.arrived != either {
				assert.Equal(t, tc.arrived == yes, l.arrivals[id] > 0, "the request reached the handler")
			}
			assert.Equal(t, tc.applied, l.applied[id] == 1, "the request was applied")
		})
	}
}
