package tcpao

import (
	"crypto/hmac"
	"sync"
	"unsafe"
	"weak"
)

// sharedSecrets are the copies Shared hands out, one per material (by
// fingerprint) while anything refers to it. The map's weak pointers keep
// none of them alive: a copy nobody refers to is wiped by secretBuf's
// finalizer, and its entry goes at a later purge. A weak pointer to an
// object with a finalizer reads nil from the moment the finalizer is
// queued (weak.Pointer.Value), so Shared never hands a copy about to be
// wiped to a new holder; and it compares the bytes besides.
var sharedSecrets struct {
	mu    sync.Mutex
	m     map[Fingerprint]weak.Pointer[byte]
	purge int // purge dead entries once the map is this long
}

// Shared returns a copy of s's material that it shares with every other
// Shared copy of the same material still referred to: the daemon's
// desired state holds one per key of a chain, not one per key per peer
// (16,384 copies, and as many finalizers, at 4,096 peers x 4 keys).
//
// A shared copy is nobody's to wipe: Zero on it, or on any Secret copied
// from it, does nothing, as other holders may still hand it to the
// kernel. Its bytes are wiped once nothing refers to it any more (by the
// collection that finds it unreachable, as every copy's are, see
// secretBuf). A secret of no or more than MaxKeyLen bytes, which the
// kernel does not take, is cloned instead.
func (s Secret) Shared() Secret {
	n := len(s.b)
	if n == 0 || n > MaxKeyLen {
		return s.Clone()
	}
	fp := s.Fingerprint()
	sh := &sharedSecrets
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p := sh.m[fp].Value(); p != nil {
		c := unsafe.Slice(p, n)
		// The material itself, not only the fingerprint: a zeroed
		// Secret keeps the fingerprint of what it held.
		if hmac.Equal(c, s.b) {
			return Secret{b: c, fp: fp}
		}
		return s.Clone()
	}
	c := s.Clone()
	if sh.m == nil {
		sh.m = map[Fingerprint]weak.Pointer[byte]{}
	}
	if len(sh.m) >= sh.purge {
		for k, w := range sh.m {
			if w.Value() == nil {
				delete(sh.m, k)
			}
		}
		sh.purge = 2*len(sh.m) + 16
	}
	sh.m[fp] = weak.Make(&c.b[0])
	return c
}

// isShared reports whether s is a copy Shared handed out.
func (s Secret) isShared() bool {
	if len(s.b) == 0 || s.fp == (Fingerprint{}) {
		return false // Shared's copies carry their fingerprint
	}
	sh := &sharedSecrets
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[s.fp].Value() == &s.b[0]
}
