package testutil

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// HTTP/2 frame types and flags (RFC 9113 sections 6.1 to 6.10).
const (
	h2FrameHeaders      = 0x1
	h2FrameRSTStream    = 0x3
	h2FrameSettings     = 0x4
	h2FramePing         = 0x6
	h2FrameGoAway       = 0x7
	h2FrameContinuation = 0x9

	h2FlagAck        = 0x1
	h2FlagEndStream  = 0x1 // on HEADERS and DATA frames
	h2FlagEndHeaders = 0x4
)

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// ScriptedH2Server is an HTTP/2 server on loopback that does to each
// connection what a test's script says, frame by frame, so that a real
// net/http client meets the stream resets, GOAWAY frames and silences
// that a real server produces only by accident. It speaks cleartext
// HTTP/2 with prior knowledge (RFC 9113 section 3.3), answers a stream
// with ":status: 200" at most (one HPACK byte) and decodes no header.
// Each accepted connection gets the client preface read and an empty
// SETTINGS frame sent, then runs the script; when the script returns, the
// connection is read until the client closes it.
type ScriptedH2Server struct {
	URL string // "http://127.0.0.1:port/"

	ln     net.Listener
	script func(c *H2Conn)
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
}

// NewScriptedH2Server starts a scripted server on 127.0.0.1 and stops it
// when the test ends: the listener and every connection closed, every
// goroutine done. H2CTransport returns a client that speaks to it.
func NewScriptedH2Server(t testing.TB, script func(c *H2Conn)) *ScriptedH2Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &ScriptedH2Server{URL: "http://" + ln.Addr().String() + "/", ln: ln, script: script, conns: make(map[net.Conn]bool)}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *ScriptedH2Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		c := &H2Conn{nc: nc, br: bufio.NewReader(nc)}
		s.mu.Lock()
		s.conns[nc] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			defer nc.Close()
			if c.handshake() == nil {
				s.script(c)
			}
			c.drain()
		}()
	}
}

func (s *ScriptedH2Server) close() {
	s.ln.Close()
	s.mu.Lock()
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// H2Conn is one connection of a ScriptedH2Server, as its script sees it.
type H2Conn struct {
	// IgnorePings, when the script sets it, leaves the client's PINGs
	// unacknowledged from then on; by default they are acknowledged as
	// they are read.
	IgnorePings bool

	nc net.Conn
	br *bufio.Reader
}

func (c *H2Conn) handshake() error {
	preface := make([]byte, len(h2Preface))
	if _, err := io.ReadFull(c.br, preface); err != nil {
		return err
	}
	if string(preface) != h2Preface {
		return errors.New("ScriptedH2Server: no HTTP/2 client preface")
	}
	return c.writeFrame(h2FrameSettings, 0, 0, nil)
}

func (c *H2Conn) readFrame() (typ, flags byte, stream uint32, payload []byte, err error) {
	var hdr [9]byte
	if _, err = io.ReadFull(c.br, hdr[:]); err != nil {
		return
	}
	length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	typ, flags = hdr[3], hdr[4]
	stream = binary.BigEndian.Uint32(hdr[5:]) & (1<<31 - 1)
	payload = make([]byte, length)
	_, err = io.ReadFull(c.br, payload)
	return
}

func (c *H2Conn) writeFrame(typ, flags byte, stream uint32, payload []byte) error {
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream)
	_, err := c.nc.Write(append(b, payload...))
	return err
}

// read reads one frame and does what any HTTP/2 server must: it
// acknowledges SETTINGS and, unless IgnorePings, PINGs. It returns the ID
// of a stream whose header block the frame completes, else 0.
func (c *H2Conn) read() (uint32, error) {
	typ, flags, stream, payload, err := c.readFrame()
	if err != nil {
		return 0, err
	}
	switch {
	case typ == h2FrameSettings && flags&h2FlagAck == 0:
		return 0, c.writeFrame(h2FrameSettings, h2FlagAck, 0, nil)
	case typ == h2FramePing && flags&h2FlagAck == 0 && !c.IgnorePings:
		return 0, c.writeFrame(h2FramePing, h2FlagAck, 0, payload)
	case (typ == h2FrameHeaders || typ == h2FrameContinuation) && flags&h2FlagEndHeaders != 0:
		return stream, nil
	}
	return 0, nil
}

// Request reads until the client opens a stream, and returns its ID.
func (c *H2Conn) Request() (uint32, error) {
	for {
		if id, err := c.read(); id != 0 || err != nil {
			return id, err
		}
	}
}

// OK answers the stream ":status: 200" (HPACK's static entry 8), with no
// content, and ends it.
func (c *H2Conn) OK(stream uint32) error {
	return c.writeFrame(h2FrameHeaders, h2FlagEndHeaders|h2FlagEndStream, stream, []byte{0x88})
}

// Reset sends RST_STREAM on the stream with the error code (RFC 9113
// section 7).
func (c *H2Conn) Reset(stream, code uint32) error {
	return c.writeFrame(h2FrameRSTStream, 0, stream, binary.BigEndian.AppendUint32(nil, code))
}

// GoAway sends GOAWAY with the last stream the server will process and
// the error code.
func (c *H2Conn) GoAway(last, code uint32) error {
	p := binary.BigEndian.AppendUint32(nil, last)
	return c.writeFrame(h2FrameGoAway, 0, 0, binary.BigEndian.AppendUint32(p, code))
}

// HangUp ends the server's side of the connection in order (a FIN, never
// a reset: what the client sent is read, not discarded).
func (c *H2Conn) HangUp() {
	c.nc.(*net.TCPConn).CloseWrite()
}

// drain reads until the client closes the connection, acknowledging its
// SETTINGS and PINGs as read does.
func (c *H2Conn) drain() {
	for {
		if _, err := c.read(); err != nil {
			return
		}
	}
}

// H2CTransport returns a transport that speaks HTTP/2 with prior
// knowledge to "http" URLs, as a ScriptedH2Server expects, and whose idle
// connections are closed when the test ends.
func H2CTransport(t testing.TB) *http.Transport {
	t.Helper()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}
