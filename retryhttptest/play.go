package retryhttptest

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// play carries out step for the request. c is the request's connection
// (nil only if the server lost track of it); done is closed when the server
// is closing. A step that must not complete normally ends with abort.
func play(w http.ResponseWriter, r *http.Request, step Step, c *conn, done <-chan struct{}) {
	if !pause(r, step.after, done) {
		abort()
	}
	switch step.kind {
	case kindReset:
		reset(c)
		abort()
	case kindDrop:
		step.handler.ServeHTTP(&discard{header: make(http.Header)}, r)
		reset(c)
		abort()
	case kindHangup:
		abort() // net/http closes the connection, having written nothing
	case kindHang:
		select {
		case <-r.Context().Done():
		case <-done:
		}
		abort()
	case kindHandler:
		setHeader(w, step)
		if step.cut {
			w = &cutWriter{ResponseWriter: w, left: step.cutAt}
		}
		step.handler.ServeHTTP(w, r)
		return
	}

	setHeader(w, step)
	body := step.body
	if step.cut {
		body = body[:step.cutAt]
	}
	if len(step.body) > 0 && w.Header().Get("Content-Length") == "" {
		w.Header().Set("Content-Length", strconv.Itoa(len(step.body)))
	}
	w.WriteHeader(step.code())
	rc := http.NewResponseController(w)
	if step.slow > 0 && len(body) > 0 {
		rc.Flush()
		pieces := min(len(body), slowChunks)
		gap := step.slow / time.Duration(pieces)
		for i := range pieces {
			if !pause(r, gap, done) {
				abort()
			}
			// Piece i holds bytes [i*len/pieces, (i+1)*len/pieces).
			w.Write(body[i*len(body)/pieces : (i+1)*len(body)/pieces])
			rc.Flush()
		}
	} else {
		w.Write(body)
	}
	if step.cut {
		// ErrAbortHandler makes an HTTP/1.1 server flush what was written
		// and close the connection, and an HTTP/2 server reset the stream.
		rc.Flush()
		abort()
	}
}

// setHeader copies the step's header fields into w, and asks for the
// connection to end after the response when the step goes away: the
// HTTP/2 server turns "Connection: close" into a graceful GOAWAY.
func setHeader(w http.ResponseWriter, step Step) {
	h := w.Header()
	for k, v := range step.header {
		h[k] = append([]string(nil), v...)
	}
	if step.goAway {
		h.Set("Connection", "close")
	}
}

// pause waits d, and reports false if the client gave up or the server
// began closing first.
func pause(r *http.Request, d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-done:
		return false
	}
}

// reset closes the connection with SO_LINGER 0, so the peer reads a TCP
// RST rather than an orderly end of stream.
func reset(c *conn) {
	if c == nil {
		return
	}
	nc := c.nc
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		tcp.SetLinger(0)
	}
	nc.Close()
}

// abort ends the handler without completing its response. The server
// recovers the panic silently: an HTTP/1.1 connection is closed after what
// was written is flushed, an HTTP/2 stream is reset.
func abort() {
	panic(http.ErrAbortHandler)
}

// cutWriter passes a handler's body on until left bytes are written, and
// at the first byte past them flushes what went and ends the response as
// CloseMidBody does.
type cutWriter struct {
	http.ResponseWriter
	left int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if len(p) <= w.left {
		n, err := w.ResponseWriter.Write(p)
		w.left -= n
		return n, err
	}
	w.ResponseWriter.Write(p[:w.left])
	http.NewResponseController(w.ResponseWriter).Flush()
	abort()
	return 0, nil // not reached
}

// ReadFrom hides the ResponseWriter's, which http.ServeContent would use:
// every byte goes through Write.
func (w *cutWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{w}, r)
}

// Unwrap gives http.ResponseController the server's ResponseWriter.
func (w *cutWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// discard is a ResponseWriter that keeps nothing: ApplyThenDrop's handler
// writes its response into it.
type discard struct{ header http.Header }

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
