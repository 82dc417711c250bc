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

// narrowReadsSocket counts the listener reads that fingerprint only some
// keys (KeyFilter.Ref or FingerprintIDs: the revoke's, never a pass's) and
// the keys they fingerprint.
type narrowReadsSocket struct {
	tcpao.Socket
	reads, fps *atomic.Int64
}

func (s narrowReadsSocket) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	ks, err := s.Socket.Keys(f)
	if f.Ref != nil || f.FingerprintIDs != nil {
		s.reads.Add(1)
		for _, k := range ks {
			if f.Fingerprints(k.SendID, k.RecvID) {
				s.fps.Add(1)
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
		var reads, fps atomic.Int64
		f := newRevokeFleet(t, fleetOptions{n: n, perPeer: true, listener: func(s tcpao.Socket) tcpao.Socket {
			return narrowReadsSocket{Socket: s, reads: &reads, fps: &fps}
		}})
		synctest.Wait()
		reads.Store(0)
		fps.Store(0)
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
	})
}
