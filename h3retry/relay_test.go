package h3retry

// A UDP relay between the test clients and the test server, for faults of
// the path: datagrams lost (each with a seeded draw, per direction), all of
// them dropped for a while (a blackhole), or delayed. The client dials the
// relay's address; the relay gives each client address a socket of its own
// towards the server, so the server sees one address per client socket, as
// behind a NAT.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A path is one direction of the relay: to the server (up) or back to the
// client (down).
type path struct {
	loss  float64       // share of datagrams dropped, drawn one by one
	delay time.Duration // added to every datagram that passes

	mu  sync.Mutex // rng is drawn from by several goroutines
	rng *rand.Rand

	passed, dropped atomic.Int64
}

// lose draws whether the next datagram is lost.
func (p *path) lose() bool {
	if p.loss <= 0 {
		return false
	}
	p.mu.Lock()
	x := p.rng.Float64()
	p.mu.Unlock()
	return x < p.loss
}

// relayConfig sets a relay's paths.
type relayConfig struct {
	seed     uint64        // fixes the loss draws of both paths
	upLoss   float64       // share of the client's datagrams dropped
	downLoss float64       // share of the server's datagrams dropped
	delay    time.Duration // each way
}

// relay forwards datagrams between clients and a server.
type relay struct {
	addr   *net.UDPAddr // where clients send: 127.0.0.1:port
	front  *net.UDPConn
	server *net.UDPAddr
	up     path
	down   path

	blackholeUntil atomic.Int64 // unix nanoseconds; everything is dropped before it

	mu     sync.Mutex
	peers  map[netip.AddrPort]*net.UDPConn // client address -> socket to the server
	closed bool

	wg sync.WaitGroup // the loops and the delayed sends
}

// newRelay starts a relay in front of the UDP server at server, closed
// when the test ends.
func newRelay(t testing.TB, server *net.UDPAddr, cfg relayConfig) *relay {
	t.Helper()
	front, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	_ = front.SetReadBuffer(4 << 20) // best effort: a burst must not overflow the socket
	r := &relay{
		addr:   front.LocalAddr().(*net.UDPAddr),
		front:  front,
		server: server,
		up:     path{loss: cfg.upLoss, delay: cfg.delay, rng: rand.New(rand.NewPCG(cfg.seed, 1))},
		down:   path{loss: cfg.downLoss, delay: cfg.delay, rng: rand.New(rand.NewPCG(cfg.seed, 2))},
		peers:  make(map[netip.AddrPort]*net.UDPConn),
	}
	r.wg.Go(r.fromClients)
	t.Cleanup(r.Close)
	return r
}

// URL is the https URL of the server through the relay.
func (r *relay) URL() string { return fmt.Sprintf("https://127.0.0.1:%d", r.addr.Port) }

// blackhole drops every datagram, both ways, for d from now.
func (r *relay) blackhole(d time.Duration) {
	r.blackholeUntil.Store(time.Now().Add(d).UnixNano())
}

func (r *relay) blackholed() bool {
	return time.Now().UnixNano() < r.blackholeUntil.Load()
}

// fromClients reads what clients send and forwards it to the server, each
// client through its own socket.
func (r *relay) fromClients() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := r.front.ReadFromUDPAddrPort(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		up := r.peer(from)
		if up == nil {
			return
		}
		r.pass(&r.up, buf[:n], func(b []byte) { _, _ = up.Write(b) })
	}
}

// peer returns the socket to the server for the client at addr, opening
// it and starting its loop the first time; nil once the relay is closed.
func (r *relay) peer(addr netip.AddrPort) *net.UDPConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if c := r.peers[addr]; c != nil {
		return c
	}
	c, err := net.DialUDP("udp", nil, r.server)
	if err != nil {
		return nil
	}
	_ = c.SetReadBuffer(4 << 20)
	r.peers[addr] = c
	r.wg.Go(func() { r.fromServer(c, addr) })
	return c
}

// fromServer forwards what the server sends on c back to the client.
func (r *relay) fromServer(c *net.UDPConn, client netip.AddrPort) {
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue // ECONNREFUSED while nothing listens on the server's port
		}
		r.pass(&r.down, buf[:n], func(b []byte) { _, _ = r.front.WriteToUDPAddrPort(b, client) })
	}
}

// pass sends b on with send, unless the blackhole or p's draw drops it,
// after p's delay.
func (r *relay) pass(p *path, b []byte, send func([]byte)) {
	if r.blackholed() || p.lose() {
		p.dropped.Add(1)
		return
	}
	p.passed.Add(1)
	if p.delay <= 0 {
		send(b)
		return
	}
	cp := append([]byte(nil), b...)
	r.wg.Add(1)
	time.AfterFunc(p.delay, func() {
		defer r.wg.Done()
		send(cp)
	})
}

// Close closes the relay's sockets and waits for its loops and delayed
// sends.
func (r *relay) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	_ = r.front.Close()
	for _, c := range r.peers {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// The relay carries HTTP/3 both ways; its loss draws are fixed by the seed
// and near the share asked for; a blackhole drops everything, and the
// connection recovers after it; a delay delays.
func TestRelay(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	h3 := newClient(t)

	clean := newRelay(t, srv.pc.conn.LocalAddr().(*net.UDPAddr), relayConfig{})
	_, body, err := get(t, h3, clean.URL())
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.Positive(t, clean.up.passed.Load())
	assert.Positive(t, clean.down.passed.Load())
	assert.Zero(t, clean.up.dropped.Load()+clean.down.dropped.Load())

	// The draws: the same seed, the same sequence; about the share asked for.
	a := &path{loss: 0.2, rng: rand.New(rand.NewPCG(7, 1))}
	b := &path{loss: 0.2, rng: rand.New(rand.NewPCG(7, 1))}
	lost := 0
	for range 10000 {
		la, lb := a.lose(), b.lose()
		require.Equal(t, la, lb)
		if la {
			lost++
		}
	}
	assert.InDelta(t, 2000, lost, 200)

	// A blackhole drops both ways; the connection survives it.
	clean.blackhole(150 * time.Millisecond)
	start := time.Now()
	_, body, err = get(t, h3, clean.URL())
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "nothing passed during the blackhole")
	assert.Positive(t, clean.up.dropped.Load())

	// A delay of 20 ms each way: a request on the open connection takes a
	// round trip of 40 ms or more.
	slow := newRelay(t, srv.pc.conn.LocalAddr().(*net.UDPAddr), relayConfig{delay: 20 * time.Millisecond})
	_, _, err = get(t, h3, slow.URL()) // the handshake
	require.NoError(t, err)
	start = time.Now()
	_, body, err = get(t, h3, slow.URL())
	require.NoError(t, err)
	assert.Equal(t, "ok", body)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
}
