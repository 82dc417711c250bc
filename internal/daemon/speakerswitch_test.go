package daemon_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
)

// TestRevocationSurvivesSpeakerSwitch: a revocation is aokeyd's, not its
// speaker's. A key revoked under speaker.type bird stays revoked when the
// router switches to gobgpd and back to bird, and one revoked under
// gobgpd stays revoked under bird. The first revoke is made as every
// aokeyd before the BIRD driver shared the daemon's record wired it (its
// own bird-revocations.json beside revocations.json): an upgrade loses
// none of those either.
func TestRevocationSurvivesSpeakerSwitch(t *testing.T) {
	state := t.TempDir()

	// speaker.type bird, as an older aokeyd ran it: k1 revoked.
	withBird(t, state, filepath.Join(state, "bird-revocations.json"), func(d *daemon.Daemon, conf string) {
		if _, err := d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: "k1"}); err != nil {
			t.Fatalf("revoke under bird: %v", err)
		}
		if b := waitConf(t, conf, func(s string) bool { return !strings.Contains(s, "send id 20;") }); strings.Contains(b, "send id 20;") {
			t.Fatalf("BIRD's file still holds k1 after its revoke:\n%s", b)
		}
	})

	// speaker.type gobgpd: k1 is never installed; k2 revoked for the peer.
	synctest.Test(t, func(t *testing.T) {
		k0, k1, k2, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k0, k1, k2}, revocationsFile: filepath.Join(state, "revocations.json")})
		e.waitKeys("listener under gobgpd, k1 revoked under bird", e.lis, ids(k0, k2))
		if _, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k2.name, Peer: peerAddr.String()}); err != nil {
			t.Fatalf("revoke under gobgpd: %v", err)
		}
		e.waitKeys("listener under gobgpd, k2 revoked for the peer", e.lis, ids(k0))
		e.stop()
	})

	// speaker.type bird again: neither key comes back.
	// The executor writes the first pass's file after status shows the
	// peer: the file is read until it holds k0 alone, which the first
	// step's file (k0, k2) does not. Every file written meanwhile (a new
	// inode: the executor renames a new file into place) must be k0 alone.
	first, err := os.Stat(filepath.Join(state, "bird-keys", "192.0.2.2.conf"))
	if err != nil {
		t.Fatal(err)
	}
	withBird(t, state, filepath.Join(state, "revocations.json"), func(d *daemon.Daemon, conf string) {
		k0Alone := func(s string) bool {
			return strings.Contains(s, "send id 10;") && !strings.Contains(s, "send id 20;") && !strings.Contains(s, "send id 30;")
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			fi, errStat := os.Stat(conf)
			b, errRead := os.ReadFile(conf)
			if errStat != nil || errRead != nil {
				t.Fatalf("BIRD's file after the switch back: %v, %v", errStat, errRead)
			}
			if k0Alone(string(b)) {
				break
			}
			if !os.SameFile(first, fi) || time.Now().After(deadline) {
				t.Fatalf("BIRD's file after the switch back, want k0 alone (k1 revoked under bird, k2 under gobgpd):\n%s", b)
			}
		}
	})
}

// withBird runs aokeyd for BIRD (speaker.type bird: a Daemon serving
// birdnative's Executor) over the state directory's key source, the test policy and a fake BIRD, with its
// revocations recorded at file, while body runs; conf is the test peer's
// include file. The key source cannot be written: a revoke lives in the
// revocation record alone.
func withBird(t *testing.T, state, file string, body func(d *daemon.Daemon, conf string)) {
	t.Helper()
	k0, k1, k2, _ := testKeys()
	src := &fakeSource{}
	src.setKeys(k0.mkt(), k1.mkt(), k2.mkt())
	defer src.close()
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	defer cache.Close()
	ctl := filepath.Join(t.TempDir(), "bird.ctl")
	serveFakeBird(t, ctl)
	keys := filepath.Join(state, "bird-keys")
	ex, err := birdnative.Open(birdnative.ExecOptions{Dir: keys, Control: ctl, Bird: "true", Poll: 10 * time.Millisecond,
		PID: func() (int, error) { return 0, fmt.Errorf("no BIRD process in this test: %w", sockets.ErrNoProcess) }})
	if err != nil {
		t.Fatalf("BIRD executor: %v", err)
	}
	d, err := daemon.New(daemon.Options{Keys: cache, Policy: parsePolicy(t, fmt.Sprintf(basePolicy, "keep")), Executor: ex,
		RevocationsFile: file, Refresh: time.Hour, Resync: time.Hour})
	if err != nil {
		t.Fatalf("aokeyd for BIRD: %v", err)
	}
	if _, err := cache.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	// Stopped before the state directory's cleanup, a failed body too.
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("aokeyd for BIRD: %v", err)
		}
	}()
	// The include file may be an earlier aokeyd's: the first pass is
	// done when status shows the peer.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if rep, err := d.Status(ctx, ""); err == nil && len(rep.Peers) == 1 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the first pass for BIRD: status %+v, %v", rep, err)
		}
	}
	body(d, filepath.Join(keys, "192.0.2.2.conf"))
}

// waitConf waits up to 10 s for the include file at path to satisfy ok,
// and returns it as it is then.
func waitConf(t *testing.T, path string, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a loaded machine's
	for {
		b, _ := os.ReadFile(path)
		if ok(string(b)) || time.Now().After(deadline) {
			return string(b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveFakeBird answers BIRD's control protocol at sock as far as the
// BIRD driver asks: every configure succeeds, every other command has an
// empty answer.
func serveFakeBird(t *testing.T, sock string) {
	t.Helper()
	testkit.ServeUnix(t, sock, func(c net.Conn) {
		_, _ = c.Write([]byte("0001 BIRD 2.17 ready.\n"))
		cmd, _ := bufio.NewReader(c).ReadString('\n')
		if strings.HasPrefix(cmd, "configure") {
			_, _ = c.Write([]byte("0002-Reading configuration\n0003 Reconfigured\n"))
			return
		}
		_, _ = c.Write([]byte("0000 \n"))
	})
}
