package bench

import (
	"net/http"
	"strings"
	"testing"
)

// Every path runs through every library, each case checking what its base
// saw: on the in-memory paths, the attempts per operation and every answer
// 200 read to its end and closed; over loopback, one request per
// operation, each answered with a realistic body over the path's protocol,
// and bare a second time (bare-again).
func TestEveryPathRunsThroughEveryLibrary(t *testing.T) {
	cases, done, err := Cases()
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	seen := map[string]int{}
	for _, c := range cases {
		seen[c.Path]++
		r := c.begin()
		if err := r.do(5 * c.Callers); err != nil {
			t.Errorf("%s: %v", c.Name(), err)
			continue
		}
		if err := r.check(r.ops); err != nil {
			t.Errorf("%s: %v", c.Name(), err)
		}
	}
	for _, p := range Paths() {
		want := 6
		if strings.HasPrefix(p, "Loopback/") {
			want++ // bare-again
		}
		if seen[p] != want {
			t.Errorf("%s: %d libraries, want %d", p, seen[p], want)
		}
	}
	if _, _, err := Cases("Loopback/proto=h3/callers=1"); err == nil {
		t.Error("a path that is not one: no error")
	}
}

// The loopback paths' transport speaks the protocol of its path to the
// server, and the server's count of a URL's requests is what its check
// holds against the operations.
func TestLoopbackSpeaksItsProtocol(t *testing.T) {
	for _, proto := range loopbackProtos {
		lo := newLoopback(proto)
		defer lo.close()
		resp, err := lo.pool.RoundTrip(mustRequest(t, lo.srv.URL+"/p"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[string]int{"h1": 1, "h2": 2}[proto]; resp.ProtoMajor != want || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s %d, want HTTP/%d 200", proto, resp.Proto, resp.StatusCode, want)
		}
		if err := lo.expect(lo.srv.URL + "/p")(2); err == nil || !strings.Contains(err.Error(), "1 requests") {
			t.Errorf("%s: one request checked as two: %v", proto, err)
		}
	}
}
