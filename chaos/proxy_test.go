package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// proxies are the two toxiproxy proxies in front of one server: clean
// passes everything, faulty carries the fault's toxics. Both listen on
// 127.0.0.1 and run in this process.
type proxies struct {
	clean, faulty *toxiproxy.Proxy
}

// startProxies starts both proxies to upstream (host:port) and adds the
// toxics to the faulty one, each on every connection (toxicity 1): which
// attempts meet them is the router's draw.
func startProxies(upstream string, toxics []toxic) (*proxies, error) {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := &proxies{
		clean:  toxiproxy.NewProxy(srv, "clean", "127.0.0.1:0", upstream),
		faulty: toxiproxy.NewProxy(srv, "faulty", "127.0.0.1:0", upstream),
	}
	if err := p.clean.Start(); err != nil {
		return nil, err
	}
	if err := p.faulty.Start(); err != nil {
		p.clean.Stop()
		return nil, err
	}
	for i, tx := range toxics {
		b, err := json.Marshal(struct {
			toxic
			Name     string  `json:"name"`
			Toxicity float32 `json:"toxicity"`
		}{tx, fmt.Sprintf("%s_%s_%d", tx.Type, tx.Stream, i), 1})
		if err == nil {
			_, err = p.faulty.Toxics.AddToxicJson(bytes.NewReader(b))
		}
		if err != nil {
			p.stop()
			return nil, fmt.Errorf("toxic %s %s: %w", tx.Type, tx.Stream, err)
		}
	}
	return p, nil
}

// stop closes both proxies' listeners and every connection through them.
func (p *proxies) stop() {
	p.clean.Stop()
	p.faulty.Stop()
}
