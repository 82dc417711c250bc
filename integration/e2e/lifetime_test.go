package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestLifetimeEnd: gobgpd+aokeyd and BIRD 2.17 with one key k1, which
// BIRD keeps for ever. A key that carries the session is never taken off
// the session or the listener by what A's key file says of it:
//
//	(a) k1's lifetime ends by the clock (its end set 40 s ahead);
//	(b) the clock jumps forward past k1's end;
//	(c) a roll to k2, which BIRD never gets (a lagging peer), while k1's
//	    lifetime ends;
//	(d) k1's secret is edited in place in A's key file.
//
// In each the session stays up, status warns (naming core/k1) and
// aokeyd_keys_kept has k1's series (the alert rules fire on it at once:
// make rules), and `birdc restart` brings BIRD's session back with TCP-AO
// through gobgpd's listener. It prints
// "lifetime-end: cases=4 reconnect_ok=4 warned=4".
//
// It moves the guest's wall clock in (b), so it runs alone (AOKEYD_ALONE):
// (a), (c) and (d) side by side, then (b).
func TestLifetimeEnd(t *testing.T) {
	kerneltest.Require(t)
	var mu sync.Mutex
	cases, reconnectOK, warned := 0, 0, 0
	count := func(ok, w bool) {
		mu.Lock()
		defer mu.Unlock()
		cases++
		if ok {
			reconnectOK++
		}
		if w {
			warned++
		}
	}
	t.Run("by_the_clock", func(t *testing.T) {
		t.Run("a_only_key_ends", func(t *testing.T) {
			t.Parallel()
			count(runLifetimeEnd(t, "past its lifetime", func(l *testbed, k1 key, _ *session) {
				k1.sendEnd, k1.acceptEnd = endIn(40 * time.Second)
				l.writeKeys([]key{k1})
				time.Sleep(time.Until(k1.acceptEnd) + 3*time.Second)
			}))
		})
		t.Run("c_lagging_peer", func(t *testing.T) {
			t.Parallel()
			count(runLifetimeEnd(t, "past its lifetime", func(l *testbed, k1 key, _ *session) {
				k1.sendEnd, k1.acceptEnd = endIn(40 * time.Second)
				k2 := key{i: 2, sendStart: time.Now().Add(-time.Second)}
				l.writeKeys([]key{k1, k2}) // BIRD never gets k2
				lab.Eventually(t, 40*time.Second, "A announces k2 to B", func() (bool, string) {
					st := l.status()
					return st.Rotation.State == "announced" || st.Rotation.LastAbortReason != "", fmt.Sprintf("rotation %+v", st.Rotation)
				})
				time.Sleep(time.Until(k1.acceptEnd) + 3*time.Second)
				st := l.status()
				if !slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == k1.sendID() && k.Current }) {
					t.Errorf("A stopped sending with k1, which B alone has: %s", lab.KeyList(st.Keys))
				}
			}))
		})
		t.Run("d_edited_in_place", func(t *testing.T) {
			t.Parallel()
			count(runLifetimeEnd(t, "edited in place", func(l *testbed, k1 key, _ *session) {
				before := l.keyPrints()
				edited := k1
				edited.edited = true
				l.writeKeys([]key{edited})
				lab.Eventually(t, 20*time.Second, "the edit seen and held back", func() (bool, string) {
					st := l.status()
					return hasWords(st.Warnings, "core/k1", "edited in place"), fmt.Sprintf("warnings %q", st.Warnings)
				})
				time.Sleep(3 * time.Second) // a few more passes and steady reads
				if after := l.keyPrints(); !slices.Equal(before, after) {
					t.Errorf("the edit changed keys on gobgpd's sockets:\n%s\nthen\n%s", strings.Join(before, "\n"), strings.Join(after, "\n"))
				}
			}))
		})
	})
	t.Run("b_clock_jump", func(t *testing.T) {
		count(runLifetimeEnd(t, "past its lifetime", func(l *testbed, k1 key, s *session) {
			k1.sendEnd, k1.acceptEnd = endIn(time.Hour)
			l.writeKeys([]key{k1})
			time.Sleep(3 * time.Second) // read by aokeyd
			jumpClock(t, 75*time.Minute)
			t.Cleanup(func() { jumpClock(t, -75*time.Minute) })
			// BIRD shows when its session came up in wall-clock time,
			// which moved with the jump: the new reading is the baseline
			// (gobgpd's uptime and flops still catch a real flap).
			if st, err := l.bird.Protocol(); err == nil {
				s.birdSince = st.Since
			}
			time.Sleep(5 * time.Second)
		}))
	})
	fmt.Printf("lifetime-end: cases=%d reconnect_ok=%d warned=%d\n", cases, reconnectOK, warned)
	if cases != 4 || reconnectOK != cases || warned != cases {
		t.Fatalf("lifetime end: %d cases, %d reconnected, %d warned", cases, reconnectOK, warned)
	}
}

// endIn is a lifetime end d from now, for both the send and the accept
// lifetime.
func endIn(d time.Duration) (send, accept time.Time) {
	end := time.Now().Add(d)
	return end, end
}

func jumpClock(t *testing.T, d time.Duration) {
	out, err := exec.Command("date", "-s", "@"+strconv.FormatInt(time.Now().Add(d).Unix(), 10)).CombinedOutput()
	if err != nil {
		t.Fatalf("date -s: %v: %s", err, out)
	}
}

func hasWords(ws []string, words ...string) bool {
	return slices.ContainsFunc(ws, func(w string) bool {
		for _, x := range words {
			if !strings.Contains(w, x) {
				return false
			}
		}
		return true
	})
}

// runLifetimeEnd brings up a lab with k1 on both ends (BIRD's without an
// end), runs fault, and checks that the session stayed up, that status
// warns with warn (and core/k1) and the metrics have k1's
// aokeyd_keys_kept series, that gobgpd's listener still has k1 and that
// BIRD's restarted session comes back with TCP-AO. It reports whether the
// reconnect succeeded and whether the warning and the series were seen.
func runLifetimeEnd(t *testing.T, warn string, fault func(l *testbed, k1 key, s *session)) (reconnected, warnedOK bool) {
	k1 := key{i: 1, birdPreferred: true}
	l := newLabWith(t, []key{k1}, []key{k1}, labOptions{})
	s := l.waitEstablished(90 * time.Second)
	fault(l, k1, &s)
	l.checkNoFlap(s, "after the fault")

	warnErr := lab.Within(45*time.Second, "the warning in status", func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		return hasWords(st.Warnings, "core/k1", warn), fmt.Sprintf("warnings %q, want core/k1 and %q", st.Warnings, warn)
	})
	if warnErr != nil {
		t.Errorf("aoctl status: %v", warnErr)
	}
	seriesErr := lab.Within(45*time.Second, "k1's aokeyd_keys_kept series", func() (bool, string) {
		page, err := l.a.Run("wget", "-qO-", l.metricsURL)
		want := fmt.Sprintf(`send_id="%d"`, k1.sendID())
		return err == nil && slices.ContainsFunc(strings.Split(page, "\n"), func(s string) bool {
			return strings.HasPrefix(s, "aokeyd_keys_kept{") && strings.Contains(s, want) && strings.HasSuffix(s, " 1")
		}), fmt.Sprintf("no aokeyd_keys_kept series for k1 (%v)", err)
	})
	if seriesErr != nil {
		t.Errorf("metrics: %v", seriesErr)
	}
	if !slices.ContainsFunc(l.listenerKeys(), func(k tcpao.KeyInfo) bool { return k.SendID == k1.sendID() && k.RecvID == k1.recvID() }) {
		t.Errorf("gobgpd's listener lost k1: %s", listenerIDs(l.listenerKeys()))
	}
	err := l.reconnectBIRD()
	if err != nil {
		t.Errorf("BIRD's restarted session did not come back with TCP-AO: %v", err)
	}
	return err == nil, warnErr == nil && seriesErr == nil
}

// keyPrints lists the keys of gobgpd's listeners and of its sessions with
// B: IDs, prefix, algorithm and the material's fingerprint (this process's).
func (l *testbed) keyPrints() []string {
	l.t.Helper()
	refs, err := sockets.System{}.Listeners(l.gobgp.PID, 179)
	if err != nil {
		l.t.Fatal(err)
	}
	conns, err := sockets.System{}.Connections(l.gobgp.PID, l.ipB())
	if err != nil {
		l.t.Fatal(err)
	}
	var out []string
	for _, r := range append(refs, conns...) {
		err := sockets.System{}.With(r, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
			for _, k := range ks {
				out = append(out, fmt.Sprintf("%s %s %s %x", r, k.KeyRef, k.Algorithm, k.Fingerprint))
			}
			return err
		})
		if err != nil {
			l.t.Fatalf("%s keys: %v", r, err)
		}
	}
	slices.Sort(out)
	return out
}
