package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// restartCases is the number of crashes TestRestartSafety makes: four
// steps of a roll, two peers-down, four migration steps.
const restartCases = 10

// TestRestartSafety (issue 47): aokeyd is killed with SIGKILL (no
// shutdown path runs: the sockets and the state directory are what a
// crash leaves) and started again with the same state directory
//
//	(a) at each step of a roll (announced, switched, grace, retire), the
//	    key the peer sent with before the roll gone from the key source,
//	    the peer lagging on it until it is given the new key;
//	(b) while the peer is down and its last key has left the key source,
//	    or has ended;
//	(c) at each step of a TCP-MD5 to TCP-AO migration (prepared,
//	    switching, done), and after done with the migrations record
//	    deleted (and its backup) while aokeyd is down.
//
// After each restart, once the new process is past its start-up gate
// (two full passes after its last "holding listener deletes"), gobgpd's
// listener must still hold the key the far end uses (read from the
// kernel every 200 ms from before the kill until the far end is back),
// and the far end restarts its session (birdc restart; birdc enable for
// a peer that was down; BIRD's switch to the TCP-AO rendering of aoctl
// peer-config --migrate in a migration's prepared and switching steps),
// which must come back with TCP-AO: verified segments on both ends.
//
// During (c) an unsigned SYN and a TCP-MD5 SYN with a wrong password are
// tried from B's address every 100 ms (lab.Prober through watchLink),
// continuously from before the migration starts to its last case: across
// every listener write of the migration, the kills and the restarts,
// which this sampling brackets but cannot align with. Once the migration
// was seen done, gobgpd's listener's TCP-MD5 keys are read (sock_diag)
// and a SYN with the right TCP-MD5 password is tried from B's address,
// about every 400 ms (a dropped SYN waits out its 300 ms dial timeout):
// any MD5 key seen or SYN taken is a password put back (md5_readded
// counts the sightings). After the migrations record was deleted, the
// peer must also be recovered from the kernel as migrated (step done,
// status tcp-ao and a warning that its chain still holds md5).
//
// The cases run as four labs side by side (about 2 minutes in the
// emulated guest). Against the daemon before issue 47 (35fe118^) it
// prints reconnect_ok=6 md5_readded>0: the listener loses the key of a
// peer lagging or down, and the password comes back without the record.
//
// It prints "restart-safety: cases=10 reconnect_ok=10
// unsigned_accepted=0 md5_readded=0" and fails on anything else.
func TestRestartSafety(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	var tl restartTally
	t.Run("crashes", func(t *testing.T) {
		t.Run("a_roll_steps", func(t *testing.T) { t.Parallel(); restartRollSteps(t, &tl) })
		t.Run("b_peer_down", func(t *testing.T) { t.Parallel(); restartPeerDown(t, &tl) })
		t.Run("c_migration_prepared_done", func(t *testing.T) { t.Parallel(); restartMigration(t, &tl, false) })
		t.Run("c_migration_switching", func(t *testing.T) { t.Parallel(); restartMigration(t, &tl, true) })
	})
	tl.mu.Lock()
	defer tl.mu.Unlock()
	t.Logf("cases: %s", strings.Join(tl.names, ", "))
	fmt.Printf("restart-safety: cases=%d reconnect_ok=%d unsigned_accepted=%d md5_readded=%d\n", tl.cases, tl.reconnectOK, tl.unsigned, tl.md5Readded)
	if tl.cases != restartCases || tl.reconnectOK != tl.cases || tl.unsigned != 0 || tl.md5Readded != 0 {
		t.Fatalf("restart safety: %d cases (want %d), %d reconnected, %d unsigned SYNs taken, %d TCP-MD5 passwords back",
			tl.cases, restartCases, tl.reconnectOK, tl.unsigned, tl.md5Readded)
	}
}

// restartTally is what the cases found.
type restartTally struct {
	mu                                       sync.Mutex
	cases, reconnectOK, unsigned, md5Readded int
	names                                    []string
}

func (tl *restartTally) add(name string, ok bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.cases++
	if ok {
		tl.reconnectOK++
	}
	tl.names = append(tl.names, fmt.Sprintf("%s=%v", name, ok))
}

// restartArgs are the restarted aokeyd's extra flags: a grace long
// enough to kill it inside (12 s), and a full pass at least every 3 s so
// that the start-up gate's passes come soon.
var restartArgs = []string{"-roll-grace", "12s", "-resync", "3s"}

// crash SIGKILLs aokeyd, runs between (may be nil) while it is down, and
// starts it again with the same state directory (its previous log kept
// as aokeyd.log.<name>), then waits until it is past its start-up gate.
func (l *testbed) crash(name string, between func()) {
	t := l.t
	t.Helper()
	if err := l.aokeyd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = l.aokeyd.Process.Wait()
	kept := l.aokeydLog() + "." + name
	if err := os.Rename(l.aokeydLog(), kept); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			lab.Dump(t, "aokeyd.log."+name+" (tail)", lab.Tail(kept, 60000))
		}
	})
	if between != nil {
		between()
	}
	l.aokeyd = l.startAokeydWith(restartArgs...)
	lab.Eventually(t, 120*time.Second, "the restarted aokeyd past its start-up gate: two full passes after its last hold", func() (bool, string) {
		b, err := os.ReadFile(l.aokeydLog())
		if err != nil {
			return false, err.Error()
		}
		s := string(b)
		held := strings.Count(s, "holding listener deletes")
		if i := strings.LastIndex(s, "holding listener deletes"); i >= 0 {
			s = s[i:]
		}
		n := strings.Count(s, "full reconcile pass")
		return n >= 2, fmt.Sprintf("%d full passes after the last of %d holds", n, held)
	})
}

// readListener is listenerKeys without failing the test (for a
// goroutine's samples).
func (l *testbed) readListener() ([]tcpao.KeyInfo, error) {
	refs, err := sockets.System{}.Listeners(l.gobgp.PID, 179)
	if err != nil {
		return nil, err
	}
	var out []tcpao.KeyInfo
	for _, r := range refs {
		err := sockets.System{}.With(r, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
			out = append(out, ks...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func hasKey(ks []tcpao.KeyInfo, k key) bool {
	return slices.ContainsFunc(ks, func(x tcpao.KeyInfo) bool { return x.SendID == k.sendID() && x.RecvID == k.recvID() })
}

// keyWatch reads gobgpd's listener every 200 ms and counts the reads
// that lack key k.
type keyWatch struct {
	stop, done     chan struct{}
	reads, lacking int
	last           string
}

func (l *testbed) watchKey(k key) *keyWatch {
	w := &keyWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			if ks, err := l.readListener(); err == nil {
				w.reads++
				if !hasKey(ks, k) {
					w.lacking++
					w.last = listenerIDs(ks)
				}
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *keyWatch) finish() (reads, lacking int, last string) {
	close(w.stop)
	<-w.done
	return w.reads, w.lacking, w.last
}

// crashCase is one case: aokeyd crashes and restarts (crash, between
// while it is down), the listener must hold the far end's key want all
// along, and reconnect makes the far end's session restart; the case is
// good when it comes back with TCP-AO. It counts the case in tl.
func (l *testbed) crashCase(tl *restartTally, name string, want key, between func(), reconnect func(before bird.Status) error) {
	t := l.t
	t.Helper()
	w := l.watchKey(want)
	l.crash(name, between)
	if !hasKey(l.listenerKeys(), want) {
		t.Errorf("%s: after the restart gobgpd's listener lacks %s, which the far end uses: %s", name, want.name(), listenerIDs(l.listenerKeys()))
	}
	before, err := l.bird.Protocol()
	if err != nil {
		t.Fatal(err)
	}
	err = reconnect(before)
	reads, lacking, last := w.finish()
	ok := err == nil && lacking == 0 && reads > 0
	if err != nil {
		t.Errorf("%s: the far end's restarted session did not come back with TCP-AO: %v", name, err)
	}
	if lacking > 0 || reads == 0 {
		t.Errorf("%s: gobgpd's listener lacked %s, which the far end uses, in %d of %d reads (last %s)", name, want.name(), lacking, reads, last)
	}
	t.Logf("%s: aokeyd SIGKILLed and restarted; listener lacked %s in %d of %d reads; far end back with TCP-AO: %v", name, want.name(), lacking, reads, err == nil)
	tl.add(name, ok)
}

// birdRestart restarts BIRD's session.
func (l *testbed) birdRestart(before bird.Status) error {
	if _, err := l.bird.Birdc("restart", "peer_a"); err != nil {
		return fmt.Errorf("birdc restart: %w", err)
	}
	return l.backWithAO(before)
}

// backWithAO waits until BIRD's session is up again since before, with
// TCP-AO segments verified on both ends (BIRD's and gobgpd's socket's
// pkt_good, read from the kernel).
func (l *testbed) backWithAO(before bird.Status) error {
	return lab.Within(120*time.Second, "BIRD's session back with TCP-AO", func() (bool, string) {
		st, err := l.bird.Protocol()
		if err != nil {
			return false, err.Error()
		}
		p := l.peerA()
		info, _, aok, aerr := l.sessionAO()
		ok := st.BGPState == "Established" && !bird.SameSince(st.Since, before.Since) && st.CurrentKey >= 0 && st.PktGood > 0 &&
			p.Established() && aok && info.PktGood > 0
		return ok, fmt.Sprintf("BIRD %s since %s (was %s), current %d, pkt_good %d (%s); gobgpd %s, its socket's TCP-AO ok %v pkt_good %d (%v)",
			st.BGPState, st.Since, before.Since, st.CurrentKey, st.PktGood, st.LastError, p.State, aok, info.PktGood, aerr)
	})
}

// restartRollSteps is (a): four rolls k1->k2->...->k5 on one lab, the
// source dropping the key the peer sends with as it gets the next one
// (the peer lags on the dropped key until BIRD is given the next), and a
// crash at one step of each: announced (BIRD still on the dropped key),
// switched (A just made the new key current), grace (A current on the
// new key for 3 s, the old one still on the session), retire (the old
// key just left the session).
func restartRollSteps(t *testing.T, tl *restartTally) {
	cur := key{i: 1, birdPreferred: true}
	l := newLabWith(t, []key{cur}, []key{cur}, labOptions{})
	l.waitEstablished(90 * time.Second)
	for _, step := range []string{"announced", "switched", "grace", "retire"} {
		name := "a_" + step
		next := key{i: cur.i + 1, sendStart: time.Now().Add(-time.Second)}
		l.writeKeys([]key{next}) // cur left the source; BIRD has cur only
		lab.Eventually(t, 60*time.Second, fmt.Sprintf("%s: A announces k%d, B lagging on k%d", name, next.i, cur.i), func() (bool, string) {
			st, err := l.tryStatus()
			return err == nil && st.Rotation.State == "announced", fmt.Sprintf("rotation %+v (%v)", st.Rotation, err)
		})
		if step == "announced" {
			l.crashCase(tl, name, cur, nil, l.birdRestart)
		}
		// The peer catches up: it prefers the new key, so its RNext asks
		// A to send with it.
		depCur, prefNext := cur, next
		depCur.birdPreferred, depCur.birdDeprecated = false, true
		prefNext.birdPreferred = true
		if err := l.bird.Configure(l.birdConfig([]key{depCur, prefNext})); err != nil {
			t.Fatal(err)
		}
		var switched time.Time
		lab.Eventually(t, 60*time.Second, fmt.Sprintf("%s: A sends with k%d", name, next.i), func() (bool, string) {
			st, err := l.tryStatus()
			sends := slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == next.sendID() && k.Current })
			return err == nil && sends, fmt.Sprintf("A keys %s (%s) %v", lab.KeyList(st.Keys), st.Rotation.State, err)
		})
		switched = time.Now()
		if step == "switched" {
			l.crashCase(tl, name, prefNext, nil, l.birdRestart)
		}
		if step == "grace" {
			lab.Eventually(t, 30*time.Second, fmt.Sprintf("%s: 3 s into the grace, k%d still on the session", name, cur.i), func() (bool, string) {
				st, err := l.tryStatus()
				_, ks, _, _ := l.sessionAO()
				ok := err == nil && st.Rotation.State == "grace" && time.Since(switched) >= 3*time.Second && hasKey(ks, cur)
				return ok, fmt.Sprintf("rotation %s, session keys %s", st.Rotation.State, listenerIDs(ks))
			})
			l.crashCase(tl, name, prefNext, nil, l.birdRestart)
		}
		if step == "retire" {
			lab.Eventually(t, 60*time.Second, fmt.Sprintf("%s: k%d retired from the session", name, cur.i), func() (bool, string) {
				_, ks, ok, err := l.sessionAO()
				return ok && len(ks) == 1 && hasKey(ks, next), fmt.Sprintf("session keys %s (%v)", listenerIDs(ks), err)
			})
			l.crashCase(tl, name, prefNext, nil, l.birdRestart)
		}
		// The roll ends: only the new key on A's session and listener,
		// current on both ends; B drops the old key.
		lab.Eventually(t, 90*time.Second, fmt.Sprintf("%s: only k%d left on A, current on both ends", name, next.i), func() (bool, string) {
			_, ks, _, _ := l.sessionAO()
			lk, _ := l.readListener()
			bs, _ := l.bird.Protocol()
			st, _ := l.tryStatus()
			ok := len(ks) == 1 && hasKey(ks, next) && ks[0].IsCurrent && len(lk) == 1 && hasKey(lk, next) && bs.CurrentKey == int(next.recvID())
			return ok, fmt.Sprintf("session %s, listener %s, BIRD current %d, rotation %s", listenerIDs(ks), listenerIDs(lk), bs.CurrentKey, st.Rotation.State)
		})
		if err := l.bird.Configure(l.birdConfig([]key{prefNext})); err != nil {
			t.Fatal(err)
		}
		cur = prefNext
	}
}

// restartPeerDown is (b): BIRD's session goes down (birdc disable), then
// the key it last sent with, k1, leaves A's source ("left": the source
// holds k2 only) or ends ("ended": its lifetimes over, k2 beside it);
// once aokeyd put k2 on the listener it crashes and restarts, and BIRD,
// which has k1 only, comes back (birdc enable) through the listener.
func restartPeerDown(t *testing.T, tl *restartTally) {
	k1 := key{i: 1, birdPreferred: true}
	l := newLabWith(t, []key{k1}, []key{k1}, labOptions{})
	l.waitEstablished(90 * time.Second)
	for _, c := range []struct {
		name string
		keys func() []key
	}{
		{"b_left", func() []key { return []key{{i: 2, sendStart: time.Now().Add(-time.Second)}} }},
		{"b_ended", func() []key {
			ended := k1
			ended.sendEnd, ended.acceptEnd = time.Now().Add(-time.Minute), time.Now().Add(-time.Second)
			return []key{ended, {i: 2, sendStart: time.Now().Add(-time.Second)}}
		}},
	} {
		if _, err := l.bird.Birdc("disable", "peer_a"); err != nil {
			t.Fatal(err)
		}
		lab.Eventually(t, 60*time.Second, c.name+": the session down at both ends", func() (bool, string) {
			st, err := l.tryStatus()
			p := l.peerA()
			return err == nil && st.Rotation.State == "down" && !p.Established(), fmt.Sprintf("rotation %s, gobgpd %s (%v)", st.Rotation.State, p.State, err)
		})
		l.writeKeys(c.keys())
		lab.Eventually(t, 60*time.Second, c.name+": k2 on gobgpd's listener (the new source applied)", func() (bool, string) {
			lk, err := l.readListener()
			return err == nil && hasKey(lk, key{i: 2}), fmt.Sprintf("listener %s (%v)", listenerIDs(lk), err)
		})
		if !hasKey(l.listenerKeys(), k1) {
			t.Errorf("%s: before the crash gobgpd's listener lost k1, which the peer that is down last sent with: %s", c.name, listenerIDs(l.listenerKeys()))
		}
		l.crashCase(tl, c.name, k1, nil, func(before bird.Status) error {
			if _, err := l.bird.Birdc("enable", "peer_a"); err != nil {
				return fmt.Errorf("birdc enable: %w", err)
			}
			return l.backWithAO(before)
		})
		// k1 alone again for the next case.
		l.writeKeys([]key{k1})
		lab.Eventually(t, 90*time.Second, c.name+": back to k1 alone on A", func() (bool, string) {
			_, ks, _, _ := l.sessionAO()
			lk, _ := l.readListener()
			ok := len(ks) == 1 && hasKey(ks, k1) && len(lk) == 1 && hasKey(lk, k1)
			return ok, fmt.Sprintf("session %s, listener %s", listenerIDs(ks), listenerIDs(lk))
		})
	}
}
