package bench

// The TailServer over HTTP/3: quic-go's http3.Server on a loopback UDP
// socket, with a self-signed certificate its clients (Client3) trust, as
// h3retry's tests run it.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// selfSigned is a self-signed certificate for 127.0.0.1, made once per
// process, and a pool that trusts it.
var selfSigned = sync.OnceValues(func() (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "retryhttp bench"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
})

// h3Server is the HTTP/3 side of a TailServer.
type h3Server struct {
	pc   *net.UDPConn
	tr   *quic.Transport
	ln   *quic.EarlyListener
	srv  *http3.Server
	done chan struct{} // closed when ServeListener returned
}

// NewTailServer3 starts a TailServer that serves HTTP/3 on a loopback UDP
// port, with a self-signed certificate that the transports of Client3
// trust; it counts the QUIC connections it accepts. Close it when done.
func NewTailServer3(t Tail, seed uint64) *TailServer {
	s := newTailServer(t, seed)
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		panic(fmt.Sprintf("bench: listening on a UDP port: %v", err))
	}
	cert, _ := selfSigned()
	h := &h3Server{pc: pc, tr: &quic.Transport{Conn: pc}, done: make(chan struct{})}
	h.ln, err = h.tr.ListenEarly(http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}), &quic.Config{})
	if err != nil {
		_ = pc.Close()
		panic(fmt.Sprintf("bench: listening for QUIC: %v", err))
	}
	h.srv = &http3.Server{
		Handler: s,
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			s.conns.Add(1)
			return ctx
		},
	}
	s.h3 = h
	s.arrivals.start = time.Now() // before the server serves: its handler reads it
	s.URL = "https://" + pc.LocalAddr().String()
	go func() {
		defer close(h.done)
		_ = h.srv.ServeListener(h.ln)
	}()
	return s
}

// Client3 returns an http3.Transport that trusts the server's certificate,
// with quic-go's defaults otherwise. The caller closes it when done.
func (s *TailServer) Client3() *http3.Transport {
	_, pool := selfSigned()
	return &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
}

// close closes the server's connections, its listener and its socket.
func (h *h3Server) close() {
	_ = h.srv.Close()
	_ = h.ln.Close()
	_ = h.tr.Close()
	<-h.done
	_ = h.pc.Close()
}

// resetByClient reports whether the client reset the stream of the
// request w answers with H3_REQUEST_CANCELLED, as it does when it cancels
// a request (quic-go's http3.Transport stops reading the response with
// that code): writing the answer's header fails with the client's error.
func resetByClient(w http.ResponseWriter) bool {
	err := http.NewResponseController(w).Flush()
	var h3err *http3.Error
	return errors.As(err, &h3err) && h3err.Remote && h3err.ErrorCode == http3.ErrCodeRequestCanceled
}
