package daemon_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// narrowReadsSocket counts the reads that fingerprint only some keys
// (KeyFilter.Ref or FingerprintIDs: the revoke's, never a pass's), the
// keys they fingerprint, and of those the ones a real kernel's read would
// HMAC: their material is not among the read's known secrets
// (KeyFilter.Known; the in-memory kernel fingerprints every key itself).
type narrowReadsSocket struct {
	tcpao.Socket
	*readCounts
}

// readCounts are a narrowReadsSocket's counters, shared by every socket
// it wraps.
type readCounts struct{ reads, fps, hmacs atomic.Int64 }

func (c *readCounts) reset() {
	c.reads.Store(0)
	c.fps.Store(0)
	c.hmacs.Store(0)
}

// countedRevoke builds a fleet of n peers, a binding each, whose
// listener (listener true) or sessions count their reads, and revokes k1
// (revokeK1: want n outcomes of action on sockets named prefix).
func countedRevoke(t *testing.T, n int, listener bool, prefix string, action control.SocketAction) *readCounts {
	t.Helper()
	c := &readCounts{}
	wrap := func(s tcpao.Socket) tcpao.Socket { return narrowReadsSocket{Socket: s, readCounts: c} }
	o := fleetOptions{n: n, perPeer: true}
	if listener {
		o.listener = wrap
	} else {
		o.session = wrap
	}
	f := newRevokeFleet(t, o)
	synctest.Wait()
	c.reset()
	revokeK1(t, f, prefix, action, n)
	return c
}

// revokeK1 revokes f's current key k1 everywhere and counts the socket
// outcomes with action whose socket name starts with prefix, failing the
// test unless there are want of them.
func revokeK1(t *testing.T, f *revokeFleet, prefix string, action control.SocketAction, want int) {
	t.Helper()
	res, err := f.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: f.k1.name})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range res.Sockets {
		if strings.HasPrefix(s.Socket, prefix) && s.Action == action && s.Error == "" {
			n++
		}
	}
	if n != want {
		t.Fatalf("revoke: %d sockets %q %s, want %d: %+v", n, prefix, action, want, res.Sockets)
	}
}

func (s narrowReadsSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	ks, err := s.Socket.Keys(f)
	if f.Ref != nil || f.FingerprintIDs != nil {
		s.reads.Add(1)
		for _, k := range ks {
			if f.Fingerprints(k.SendID, k.RecvID) {
				s.fps.Add(1)
				if !f.Known.Covers(k.SendID, k.RecvID, k.Fingerprint) {
					s.hmacs.Add(1)
				}
			}
		}
	}
	return ks, err
}

// TestRevokeReadsListenerOnce: a global revoke on a fleet whose peers each
// have a binding (the listener holds the key once per peer) reads the
// listener once, fingerprinting the keys under the revoked key's IDs, one
// per peer. Before, it read each key it would delete again, alone
// (KeyFilter.Ref): a getsockopt and, in the kernel, a walk of the whole
// key list per peer.
func TestRevokeReadsListenerOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 32
		c := countedRevoke(t, n, true, "listen ", control.ActionDeleted)
		if r, k := c.reads.Load(), c.fps.Load(); r != 1 || k != n {
			t.Errorf("the revoke read the listener %d times for some keys' fingerprints, %d keys fingerprinted; want once, %d", r, k, n)
		}
		if h := c.hmacs.Load(); h != 0 {
			t.Errorf("the revoke's listener read would HMAC %d keys; want 0 (each holds the revoked key's secret, which the revoke has)", h)
		}
	})
}

// TestRevokeSessionReadsKnowTheSecret: each session's revoke read
// fingerprints the key under the revoked key's IDs from the revoked
// key's secret in hand (KeyFilter.Known), not with an HMAC: under QEMU's
// emulation the HMACs were 0.3 of a 1,024-peer revoke's 4.4
// CPU-seconds (docs/performance.md).
func TestRevokeSessionReadsKnowTheSecret(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 16
		c := countedRevoke(t, n, false, "peer ", control.ActionForcedReplaced)
		if r, k, h := c.reads.Load(), c.fps.Load(), c.hmacs.Load(); r != n || k != n || h != 0 {
			t.Errorf("the revoke's session reads: %d reads, %d keys fingerprinted, %d by HMAC; want %d, %d, 0", r, k, h, n, n)
		}
	})
}
