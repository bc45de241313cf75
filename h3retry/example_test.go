package h3retry_test

import (
	"io"
	"log"
	"net/http"

	"github.com/quic-go/quic-go/http3"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/h3retry"
)

// A client whose requests go over HTTP/3 and are retried as safely as over
// HTTP/2: quic-go's errors are told apart as net/http's are. (The host is
// made up: this example is compiled, not run; the package's tests run the
// same against a quic-go server on loopback.)
func ExampleNew() {
	getThings := func() error {
		h3 := &http3.Transport{} // quic-go's; TLSClientConfig, QUICConfig as usual
		defer h3.Close()
		client := &http.Client{Transport: h3retry.New(h3, retryhttp.Policy{MaxAttempts: 3})}
		resp, err := client.Get("https://api.example.com/v1/things")
		if err != nil {
			return err // a *retryhttp.Error; errors.As finds quic-go's error in it
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := getThings(); err != nil {
		log.Print(err)
	}
}

// NewBase under a Transport of one's own making, for the fields New does not
// set (Hosts, hooks, a shared Budget).
func ExampleNewBase() {
	h3 := &http3.Transport{}
	defer h3.Close()
	tr := &retryhttp.Transport{
		Base:   h3retry.NewBase(h3),
		Policy: retryhttp.Policy{MaxAttempts: 3},
		OnRetry: func(e *retryhttp.RetryEvent) {
			log.Printf("retry after attempt %d: %v", e.Attempt, e.Err)
		},
	}
	_ = &http.Client{Transport: tr}
}
