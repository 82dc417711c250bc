package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
)

// md5Watch, once armed (the migration seen done, no TCP-MD5 key left),
// reads gobgpd's listener's TCP-MD5 keys through sock_diag and tries a
// SYN signed with the right TCP-MD5 password from B's address, again and
// again until finish: a key seen or a SYN taken is the password back.
type md5Watch struct {
	armed      atomic.Bool
	stop, done chan struct{}
	mu         sync.Mutex
	rounds     int
	seen       []string // what was seen of the password, each time
}

func (l *testbed) watchMD5() *md5Watch {
	w := &md5Watch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			if !w.armed.Load() {
				continue
			}
			var seen []string
			if d, err := sockets.OpenDiag(l.gobgp.PID); err == nil {
				d.MD5 = true
				if ls, err := d.Listeners(); err == nil {
					for _, s := range ls {
						if s.Local.Port() == 179 && len(s.MD5) > 0 {
							seen = append(seen, fmt.Sprintf("%d TCP-MD5 key(s) on listener %s", len(s.MD5), s.Local))
						}
					}
				}
				d.Close()
			}
			if lab.SYNTaken(l.b, l.ipB(), l.ipA(), 179, labMD5) {
				seen = append(seen, "a SYN with the TCP-MD5 password taken")
			}
			w.mu.Lock()
			w.rounds++
			w.seen = append(w.seen, seen...)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *md5Watch) finish() (rounds int, seen []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds, w.seen
}

// migrationStep is the peer's migration step in status ("" when none).
func (l *testbed) migrationStep() (string, control.PeerStatus) {
	st, err := l.tryStatus()
	if err != nil || st.Migration == nil {
		return "", st
	}
	return st.Migration.Step, st
}

// restartMigration is (c) on a lab that starts on TCP-MD5: `aoctl
// migrate` and crashes at its steps. switching false: the switch time an
// hour ahead, a crash in prepared, after which BIRD switches to TCP-AO
// (its session restarts with the rendering of aoctl peer-config
// --migrate) and the migration completes; then a crash in done, and one
// in done with the migrations record and its backup deleted while aokeyd
// is down. switching true: the switch time 5 s ahead, a crash once the
// step is switching (BIRD still on TCP-MD5), after which BIRD switches.
func restartMigration(t *testing.T, tl *restartTally, switching bool) {
	l, _ := md5Start(t)
	link := l.watchLink()
	md5w := l.watchMD5()
	// The watches end and are counted however the lab ends (a failed
	// wait too): what they saw is in the printed line.
	defer func() {
		rounds, seen := md5w.finish()
		_, _, probes, accepted := link.finish()
		if len(seen) > 0 {
			t.Errorf("the TCP-MD5 password came back after the migration was done (%d times in %d rounds), first: %s", len(seen), rounds, strings.Join(seen[:min(len(seen), 4)], "; "))
		}
		if accepted > 0 || probes < 100 {
			t.Errorf("%d of %d SYN probes (unsigned, wrong TCP-MD5) from B's address taken (want 0 of at least 100)", accepted, probes)
		}
		t.Logf("%d SYN probes from B's address (unsigned, wrong TCP-MD5), %d taken; %d rounds of the TCP-MD5 watch after done, the password seen %d times",
			probes, accepted, rounds, len(seen))
		tl.mu.Lock()
		tl.unsigned += accepted
		tl.md5Readded += len(seen)
		tl.mu.Unlock()
	}()
	k1 := key{i: 1}
	at := time.Now().Add(time.Hour)
	if switching {
		at = time.Now().Add(5 * time.Second)
	}
	l.migrateCmd(l.ipB().String(), "--at", at.UTC().Format(time.RFC3339Nano), "--bound", "2h")
	step := "prepared"
	if switching {
		step = "switching"
	}
	// The step, with TCP-AO beside TCP-MD5 on the listener.
	bothOnListener := func(what string) {
		lab.Eventually(t, 60*time.Second, what, func() (bool, string) {
			s, st := l.migrationStep()
			lk, _ := l.readListener()
			lis, _ := l.gobgpMD5()
			return s == step && hasKey(lk, k1) && len(lis) == 1, fmt.Sprintf("step %q auth %q, listener TCP-AO %s, TCP-MD5 %d", s, st.Auth, listenerIDs(lk), len(lis))
		})
	}
	bothOnListener("the migration " + step + ", TCP-AO beside TCP-MD5 on gobgpd's listener")
	name := "c_" + step
	l.crashCase(tl, name, k1, nil, func(before bird.Status) error {
		// Still the step, both kinds on the listener, after the restart.
		bothOnListener(name + ": after the restart still " + step + " with both kinds on the listener")
		cfg := l.birdConfig(nil)
		cfg.Auth = l.peerConfigBirdMigrate(at)
		if err := l.bird.Configure(cfg); err != nil {
			return err
		}
		return l.backWithAO(before)
	})
	lab.Eventually(t, 60*time.Second, "the migration done, no TCP-MD5 key left", func() (bool, string) {
		s, st := l.migrationStep()
		lis, sess := l.gobgpMD5()
		return s == "done" && len(lis) == 0 && len(sess) == 0, fmt.Sprintf("step %q auth %q, TCP-MD5 listener %d session %d", s, st.Auth, len(lis), len(sess))
	})
	md5w.armed.Store(true)
	if !switching {
		l.crashCase(tl, "c_done", k1, nil, l.birdRestart)
		state := filepath.Join(l.dir, "state")
		l.crashCase(tl, "c_done_record_deleted", k1, func() {
			if err := os.Remove(filepath.Join(state, "migrations.json")); err != nil {
				t.Errorf("deleting the migrations record: %v", err)
			}
			if err := os.Remove(filepath.Join(state, "migrations.json.bak")); err != nil && !os.IsNotExist(err) {
				t.Errorf("deleting the migrations record's backup: %v", err)
			}
		}, l.birdRestart)
		// The record lost, the kernel is the truth (issue 47): the session
		// runs TCP-AO with verified segments, so the peer is migrated
		// (done, recorded again) and status warns that its chain still
		// holds md5.
		err := lab.Within(60*time.Second, "status: migration done, TCP-AO, a warning that the migrated peer's chain holds md5", func() (bool, string) {
			s, st := l.migrationStep()
			return s == "done" && st.Auth == control.AuthAO && hasWords(st.Warnings, "migrated", "md5"),
				fmt.Sprintf("step %q auth %q warnings %q", s, st.Auth, st.Warnings)
		})
		if err != nil {
			b, _ := os.ReadFile(l.aokeydLog())
			t.Errorf("the migration was not recovered from the kernel after its record was lost (aokeyd's log has %d lines of the recovery): %v",
				strings.Count(string(b), "TCP-MD5 peer found running TCP-AO with no migration recorded"), err)
		}
	} else {
		// The done step's crashes are the other lab's; this one watches
		// the completed migration a little while (the password must stay
		// off).
		lab.Eventually(t, 60*time.Second, "two rounds of the TCP-MD5 watch", func() (bool, string) {
			md5w.mu.Lock()
			defer md5w.mu.Unlock()
			return md5w.rounds >= 2, fmt.Sprintf("%d rounds", md5w.rounds)
		})
	}
	if st := l.status(); st.Auth != control.AuthAO {
		t.Errorf("status auth %q after the migration and the restarts, want %q", st.Auth, control.AuthAO)
	}
}
