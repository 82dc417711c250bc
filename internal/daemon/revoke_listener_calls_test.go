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
	reads, fps, hmacs *atomic.Int64
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
		var reads, fps, hmacs atomic.Int64
		f := newRevokeFleet(t, fleetOptions{n: n, perPeer: true, listener: func(s tcpao.Socket) tcpao.Socket {
			return narrowReadsSocket{Socket: s, reads: &reads, fps: &fps, hmacs: &hmacs}
		}})
		synctest.Wait()
		reads.Store(0)
		fps.Store(0)
		hmacs.Store(0)
		res, err := f.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: f.k1.name})
		if err != nil {
			t.Fatal(err)
		}
		deleted := 0
		for _, s := range res.Sockets {
			if strings.HasPrefix(s.Socket, "listen ") && s.Action == control.ActionDeleted && s.Error == "" {
				deleted++
			}
		}
		if deleted != n {
			t.Fatalf("revoke deleted %d listener keys, want %d: %+v", deleted, n, res.Sockets)
		}
		if r, k := reads.Load(), fps.Load(); r != 1 || k != n {
			t.Errorf("the revoke read the listener %d times for some keys' fingerprints, %d keys fingerprinted; want once, %d", r, k, n)
		}
		if h := hmacs.Load(); h != 0 {
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
		var reads, fps, hmacs atomic.Int64
		f := newRevokeFleet(t, fleetOptions{n: n, perPeer: true, session: func(s tcpao.Socket) tcpao.Socket {
			return narrowReadsSocket{Socket: s, reads: &reads, fps: &fps, hmacs: &hmacs}
		}})
		synctest.Wait()
		reads.Store(0)
		fps.Store(0)
		hmacs.Store(0)
		res, err := f.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: f.k1.name})
		if err != nil {
			t.Fatal(err)
		}
		forced := 0
		for _, s := range res.Sockets {
			if s.Action == control.ActionForcedReplaced && s.Error == "" {
				forced++
			}
		}
		if forced != n {
			t.Fatalf("revoke forced %d sessions, want %d: %+v", forced, n, res.Sockets)
		}
		if r, k, h := reads.Load(), fps.Load(), hmacs.Load(); r != n || k != n || h != 0 {
			t.Errorf("the revoke's session reads: %d reads, %d keys fingerprinted, %d by HMAC; want %d, %d, 0", r, k, h, n, n)
		}
	})
}
