package chaos

import (
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them, but for those of
// toxiproxy's links. When one end of a proxied connection closes while data
// is on its way (reset_peer, limit_data and timeout close links early; so
// does a client that gives up), toxiproxy stops the link's writer without
// draining the toxics before it, and their goroutines stay blocked on a
// channel for good: nothing outside toxiproxy can reach that channel. Every
// goroutine of the clients, transports and servers must end.
func TestMain(m *testing.M) {
	zerolog.SetGlobalLevel(zerolog.Disabled) // toxiproxy's toxics log through zerolog's global logger
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).read"),
		goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2.(*ToxicLink).write"),
	)
}
