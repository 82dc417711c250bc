package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// peerConfigBird runs `aoctl peer-config B --for bird --with-secrets` on
// A's config, as B's operator would, and returns the rendered key block.
// Nothing may be refused (exit status 0).
func (l *testbed) peerConfigBird(at time.Time) string {
	l.t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(lab.MustBin(l.t, "aoctl"), "peer-config", l.ipB().String(), "--for", "bird",
		"--config", filepath.Join(l.dir, "aokeyd.yaml"), "--local", l.ipA().String(), "--with-secrets",
		"--at", at.UTC().Format(time.RFC3339Nano))
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		l.t.Fatalf("aoctl peer-config --for bird: %v\n%s", err, errb.String())
	}
	return out.String()
}

// TestBirdFromPeerConfig: BIRD's TCP-AO configuration is what `aoctl
// peer-config --for bird` renders from A's config, and nothing else: the
// session comes up with it, and a roll driven by A's key lifetimes
// completes without a flap while BIRD's operator only follows the
// rendering (re-rendered every second, `birdc configure` when it changes,
// as the rendering's boundary instructions say).
func TestBirdFromPeerConfig(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	now := time.Now()
	k1 := key{i: 1, sendStart: now.Add(-time.Hour), acceptStart: now.Add(-time.Hour)}
	l := newLabWith(t, []key{k1}, nil, labOptions{})
	s := l.waitEstablished(60 * time.Second)
	conf, err := os.ReadFile(filepath.Join(l.bird.Dir, "bird.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"rendered by aoctl peer-config --for bird", "key { send id 101; recv id 1; secret hex:"} {
		if !strings.Contains(string(conf), w) {
			t.Fatalf("bird.conf lacks %q:\n%s", w, conf)
		}
	}
	if st, _ := l.bird.Protocol(); st.CurrentKey != int(k1.recvID()) || st.PktGood == 0 {
		t.Fatalf("BIRD sends with key %d (want %d) and verified %d segments", st.CurrentKey, k1.recvID(), st.PktGood)
	}

	// The roll: k1 sends until sw and is accepted 10s longer; k2 is
	// accepted at once and sends from sw.
	sw := time.Now().Add(12 * time.Second)
	old := k1
	old.sendEnd, old.acceptEnd = sw, sw.Add(10*time.Second)
	k2 := key{i: 2, sendStart: sw, acceptStart: time.Now().Add(-time.Second)}
	l.writeKeys([]key{old, k2})
	last, reconfigs := "", 0
	done := false
	for deadline := sw.Add(60 * time.Second); !done && time.Now().Before(deadline); time.Sleep(time.Second) {
		auth := l.peerConfigBird(time.Now())
		if auth != last {
			cfg := l.birdConfig(nil)
			cfg.Auth = auth // rendered at the top of this round
			if err := l.bird.Configure(cfg); err != nil {
				t.Fatalf("birdc configure with the rendering: %v\n%s", err, auth)
			}
			reconfigs++
			t.Logf("BIRD reconfigured from aoctl peer-config (%d):\n%s", reconfigs, keyLines(auth))
			last = auth
		}
		st := l.status()
		bs, _ := l.bird.Protocol()
		aCur := false
		for _, k := range st.Keys {
			aCur = aCur || k.SendID == k2.sendID() && k.Current && k.PktGood > 0
		}
		done = aCur && bs.CurrentKey == int(k2.recvID()) && !strings.Contains(auth, "recv id 1;")
	}
	if !done {
		st := l.status()
		bs, _ := l.bird.Protocol()
		t.Fatalf("roll to k2 did not complete: A keys %v (%s, %s), BIRD current %d", lab.KeyList(st.Keys), st.Rotation.State, st.Rotation.LastAbort, bs.CurrentKey)
	}
	l.checkNoFlap(s, "after the roll BIRD followed from aoctl peer-config")
	bs, _ := l.bird.Protocol()
	fmt.Printf("peer-config-bird: reconfigs=%d bird_current=%d pkt_bad=%d\n", reconfigs, bs.CurrentKey, bs.PktBad)
}

// birdFromA is BIRD's configuration with the key block `aoctl
// peer-config --for bird` renders from A's config now.
func (l *testbed) birdFromA() bird.Config {
	l.t.Helper()
	cfg := l.birdConfig(nil)
	cfg.Auth = l.peerConfigBird(time.Now())
	return cfg
}

// keyLines are the key lines of a rendering, for the log.
func keyLines(auth string) string {
	var out []string
	for _, line := range strings.Split(auth, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "key {") {
			i := strings.Index(line, "secret ")
			j := strings.Index(line, "; algorithm")
			if i >= 0 && j > i {
				line = line[:i] + "secret (redacted)" + line[j:]
			}
			out = append(out, strings.TrimSpace(line))
		}
	}
	return strings.Join(out, "\n")
}
