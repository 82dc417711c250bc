package daemon_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
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
