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
// its IDs and prefix, so it reads the listener (a fleet's, with three keys
// per peer) without the keys' fingerprints, an HMAC of each secret, in the
// revoke's own time; only a key it would delete is read again, alone
// (KeyFilter.Ref), to check its material is the revoked key's. Before,
// it asked for every key's.
func TestRevokeReadsNoFingerprints(t *testing.T) { synctest.Test(t, testRevokeReadsNoFingerprints) }

func testRevokeReadsNoFingerprints(t *testing.T) {
	e, k1, _ := steadyEnv(t, time.Hour)
	synctest.Wait()
	w0 := e.lisC.wideReads()
	r0, f0 := e.lisC.keyReads()
	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name})
	if err != nil {
		t.Fatal(err)
	}
	r1, f1 := e.lisC.keyReads()
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
	if f1-f0 != 1 {
		t.Errorf("the revoke read %d keys alone with their fingerprints, want 1: the one it deleted", f1-f0)
	}
}
