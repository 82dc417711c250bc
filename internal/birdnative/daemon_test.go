package birdnative

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// These tests run BIRD's executor beneath the daemon's pass, as aokeyd
// runs it (speaker.type bird): a Daemon with Options.Executor over a key
// file, a fake BIRD control socket and a `bird -p` that takes everything
// (true). The pass polls every second, so each waits for what it needs
// with a bound.

// fakeBird answers BIRD's control protocol: configure succeeds, or fails
// while refuse is set; it counts configures and protocol reads.
type fakeBird struct {
	mu         sync.Mutex
	refuse     bool
	configures int
	showProtos int
	protocols  string   // the reply to show protocols all (BIRD's reply lines)
	commands   []string // every other command, in order
	// onConfigure, when set, is called at each configure (under mu).
	onConfigure func()
	// showGate, when set, holds each show protocols until it is closed;
	// held counts the reads it held.
	showGate chan struct{}
	held     int
	// configureGate, when set, holds each configure until it is closed;
	// showsAsked counts the show protocols asked, held or not.
	configureGate chan struct{}
	showsAsked    int
}

func (f *fakeBird) serve(t testing.TB, sock string) {
	testkit.ServeUnix(t, sock, func(c net.Conn) {
		_, _ = c.Write([]byte("0001 BIRD 2.17 ready.\n"))
		cmd, _ := bufio.NewReader(c).ReadString('\n')
		f.mu.Lock()
		gate, cgate := f.showGate, f.configureGate
		if strings.HasPrefix(cmd, "show protocols") {
			f.showsAsked++
			if gate != nil {
				f.held++
			}
		}
		f.mu.Unlock()
		if gate != nil && strings.HasPrefix(cmd, "show protocols") {
			<-gate
		}
		if cgate != nil && strings.HasPrefix(cmd, "configure") {
			<-cgate
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case strings.HasPrefix(cmd, "configure") && f.refuse:
			f.configures++
			_, _ = c.Write([]byte("8002 /etc/bird.conf:3:1 syntax error\n"))
		case strings.HasPrefix(cmd, "configure"):
			f.configures++
			if f.onConfigure != nil {
				f.onConfigure()
			}
			_, _ = c.Write([]byte("0002-Reading configuration\n0003 Reconfigured\n"))
		case strings.HasPrefix(cmd, "show protocols"):
			f.showProtos++
			if f.protocols == "" {
				_, _ = c.Write([]byte("0000 \n"))
			} else {
				_, _ = c.Write([]byte(f.protocols))
			}
		default:
			if !strings.HasPrefix(cmd, "show") {
				f.commands = append(f.commands, strings.TrimSpace(cmd))
			}
			_, _ = c.Write([]byte("0000 \n"))
		}
	})
}

func (f *fakeBird) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.configures
}

// shows is how many times BIRD's protocols were read.
func (f *fakeBird) shows() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.showProtos
}

func (f *fakeBird) setRefuse(v bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse = v
}

func (f *fakeBird) setProtocols(reply string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.protocols = reply
}

const testPolicy = `version: 1
key_chains:
  - name: core
peers:
  - neighbor: 192.0.2.2
    key_chain: core
`

// keyFile writes the key source: chain core, a key per name, the i-th
// with send ID i+1 and receive ID i+101, or the IDs a name's "@N" gives
// ("k2@2": k2 with send ID 2, receive ID 102).
func keyFile(t *testing.T, path string, names ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("chains:\n  core:\n    peers: [192.0.2.2]\n    keys:\n")
	for i, n := range names {
		id := i + 1
		if name, at, ok := strings.Cut(n, "@"); ok {
			n = name
			if _, err := fmt.Sscan(at, &id); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&b, "      - {name: %s, send_id: %d, recv_id: %d, algorithm: hmac(sha256), secret_hex: %s}\n", n, id, id+100, hex.EncodeToString([]byte("a secret of key "+n)))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// birdEnv is aokeyd for BIRD in a test: the daemon, its executor, the
// fake BIRD, the key file and the state directory.
type birdEnv struct {
	t     *testing.T
	d     *daemon.Daemon
	ex    *Executor
	fb    *fakeBird
	kf    string
	state string
	dir   string // the keys directory
	file  string // the neighbor's include file
	stop  func() // stops the daemon (once); the test's end does too
}

// newBirdEnv runs aokeyd for BIRD over the keys names (the key file),
// with edit applied to the executor's options first, until stop or the
// test's end.
func newBirdEnv(t *testing.T, edit func(*ExecOptions), names ...string) *birdEnv {
	t.Helper()
	e := newBirdEnvIdle(t, edit, names...)
	e.start()
	return e
}

// newBirdEnvIdle is newBirdEnv's aokeyd not started: its key source read,
// no pass run (start runs them).
func newBirdEnvIdle(t *testing.T, edit func(*ExecOptions), names ...string) *birdEnv {
	t.Helper()
	dir := t.TempDir()
	kf := filepath.Join(dir, "keys.yaml")
	keyFile(t, kf, names...)
	src, err := keystore.NewFile(keystore.FileOptions{Path: kf})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse("policy.yaml", []byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	fb := &fakeBird{}
	sock := filepath.Join(dir, "bird.ctl")
	fb.serve(t, sock)
	o := ExecOptions{Dir: filepath.Join(dir, "keys"), Control: sock, Bird: "true",
		PID: func() (int, error) { return 0, fmt.Errorf("no BIRD process in this test: %w", sockets.ErrNoProcess) }}
	if edit != nil {
		edit(&o)
	}
	ex, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	cache := keystore.NewCache(src, keystore.CacheOptions{})
	t.Cleanup(cache.Close)
	d, err := daemon.New(daemon.Options{Policy: pol, Keys: cache, Source: src, Executor: ex, Refresh: time.Hour, Resync: time.Hour,
		RevocationsFile: filepath.Join(state, "revocations.json"), EarlyRollsFile: filepath.Join(state, "early-rolls.json")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cache.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &birdEnv{t: t, d: d, ex: ex, fb: fb, kf: kf, state: state, dir: o.Dir, file: filepath.Join(o.Dir, "192.0.2.2.conf"), stop: func() {}}
}

// start runs the daemon until stop or the test's end.
func (e *birdEnv) start() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	e.stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
	e.t.Cleanup(e.stop)
}

// eventually waits up to limit for cond, polling; it reports whether
// cond held.
func eventually(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// waitFile waits for the neighbor's include file to satisfy ok and
// returns it.
func (e *birdEnv) waitFile(what string, ok func(string) bool) string {
	e.t.Helper()
	var b []byte
	if !eventually(20*time.Second, func() bool { b, _ = os.ReadFile(e.file); return ok(string(b)) }) {
		e.t.Fatalf("%s: include file\n%s", what, b)
	}
	return string(b)
}

// setKeys rewrites the key file with names and has the daemon read it.
func (e *birdEnv) setKeys(names ...string) {
	e.t.Helper()
	keyFile(e.t, e.kf, names...)
	if err := e.d.RefreshKeys(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// status is the daemon's status, every peer.
func (e *birdEnv) status() control.StatusReport {
	e.t.Helper()
	rep, err := e.d.Status(context.Background(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// warned reports whether a warning of rep, or of one of its peers,
// contains s.
func warned(rep control.StatusReport, s string) bool {
	all := rep.Warnings
	for _, p := range rep.Peers {
		all = append(all, p.Warnings...)
	}
	return strings.Contains(strings.Join(all, "\n"), s)
}
