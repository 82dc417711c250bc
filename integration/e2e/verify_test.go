package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// TestTCPOptionsMismatch: A rolls to a key whose tcp_options (exclude) differ
// from BIRD's (BIRD always includes TCP options). Then BIRD's session is
// restarted: its reconnect SYNs fail verification on gobgpd's listener, and
// aokeyd's status carries the warning and the metric
// aokeyd_peer_verify_failing is 1 as soon as the listener has counted a
// failing segment after the session went down. Status shows the key's
// tcp_options throughout.
func TestTCPOptionsMismatch(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	k1 := key{i: 1, birdPreferred: true}
	l := newLab(t, []key{k1}, nil)
	l.waitEstablished(60 * time.Second)
	now := time.Now()
	old := k1
	old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(time.Hour)
	k2 := key{i: 2, sendStart: now.Add(-time.Second), acceptStart: now.Add(-time.Second), excludeOpts: true}
	l.writeKeys([]key{old, k2})
	k2b := k2
	k2b.birdPreferred = true
	k1b := k1
	k1b.birdPreferred = false
	if err := l.bird.Configure(l.birdConfig([]key{k1b, k2b})); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 60*time.Second, "k2 on A's session with tcp_options exclude", func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		ok := slices.ContainsFunc(st.Keys, func(k control.Key) bool {
			return k.SendID == k2.sendID() && k.TCPOptions == control.TCPOptionsExclude
		})
		return ok, fmt.Sprintf("A keys %v (%s, %s)", lab.KeyList(st.Keys), st.Rotation.State, st.Rotation.LastAbort)
	})
	// The roll completes without a flap: the established session's
	// segments verify either way (the time bomb), only the next reconnect
	// fails.
	rolled := lab.Within(45*time.Second, "the roll to k2", func() (bool, string) {
		st, err := l.tryStatus()
		return err == nil && slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == k2.sendID() && k.Current }), fmt.Sprint(err)
	}) == nil
	st := l.status()
	t.Logf("before the restart: roll to k2 completed=%t; A keys %v, session %s, rotation %s %q, counters %+v", rolled, lab.KeyList(st.Keys),
		st.SessionState, st.Rotation.State, st.Rotation.LastAbort, st.Counters)
	if !rolled || st.SessionState != "established" {
		t.Fatalf("the roll to the key with other tcp_options did not complete on an established session")
	}
	warn := control.WarnVerifyFailing(addrB.String())
	if slices.Contains(st.Warnings, warn) {
		t.Fatalf("verify warning while the session is up: %q", st.Warnings)
	}

	if out, err := l.bird.Birdc("restart", "peer_a"); err != nil {
		t.Fatalf("birdc restart: %v: %s", err, out)
	}
	var down time.Time
	lab.Eventually(t, 30*time.Second, "A's session down", func() (bool, string) {
		p := l.peerA()
		return !p.Established(), p.State.String()
	})
	down = time.Now()
	var failedAt time.Time
	lab.Eventually(t, 60*time.Second, "a failing SYN counted on the listener", func() (bool, string) {
		for _, k := range l.listenerKeys() {
			if k.SendID == k2.sendID() && k.PktBad > 0 {
				failedAt = time.Now()
				return true, ""
			}
		}
		return false, "listener k2 pkt_bad 0"
	})
	var warnedAt time.Time
	lab.Eventually(t, 10*time.Second, "the verify warning in status", func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		if slices.Contains(st.Warnings, warn) {
			warnedAt = time.Now()
			return true, ""
		}
		return false, fmt.Sprintf("session %s, warnings %q, listener %+v", st.SessionState, st.Warnings, st.Listener)
	})
	st = l.status()
	if st.Listener == nil || !st.Listener.VerifyFailing {
		t.Fatalf("status listener %+v: want verify_failing", st.Listener)
	}
	t.Logf("session down at +0s; first failing SYN seen on the listener at +%v; warning in status at +%v",
		failedAt.Sub(down).Round(time.Millisecond), warnedAt.Sub(down).Round(time.Millisecond))
	want := fmt.Sprintf(`%s{peer="%s",vrf=""} 1`, metrics.NamePeerVerifyFailing, addrB)
	lab.Eventually(t, 10*time.Second, "the verify metric", func() (bool, string) {
		out, err := l.a.Run("wget", "-qO-", "http://127.0.0.1:9179/metrics")
		return err == nil && strings.Contains(out, want), fmt.Sprint(err)
	})
	b, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", l.ctl.Socket(), "status", addrB.String()).CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("aoctl status: %v: %s", err, out)
	}
	if !strings.Contains(out, "WARNING: "+warn) || !strings.Contains(out, "exclude") {
		t.Fatalf("aoctl status lacks the warning or the key's tcp_options:\n%s", out)
	}
	t.Logf("aoctl status after the restart:\n%s", out)
}
