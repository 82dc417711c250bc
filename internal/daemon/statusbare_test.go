package daemon_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// TestStatusReadsNoFingerprints: status (aoctl status, and the fleet
// document built from it every refresh) reads each socket's IDs, flags and
// counters without the keys' fingerprints: it shows no secret and plans
// nothing, and the HMAC of every key on every socket was most of a status
// build's kernel cost in the emulated guest. Before, every read asked for
// them.
func TestStatusReadsNoFingerprints(t *testing.T) { synctest.Test(t, testStatusReadsNoFingerprints) }

func testStatusReadsNoFingerprints(t *testing.T) {
	e, _, _ := steadyEnv(t, time.Hour)
	synctest.Wait()
	accR0, accF0 := e.accC.keyReads()
	lisR0, lisF0 := e.lisC.keyReads()
	rep, err := e.d.Status(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Peers) != 1 || len(rep.Peers[0].Keys) == 0 {
		t.Fatalf("status %+v: want the peer with its keys", rep.Peers)
	}
	accR1, accF1 := e.accC.keyReads()
	lisR1, lisF1 := e.lisC.keyReads()
	if accR1 == accR0 || lisR1 == lisR0 {
		t.Fatalf("status read the session %d times and the listener %d times, want both read", accR1-accR0, lisR1-lisR0)
	}
	if accF1 != accF0 || lisF1 != lisF0 {
		t.Errorf("status asked for fingerprints on %d session and %d listener reads, want none", accF1-accF0, lisF1-lisF0)
	}
}

// TestRevokeReadsNoFingerprints: a revoke finds the key on the listener by
// its IDs and prefix, in one read of the listener that fingerprints only
// the keys under the revoked key's IDs (KeyFilter.FingerprintIDs), to
// check each one's material is the revoked key's, from the revoked
// secret in hand, without an HMAC (KeyFilter.Known): not every key's (an
// HMAC of each secret, three keys a peer on a fleet's listener), and not
// a read of its own per key it deletes (before: one GET_KEYS with
// KeyFilter.Ref and one TCP_AO_INFO per deleted key, each a walk of the
// kernel's whole key list, O(peers^2) in a fleet's global revoke).
func TestRevokeReadsNoFingerprints(t *testing.T) { synctest.Test(t, testRevokeReadsNoFingerprints) }

func testRevokeReadsNoFingerprints(t *testing.T) {
	e, k1, _ := steadyEnv(t, time.Hour)
	synctest.Wait()
	w0, fp0 := e.lisC.wideReads(), e.lisC.fingerprints()
	r0, _ := e.lisC.keyReads()
	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
	if err != nil {
		t.Fatal(err)
	}
	r1, _ := e.lisC.keyReads()
	deleted := false
	for _, s := range res.Sockets {
		deleted = deleted || strings.HasPrefix(s.Socket, "listen ") && s.Action == control.ActionDeleted
	}
	if !deleted || r1 == r0 {
		t.Fatalf("revoke %+v read the listener %d times: want it read and k1 deleted from it", res.Sockets, r1-r0)
	}
	if w := e.lisC.wideReads() - w0; w != 0 {
		t.Errorf("the revoke asked for every key's fingerprint on %d of its %d listener reads, want none", w, r1-r0)
	}
	if fp := e.lisC.fingerprints() - fp0; fp != 0 {
		t.Errorf("the revoke fingerprinted %d of the listener's keys by HMAC, want 0: the one it deleted holds the revoked secret it has (KeyFilter.Known)", fp)
	}
}
