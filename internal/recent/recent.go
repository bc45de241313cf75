// Package recent remembers the idempotency keys of the callers' requests
// a Transport sent lately, and the attempts each had: a request carrying
// one is a retry made by a layer above, which gets only the attempts left.
package recent

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Bounds of a Transport's memory of the keys it sent.
const (
	MaxKeys = 4096             // keys remembered at most; the least recently used go first
	TTL     = 10 * time.Minute // how long a key is remembered after its last use
)

// Keys remembers the idempotency keys of callers' requests a
// Transport sent lately and the attempts each had. It holds at most
// MaxKeys keys, each for TTL after its last request, and
// whatever its length, a key takes a fixed size, its SHA-256 digest: under
// 1 MiB in all. (Two keys with one digest would share their attempts:
// SHA-256 makes that as unlikely for keys a client crafts as for random
// ones.) Safe for simultaneous use.
type Keys struct {
	mu   sync.Mutex
	keys map[keyDigest]keyUse
	uses []keyStamp // every use recorded, oldest first; one a later use of its key replaced is stale
	n    uint64     // uses recorded
}

type keyDigest [sha256.Size]byte

type keyUse struct {
	attempts int
	last     time.Time
	use      uint64 // which use last recorded it
}

// A keyStamp is a use of a key, in Keys.uses.
type keyStamp struct {
	key keyDigest
	use uint64
}

// digest returns key's digest, with no allocation for a key of up to 64
// bytes (a UUID has 36).
func digest(key string) keyDigest {
	if len(key) <= 64 {
		var b [64]byte
		return sha256.Sum256(b[:copy(b[:], key)])
	}
	return sha256.Sum256([]byte(key))
}

// Prior returns the attempts key had before now, within TTL.
func (r *Keys) Prior(key string, now time.Time) int {
	d := digest(key)
	r.mu.Lock()
	defer r.mu.Unlock()
	u, ok := r.keys[d]
	if !ok || now.Sub(u.last) > TTL {
		return 0
	}
	return u.attempts
}

// Add records that a request with key, whose key had prior attempts before
// it, made attempts more, ending at now. The keys whose time is over
// leave.
func (r *Keys) Add(key string, prior, attempts int, now time.Time) {
	d := digest(key)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys == nil {
		r.keys = make(map[keyDigest]keyUse)
	}
	r.n++
	r.keys[d] = keyUse{attempts: prior + attempts, last: now, use: r.n}
	r.uses = append(r.uses, keyStamp{key: d, use: r.n})
	for len(r.uses) > 0 {
		u, live := r.live(r.uses[0])
		if live && len(r.keys) <= MaxKeys && now.Sub(u.last) <= TTL {
			break // the least recently used stays: every key does
		}
		if live {
			delete(r.keys, r.uses[0].key)
		}
		r.uses = r.uses[1:]
	}
	if len(r.uses) > 2*len(r.keys)+64 {
		r.compact()
	}
}

// live returns the use of s's key and whether s is its last use.
// Requires r.mu held.
func (r *Keys) live(s keyStamp) (keyUse, bool) {
	u, ok := r.keys[s.key]
	return u, ok && u.use == s.use
}

// compact drops the stale uses, which a key used again and again while
// older keys stay would otherwise pile up. Requires r.mu held.
func (r *Keys) compact() {
	uses := make([]keyStamp, 0, 2*len(r.keys))
	for _, s := range r.uses {
		if _, live := r.live(s); live {
			uses = append(uses, s)
		}
	}
	r.uses = uses
}
