package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestRestartKeepsCarriedKeys: what the never-strand rule keeps on the
// listener survives a restart of aokeyd (issue 47). The peer lags on k1
// after k1 left the key source (its lifetime ended mid-roll), so the
// listener keeps k1 as carried; aokeyd is then restarted (memory lost,
// its state directory kept, or lost too) with the session up, or down.
// After the restart's first passes the listener still holds k1 and the
// peer's reconnect with k1 succeeds.
func TestRestartKeepsCarriedKeys(t *testing.T) {
	for _, c := range []struct {
		name string
		down bool // the session goes down before the restart
		lose bool // the carried-keys record is deleted while aokeyd is down
	}{
		{name: "session up"},
		{name: "session up, record lost", lose: true},
		{name: "session down", down: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				now := time.Now()
				k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour), end: now.Add(time.Minute)}
				k2 := testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Minute)}
				e := newEnv(t, envOptions{keys: []testKey{k1}, switchTimeout: time.Hour})
				e.waitKeys("listener", e.lis, ids(k1))
				e.up(ids(k1), k1)
				if err := e.net.Exchange(e.client, e.acc, 2); err != nil { // the peer sends with k1
					t.Fatal(err)
				}
				e.refreshWith(k1, k2) // the peer never gets k2
				e.waitFor("the roll to k2 announced", func() bool { return e.peerStatus().Rotation.State == "announced" })
				time.Sleep(time.Until(k1.end) + time.Second)
				e.settle()
				if got := keyIDs(t, e.lis); !slices.Contains(got, k1.ids()) {
					t.Fatalf("before the restart: listener keys %v lack k1 (%s)", got, k1.ids())
				}
				if c.down {
					down := e.sessionInfo()
					down.State = bgp.StateIdle
					e.sp.Set(down)
					e.waitFor("the session down in status", func() bool { return e.peerStatus().Rotation.State == "down" })
					e.settle()
				}

				e.stop()
				if c.lose {
					for _, f := range []string{"carried-keys.json", "carried-keys.json.bak"} {
						if err := os.Remove(filepath.Join(filepath.Dir(e.ownedFile), f)); err != nil && !os.IsNotExist(err) {
							t.Fatal(err)
						}
					}
				}
				e.start("")
				// The first passes after the start, each a full one.
				for range 3 {
					e.settle()
					if got := keyIDs(t, e.lis); !slices.Contains(got, k1.ids()) {
						t.Fatalf("after the restart: listener keys %v lack k1 (%s), which the peer last authenticated with", got, k1.ids())
					}
				}
				if !hasWarning(e.warningsOf(), []string{"core/k1"}) {
					t.Errorf("after the restart no warning names the kept key core/k1: %q", e.warningsOf())
				}
				if err := e.reconnect([]testKey{k1}); err != nil {
					t.Errorf("the peer's reconnect with k1 after the restart failed: %v", err)
				}
			})
		})
	}
}

// TestLostMigrationRecord: a peer migrated from TCP-MD5 to TCP-AO whose
// migration record is lost (a purge and reinstall, a restore from an old
// backup) while its chain still holds the password (issue 47). After the
// restart the kernel is the truth: the peer's session runs TCP-AO with
// verified segments and the listener holds its TCP-AO keys, so it is
// migrated whatever the record says. An unsigned SYN from the peer's
// address is tried after every write to the listener and is never taken;
// the password never comes back; the peer's TCP-AO reconnect works;
// status says TCP-AO and warns that the chain still holds md5.
func TestLostMigrationRecord(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("session_listed_after_the_first_pass=%t", late), func(t *testing.T) { testLostMigrationRecord(t, late) })
	}
}

// testLostMigrationRecord runs one case; late: the speaker lists the
// session only after the restarted daemon's first passes (as gobgpd did
// in the guest), so that no input of those passes changes when it does.
func testLostMigrationRecord(t *testing.T, late bool) {
	synctest.Test(t, func(t *testing.T) {
		const pw = "md5-Password-one"
		e, k0 := md5Env(t, pw)
		if _, err := e.d.Migrate(context.Background(), control.MigrateRequest{Peer: peerAddr.String(), Bound: control.Duration(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("TCP-AO beside TCP-MD5", func() bool { return len(listenerPrefixes(t, e.lis)) == 1 })
		e.dialWith(aoPrep(k0))
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the migration done and the TCP-MD5 key gone", func() bool {
			st := e.peerStatus()
			return st.Migration != nil && st.Migration.Step == "done" && len(md5Of(t, e.lis)) == 0
		})

		var writes, unsigned, md5Added atomic.Int32
		e.net.OnWrite(func(s *tcpaotest.Sock) {
			if s != e.lis {
				return
			}
			writes.Add(1)
			if ks, err := s.MD5Keys(); err == nil && len(ks) > 0 {
				md5Added.Add(1)
			}
			c, err := e.net.Socket(peerAddr)
			if err != nil {
				return
			}
			defer c.Close()
			if a, err := e.net.Connect(c, e.lis); err == nil {
				a.Close()
				unsigned.Add(1)
			}
		})
		t.Cleanup(func() { e.net.OnWrite(nil) })
		e.stop() // the env keeps its migrations in memory: the record is lost
		if late {
			idle := e.session
			idle.State = bgp.StateIdle
			e.sp.Set(idle)
		}
		e.start("")
		for range 3 {
			e.settle()
		}
		if late {
			e.sp.Set(e.session)
			e.waitFor("the session taken over", func() bool { return e.peerStatus().Rotation.State == "steady" })
			e.quiet(10 * time.Second) // session-event passes and resyncs, no input changed
		}
		e.net.OnWrite(nil)
		if n := unsigned.Load(); n > 0 {
			t.Errorf("after the restart an unsigned SYN from the peer was taken %d times (after %d listener writes)", n, writes.Load())
		}
		if n := md5Added.Load(); n > 0 || len(md5Of(t, e.lis)) > 0 {
			t.Errorf("after the restart the TCP-MD5 password went back on the listener (%d writes saw it)", n)
		}
		if e.tryDial(unsignedPrep) || e.tryDial(md5Prep(pw)) || !e.tryDial(aoPrep(k0)) {
			t.Error("after the restart the listener does not take exactly TCP-AO from the peer")
		}
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Errorf("the TCP-AO session after the restart: %v", err)
		}
		st := e.peerStatus()
		if st.Migration == nil || st.Migration.Step != "done" {
			t.Errorf("status migration %+v, want done (recovered from the kernel)", st.Migration)
		}
		if st.Auth != control.AuthAO {
			t.Errorf("status auth %q, want %q", st.Auth, control.AuthAO)
		}
		if !hasWarning(st.Warnings, []string{"md5", "migrated"}) {
			t.Errorf("no warning that the migrated peer's chain still holds md5: %q", st.Warnings)
		}
	})
}

// TestKeptWarningEndsWithRoll: a key past its lifetime that the lagging
// peer still used is kept and warned of; once the peer takes the
// successor and the roll retires the old key from the session and the
// listener, the warning and its aokeyd_keys_kept series end with it, at
// once (issue 47: the guest saw the warning, which feeds a critical alert,
// linger after the roll while the sockets held only the new key).
func TestKeptWarningEndsWithRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		k1 := testKey{name: "k1", send: 20, recv: 21, secret: "daemon-test-secret-k1-Vb2", sendStart: now.Add(-time.Hour), end: now.Add(time.Minute)}
		k2 := testKey{name: "k2", send: 30, recv: 31, secret: "daemon-test-secret-k2-Lm9", sendStart: now.Add(-time.Minute)}
		reg := prometheus.NewPedanticRegistry()
		m, err := metrics.New(reg, metrics.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, envOptions{keys: []testKey{k1}, metrics: m, switchTimeout: time.Hour})
		e.waitKeys("listener", e.lis, ids(k1))
		e.up(ids(k1), k1)
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Fatal(err)
		}
		e.refreshWith(k1, k2) // the peer does not have k2 yet
		e.waitFor("the roll to k2 announced", func() bool { return e.peerStatus().Rotation.State == "announced" })
		time.Sleep(time.Until(k1.end) + time.Second)
		e.settle()
		if !hasWarning(e.warningsOf(), []string{"core/k1"}) {
			t.Fatalf("k1 kept past its lifetime is not warned of: %q", e.warningsOf())
		}
		// The peer gets k2, sends with it and asks for it: the roll
		// completes.
		m2 := k2.mirror()
		if err := e.client.AddKey(m2, tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		m2.Secret.Zero()
		rn := k2.send
		if err := e.client.SetInfo(tcpao.InfoChange{RNext: &rn}); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the roll to k2 done and k1 gone from the session and the listener", func() bool {
			if err := e.net.Exchange(e.client, e.acc, 1); err != nil {
				t.Fatal(err)
			}
			return slices.Equal(keyIDs(t, e.acc), ids(k2)) && slices.Equal(keyIDs(t, e.lis), ids(k2))
		})
		if ws := e.warningsOf(); hasWarning(ws, []string{"core/k1"}) || hasWarning(ws, []string{"send=20 recv=21"}) {
			t.Errorf("k1 is on no socket, yet status still warns of it: %q", ws)
		}
		if n, err := testutil.GatherAndCount(m.Gatherer(), metrics.NameKeysKept); err != nil || n != 0 {
			t.Errorf("%s: %d series (%v) with k1 on no socket, want none", metrics.NameKeysKept, n, err)
		}
	})
}
