package testutil

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
)

// MemNet is an in-memory network, for real net/http servers and clients
// inside a testing/synctest bubble: their connections are net.Pipe pairs,
// on which a goroutine that waits is durably blocked, so the bubble's fake
// time moves while servers listen and connections idle (on a socket it
// would never move). Addresses are 127.0.0.1 with a port of the MemNet's
// own; nothing is sent on the machine's network. The zero MemNet is ready
// to use; it must be used within one bubble.
type MemNet struct {
	mu        sync.Mutex
	listeners map[string]*memListener
	port      int
}

// Listen returns a listener on a new address of the network.
func (n *MemNet) Listen() net.Listener {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners == nil {
		n.listeners = map[string]*memListener{}
	}
	n.port++
	l := &memListener{net: n, addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: n.port},
		conns: make(chan net.Conn), done: make(chan struct{})}
	n.listeners[l.addr.String()] = l
	return l
}

// DialContext connects to the listener on addr, as net.Dialer's does: a
// dial with no listener there is refused (ECONNREFUSED).
func (n *MemNet) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	l := n.listeners[addr]
	n.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if l == nil {
		return nil, refused
	}
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, refused
	case <-ctx.Done():
		return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err()}
	}
}

// NewServer starts an httptest server serving h on a new address of the
// network; its Close is httptest's (it waits for every handler).
func (n *MemNet) NewServer(h http.Handler) *httptest.Server {
	s := &httptest.Server{Listener: n.Listen(), Config: &http.Server{Handler: h}}
	s.Start()
	return s
}

// Transport returns a transport whose connections are the network's.
func (n *MemNet) Transport() *http.Transport {
	return &http.Transport{DialContext: n.DialContext}
}

type memListener struct {
	net   *MemNet
	addr  *net.TCPAddr
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.net.mu.Lock()
		delete(l.net.listeners, l.addr.String())
		l.net.mu.Unlock()
	})
	return nil
}

func (l *memListener) Addr() net.Addr { return l.addr }
