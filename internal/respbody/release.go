// Package respbody handles the response bodies of a Transport's attempts:
// the caller's (released with the attempt, or read whole into memory), and
// a failed attempt's (drained with a cut-off, or kept while a retry waits).
package respbody

import (
	"io"
	"net/http"
	"sync"
)

// Release is a response body that calls Fn once, when the body is closed
// or read to its end: it ends what the body's attempt holds open (its
// context, its timeout) with the body.
type Release struct {
	Body io.ReadCloser
	Fn   func()
	once sync.Once
}

func (b *Release) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	if err == io.EOF {
		b.once.Do(b.Fn)
	}
	return n, err
}

// abort cancels the attempt's context, which ends a read in progress.
func (b *Release) abort() { b.once.Do(b.Fn) }

func (b *Release) Close() error {
	err := b.Body.Close()
	b.once.Do(b.Fn)
	return err
}

// releaseRW is a Release over the read-write body of a 101
// Switching Protocols response.
type releaseRW struct {
	*Release
	w io.Writer
}

func (b *releaseRW) Write(p []byte) (int, error) { return b.w.Write(p) }

// Wrap makes rb, a Release over resp's body, resp's body:
// writable too when it is the read-write body of a 101 Switching Protocols
// (net/http's promise for an upgraded connection).
func Wrap(resp *http.Response, rb *Release) {
	if w, ok := resp.Body.(io.Writer); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body = &releaseRW{Release: rb, w: w}
		return
	}
	resp.Body = rb
}
