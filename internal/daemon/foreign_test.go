package daemon_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// foreignKey is a key another agent installs (an operator's emergency
// setsockopt, a speaker that keys its own sockets): material aokeyd never
// had.
func foreignKey(send, recv uint8) tcpao.Key {
	return tcpao.Key{KeyRef: tcpao.KeyRef{Peer: peerHost, SendID: send, RecvID: recv}, Algorithm: tcpao.HMACSHA1,
		Secret: tcpao.NewSecret([]byte("an operator's emergency key"))}
}

// TestForeignKeysKept (issue 33): keys another agent put on the speaker's
// listener (90/91, which the session accepted after it copies too) and on
// an established session (80/81) are not aokeyd's: they are still there
// after ten passes, a roll and a restart of aokeyd, and status and plan
// list them. On the tree before the ownership record, the listener's was
// deleted at the first pass and the session's at the take-over after the
// restart. Then aoctl adopt hands them to aokeyd, and the next pass
// retires them (they are not desired).
func TestForeignKeysKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, k3 := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k1, k3}})
		e.waitKeys("listener", e.lis, ids(k1, k3))
		if err := e.lis.AddKey(foreignKey(90, 91), tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		e.up([]string{"20/21", "40/41", "90/91"}, k3, k1)
		if err := e.acc.AddKey(foreignKey(80, 81), tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		check := func(when string) {
			t.Helper()
			if got := keyIDs(t, e.lis); !slices.Contains(got, "90/91") {
				t.Errorf("%s: listener keys %v: the foreign key 90/91 was deleted", when, got)
			}
			if got := keyIDs(t, e.acc); !slices.Contains(got, "80/81") || !slices.Contains(got, "90/91") {
				t.Errorf("%s: session keys %v: a foreign key (80/81, 90/91) was deleted", when, got)
			}
		}
		for range 10 {
			e.d.Kick()
			e.quiet(time.Second)
		}
		check("after ten passes")

		// A scheduled roll (k3 becomes the key to send with) leaves them.
		k3.sendStart = time.Now().Add(-30 * time.Minute)
		e.refreshWith(k1, k3)
		rollTo(t, e, k3)
		e.quiet(time.Second)
		check("after a roll")
		// Status and plan list them, as kept and foreign.
		ws := strings.Join(e.peerStatus().Warnings, "\n")
		for _, want := range []string{"key send=80 recv=81 on the session's socket was not installed by aokeyd", "key send=90 recv=91 on the session's socket and the listener was not installed by aokeyd"} {
			if !strings.Contains(ws, want) {
				t.Errorf("status warnings lack %q:\n%s", want, ws)
			}
		}
		plan := strings.Join(e.planLines(), "\n")
		for _, want := range []string{"kept send=80 recv=81 peer=192.0.2.2/32 (foreign)", "kept send=90 recv=91 peer=192.0.2.2/32 (foreign)"} {
			if !strings.Contains(plan, want) {
				t.Errorf("plan lacks %q:\n%s", want, plan)
			}
		}

		e.stop()
		e.start("")
		e.d.Kick()
		e.quiet(5 * time.Second)
		check("after a restart")

		res, err := e.d.Adopt(context.Background(), control.AdoptRequest{Peer: peerAddr.String()})
		if err != nil {
			t.Fatalf("Adopt: %v", err)
		}
		var got []string
		for _, k := range res.Adopted {
			got = append(got, k.Socket+" "+foreignK(k.SendID, k.RecvID))
		}
		slices.Sort(got)
		if want := []string{"listener 192.0.2.1:179 90/91", "session 80/81", "session 90/91"}; !slices.Equal(got, want) {
			t.Errorf("adopted %v, want %v", got, want)
		}
		// aokeyd's now, and not desired: the next passes retire them.
		e.waitKeys("listener", e.lis, ids(k1, k3))
		e.waitKeys("session", e.acc, ids(k1, k3))
	})
}

// TestForeignKeyClashFreezesRoll: a foreign key under the IDs of the key
// aokeyd would roll to (k3's 40/41, other material) freezes the roll:
// nothing is deleted or replaced, the session keeps sending with k1, and
// status says why.
func TestForeignKeyClashFreezesRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, k3 := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k1}})
		e.waitKeys("listener", e.lis, ids(k1))
		e.up(ids(k1), k1)
		clash := foreignKey(k3.send, k3.recv)
		for _, s := range []tcpao.Socket{e.lis, e.acc} {
			if err := s.AddKey(clash, tcpao.AddOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		e.refreshWith(k1, k3)
		if _, err := e.d.Rotate(context.Background(), control.RotateRequest{Peer: peerAddr.String()}); err != nil {
			t.Fatalf("Rotate: %v", err)
		}
		for range 5 {
			e.d.Kick()
			e.quiet(time.Second)
		}
		for name, s := range map[string]tcpao.Socket{"listener": e.lis, "session": e.acc} {
			keys, err := s.Keys(tcpao.KeyFilter{})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, k := range keys {
				ids = append(ids, foreignK(k.SendID, k.RecvID))
				if k.SendID == k3.send && k.Fingerprint != clash.Secret.Fingerprint() {
					t.Errorf("%s: the foreign key under 40/41 was replaced by aokeyd's k3", name)
				}
			}
			if slices.Sort(ids); !slices.Equal(ids, []string{"20/21", "40/41"}) {
				t.Errorf("%s keys %v, want k1 and the foreign 40/41 untouched", name, ids)
			}
		}
		if i := info(t, e.acc); i.CurrentKey != k1.send {
			t.Errorf("session current key %d, want k1's %d: the roll must wait", i.CurrentKey, k1.send)
		}
		ws := strings.Join(e.peerStatus().Warnings, "\n")
		if want := "key core/k3 (send=40 recv=41) cannot be installed on the session's socket and the listener: another agent installed a key under the same IDs"; !strings.Contains(ws, want) {
			t.Errorf("status warnings lack %q:\n%s", want, ws)
		}
	})
}

// foreignK is a key's IDs as keyIDs prints them.
func foreignK(send, recv uint8) string {
	return strings.Join([]string{itoa(send), itoa(recv)}, "/")
}

func itoa(v uint8) string { return strconv.Itoa(int(v)) }

// rollTo waits for the session's roll to k, the remote router following
// as TestRotateNow's does.
func rollTo(t *testing.T, e *env, k testKey) {
	t.Helper()
	r := k.send
	if err := e.client.SetInfo(tcpao.InfoChange{RNext: &r}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the session to roll to "+k.name, func() bool {
		if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
			t.Fatalf("exchange during the roll: %v", err)
		}
		i := info(t, e.acc)
		return i.CurrentKey == k.send && i.RNextKey == k.recv && e.peerStatus().Rotation.State == "steady"
	})
}

// TestDesiredKeyInPlaceClaimed: a key aokeyd added just before it was
// killed is on the sockets but not in the ownership record (written
// shortly after each add). Seen in place while desired, under its IDs and
// with its material, it is aokeyd's: once the key source drops it, the
// next passes retire it. On the tree before the claim it stayed for good,
// foreign (TestKillDuringRotation's round 4 in the guest: the old key left
// on the listener and the session after a SIGKILL at the retire).
func TestDesiredKeyInPlaceClaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, k3 := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k1}})
		e.waitKeys("listener", e.lis, ids(k1))
		e.up([]string{"20/21"}, k1)
		// k3 as aokeyd installs it, put there behind the record's back.
		add := func(s *tcpaotest.Sock) {
			m := k3.mkt()
			defer m.Zero()
			k := tcpao.Key{KeyRef: tcpao.KeyRef{Peer: peerHost, SendID: k3.send, RecvID: k3.recv}, Algorithm: m.Algorithm,
				MACLen: m.MACLen, Secret: m.Secret.Clone()}
			defer k.Secret.Zero()
			if err := s.AddKey(k, tcpao.AddOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		add(e.lis)
		add(e.acc)
		e.refreshWith(k1, k3)
		e.d.Kick()
		e.quiet(time.Second)
		if got := keyIDs(t, e.lis); !slices.Equal(got, ids(k1, k3)) {
			t.Fatalf("listener keys %v, want %v", got, ids(k1, k3))
		}
		// The key source drops k3 (k1 still sends): aokeyd's, so retired.
		e.refreshWith(k1)
		e.waitKeys("listener", e.lis, ids(k1))
		e.waitKeys("session", e.acc, ids(k1))
	})
}
