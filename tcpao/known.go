package tcpao

import "crypto/subtle"

// KnownKey is a secret a reader expects a socket to hold under these IDs
// (KeyFilter.Known): a desired key.
type KnownKey struct {
	SendID, RecvID uint8
	Secret         Secret
}

// Known is a set of secrets a read of a socket expects to find
// (KeyFilter.Known). A key of the answer whose bytes equal a known
// secret's under the same IDs takes that secret's Fingerprint, computed
// when the secret was made (NewSecret), instead of an HMAC of its own:
// equal secrets have equal fingerprints, so the answer is the one the
// HMAC gives, and a key that matches none is fingerprinted as before.
// Invariants:
//   - The bytes are compared in constant time, and a match is exact
//     (length and bytes): a fingerprint is never taken from a key that
//     differs in any byte.
//   - A known secret whose bytes are all zero (zeroed by its owner, whose
//     fingerprint is still the material's it held) matches nothing.
//
// In a fleet-wide roll every read of every session and of the listener
// fingerprinted each key it returned, nearly all of them the desired
// keys the reader had in hand: an HMAC-SHA256 of each (under QEMU's
// emulation 0.5 of aokeyd's 10.5 CPU-seconds in a roll of 1,024 peers).
// A Known is read-only once made, and safe for concurrent use.
type Known struct {
	keys []KnownKey         // one per IDs and fingerprint
	idx  map[[2]uint8][]int // keys by IDs, when there are more than knownScan
}

// knownScan is how many known keys a match scans; a larger set is
// indexed by IDs (a listener's desired keys: three a peer, thousands).
const knownScan = 8

// NewKnown makes the set of keys' secrets, one of each per IDs (a fleet
// shares its chain's keys: thousands of listener keys, a few secrets).
// Secrets without a fingerprint of their own (not made by NewSecret) are
// left out. The secrets are shared, not copied: the caller keeps them
// unzeroed while the set is used, as it does for the writes it makes
// with them.
func NewKnown(keys []KnownKey) *Known {
	k := &Known{keys: make([]KnownKey, 0, min(len(keys), knownScan))}
	var seen map[knownID]bool // when there are many
	if len(keys) > knownScan {
		seen = make(map[knownID]bool, min(len(keys), 64))
	}
	for _, kk := range keys {
		if kk.Secret.fp == (Fingerprint{}) || len(kk.Secret.b) == 0 {
			continue
		}
		id := knownID{ids: [2]uint8{kk.SendID, kk.RecvID}, fp: kk.Secret.fp}
		if seen != nil {
			if seen[id] {
				continue
			}
			seen[id] = true
		} else if k.has(id) {
			continue
		}
		k.keys = append(k.keys, kk)
	}
	if len(k.keys) > knownScan {
		k.idx = make(map[[2]uint8][]int, len(k.keys))
		for i, kk := range k.keys {
			ids := [2]uint8{kk.SendID, kk.RecvID}
			k.idx[ids] = append(k.idx[ids], i)
		}
	}
	return k
}

// has reports whether k holds a secret under id's IDs with its
// fingerprint (a scan: the small sets).
func (k *Known) has(id knownID) bool {
	for i := range k.keys {
		if k.keys[i].SendID == id.ids[0] && k.keys[i].RecvID == id.ids[1] && k.keys[i].Secret.fp == id.fp {
			return true
		}
	}
	return false
}

type knownID struct {
	ids [2]uint8
	fp  Fingerprint
}

// fingerprint is the fingerprint of b, a key's bytes under sendID and
// recvID, when a known secret under those IDs holds exactly b.
func (k *Known) fingerprint(sendID, recvID uint8, b []byte) (Fingerprint, bool) {
	if k == nil {
		return Fingerprint{}, false
	}
	if k.idx != nil {
		for _, i := range k.idx[[2]uint8{sendID, recvID}] {
			if fp, ok := k.keys[i].holds(b); ok {
				return fp, true
			}
		}
		return Fingerprint{}, false
	}
	for i := range k.keys {
		if k.keys[i].SendID == sendID && k.keys[i].RecvID == recvID {
			if fp, ok := k.keys[i].holds(b); ok {
				return fp, true
			}
		}
	}
	return Fingerprint{}, false
}

// holds reports whether the known secret is exactly b, with its
// fingerprint; a zeroed secret holds nothing.
func (kk *KnownKey) holds(b []byte) (Fingerprint, bool) {
	s := kk.Secret.b
	if len(s) != len(b) || subtle.ConstantTimeCompare(s, b) != 1 {
		return Fingerprint{}, false
	}
	var or byte
	for _, c := range s {
		or |= c
	}
	if or == 0 {
		return Fingerprint{}, false
	}
	return kk.Secret.fp, true
}

// Covers reports whether a key read under these IDs with fingerprint fp
// (as a read returns it) holds one of k's secrets: on a real kernel's
// answer, a key whose fingerprint cost no HMAC. For counting readers (the
// in-memory kernel computes none either way).
func (k *Known) Covers(sendID, recvID uint8, fp Fingerprint) bool {
	if k == nil || fp == (Fingerprint{}) {
		return false
	}
	if k.idx != nil {
		for _, i := range k.idx[[2]uint8{sendID, recvID}] {
			if k.keys[i].Secret.fp == fp {
				return true
			}
		}
		return false
	}
	return k.has(knownID{ids: [2]uint8{sendID, recvID}, fp: fp})
}
