package birdnative

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// fakeBird answers BIRD's control protocol: configure succeeds, or fails
// while refuse is set; it counts configures.
type fakeBird struct {
	mu         sync.Mutex
	refuse     bool
	configures int
	protocols  string   // the reply to show protocols all (BIRD's reply lines)
	commands   []string // every other command, in order
}

func (f *fakeBird) serve(t *testing.T, sock string) {
	testkit.ServeUnix(t, sock, func(c net.Conn) {
		_, _ = c.Write([]byte("0001 BIRD 2.17 ready.\n"))
		cmd, _ := bufio.NewReader(c).ReadString('\n')
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case strings.HasPrefix(cmd, "configure") && f.refuse:
			f.configures++
			_, _ = c.Write([]byte("8002 /etc/bird.conf:3:1 syntax error\n"))
		case strings.HasPrefix(cmd, "configure"):
			f.configures++
			_, _ = c.Write([]byte("0002-Reading configuration\n0003 Reconfigured\n"))
		case strings.HasPrefix(cmd, "show protocols") && f.protocols != "":
			_, _ = c.Write([]byte(f.protocols))
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

const testPolicy = `version: 1
key_chains:
  - name: core
peers:
  - neighbor: 192.0.2.2
    key_chain: core
`

func keyFile(t *testing.T, path string, names ...string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("chains:\n  core:\n    peers: [192.0.2.2]\n    keys:\n")
	for i, n := range names {
		fmt.Fprintf(&b, "      - {name: %s, send_id: %d, recv_id: %d, algorithm: hmac(sha256), secret_hex: %s}\n", n, i+1, i+101, hex.EncodeToString([]byte("a secret of key "+n)))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// newTestDriver is a Driver over a key file, a fake BIRD control socket
// and a bird -p that accepts everything (true).
func newTestDriver(t *testing.T, names ...string) (*Driver, *fakeBird, string) {
	t.Helper()
	return newTestDriverWith(t, nil, names...)
}

// newTestDriverWith is newTestDriver with opts changed by edit first.
func newTestDriverWith(t *testing.T, edit func(*Options), names ...string) (*Driver, *fakeBird, string) {
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
	o := Options{Keys: keystore.NewCache(src, keystore.CacheOptions{}), Source: src, Policy: pol, Dir: filepath.Join(dir, "keys"),
		Control: sock, Bird: "true", PID: func() (int, error) { return 0, fmt.Errorf("no BIRD process in this test: %w", sockets.ErrNoProcess) },
		RevocationsFile: filepath.Join(dir, "revocations.json")}
	if edit != nil {
		edit(&o)
	}
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	d.refresh(context.Background())
	return d, fb, kf
}

// TestDriverApplyAndRestore: a pass writes the neighbor's file and
// reconfigures BIRD once; an unchanged pass configures nothing; a
// configure BIRD refuses puts the file back and says so in status, and
// the change goes through once BIRD takes it.
func TestDriverApplyAndRestore(t *testing.T) {
	d, fb, kf := newTestDriver(t, "k1")
	ctx := context.Background()
	file := filepath.Join(d.o.Dir, "192.0.2.2.conf")
	d.pass(ctx, nil, true)
	b, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(b), "send id 1; recv id 101;") || !strings.Contains(string(b), "preferred;") {
		t.Fatalf("file after the first pass (%v):\n%s", err, b)
	}
	if fb.count() != 1 {
		t.Fatalf("%d configures, want 1", fb.count())
	}
	d.pass(ctx, nil, true)
	if fb.count() != 1 {
		t.Fatalf("an unchanged pass configured BIRD (%d)", fb.count())
	}

	fb.mu.Lock()
	fb.refuse = true
	fb.mu.Unlock()
	keyFile(t, kf, "k1", "k2")
	d.refresh(ctx)
	d.pass(ctx, nil, true)
	after, _ := os.ReadFile(file)
	if string(after) != string(b) {
		t.Fatalf("a refused configure left the new file:\n%s", after)
	}
	rep, err := d.Status(ctx, "")
	if err != nil || len(rep.Warnings) == 0 || !strings.Contains(rep.Warnings[0], "birdc configure failed") {
		t.Fatalf("status warnings %q (%v), want the refused configure", rep.Warnings, err)
	}
	for _, w := range rep.Warnings {
		if strings.Contains(w, hex.EncodeToString([]byte("a secret of key k1"))) {
			t.Fatal("a secret in status")
		}
	}
	fb.mu.Lock()
	fb.refuse = false
	fb.mu.Unlock()
	d.retryAt = time.Time{} // the backoff's wait, skipped
	d.pass(ctx, nil, true)
	b, _ = os.ReadFile(file)
	if !strings.Contains(string(b), "send id 2; recv id 102;") {
		t.Fatalf("the change did not go through once BIRD took it:\n%s", b)
	}
	if rep, _ := d.Status(ctx, ""); len(rep.Warnings) != 0 {
		t.Errorf("warnings after the configure went through: %q", rep.Warnings)
	}
}

// TestDriverRevoke: a revoke records the key, writes it back to the key
// source and rewrites the file without it at once; the record survives a
// new Driver.
func TestDriverRevoke(t *testing.T) {
	d, _, kf := newTestDriver(t, "k1", "k2")
	ctx, stop := runDriver(t, d)
	res, err := d.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.SourceRevoked || len(res.Sockets) != 1 {
		t.Errorf("revoke result %+v", res)
	}
	if k, _ := os.ReadFile(kf); !strings.Contains(string(k), "revoked") {
		t.Errorf("the key source does not mark k1 revoked:\n%s", k)
	}
	b, _ := os.ReadFile(filepath.Join(d.o.Dir, "192.0.2.2.conf"))
	if strings.Contains(string(b), "send id 1;") || !strings.Contains(string(b), "send id 2;") {
		t.Fatalf("file after the revoke:\n%s", b)
	}
	stop()
	s, err := revocation.Open(d.o.RevocationsFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs := s.List(); len(rs) != 1 || rs[0].Key != "k1" {
		t.Fatalf("recorded %+v", rs)
	}
}

// TestDriverPlan: aoctl plan shows each neighbor's file as the next pass
// writes it, and writes nothing.
func TestDriverPlan(t *testing.T) {
	d, fb, _ := newTestDriver(t, "k1", "k2")
	rep, err := d.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := "bird 192.0.2.2 " + filepath.Join(d.o.Dir, "192.0.2.2.conf") + ": write [1/101, 2/102 preferred]" // the policy's preferred key: the same send start and no end, so the greater name
	if len(rep.Plan) != 1 || rep.Plan[0] != want {
		t.Fatalf("plan %q, want %q", rep.Plan, want)
	}
	if _, err := os.Stat(filepath.Join(d.o.Dir, "192.0.2.2.conf")); !errors.Is(err, os.ErrNotExist) || fb.count() != 0 {
		t.Fatalf("plan wrote the file (%v) or configured BIRD (%d)", err, fb.count())
	}
}

// TestDriverStatusActiveOpensKeyed: BIRD keys its own connects, so the
// status of a peer BIRD may connect to carries no "not passive, nothing
// keys its active opens" warning once the control server completes it.
func TestDriverStatusActiveOpensKeyed(t *testing.T) {
	d, _, _ := newTestDriver(t, "k1")
	ctx := context.Background()
	d.pass(ctx, nil, true)
	rep, err := d.Status(ctx, "")
	if err != nil || len(rep.Peers) != 1 {
		t.Fatalf("status %+v (%v), want one peer", rep.Peers, err)
	}
	rep.Complete()
	if w := rep.Peers[0].Warnings; slices.Contains(w, control.WarnNotPassive) {
		t.Errorf("peer warnings %q: BIRD keys its own active opens", w)
	}
	if !rep.Peers[0].ActiveOpensKeyed {
		t.Error("active_opens_keyed false for a peer BIRD keys itself")
	}
}

// TestDriverMendsNoListeningSocket: BIRD disables a protocol whose
// listener it could not re-bind ("No listening socket"; a duplicate of the
// old listener, as aokeyd's own reads hold, keeps it listening); the pass
// enables it again, at most once in mendEvery, and leaves a protocol the
// operator disabled alone.
func TestDriverMendsNoListeningSocket(t *testing.T) {
	d, fb, _ := newTestDriver(t, "k1")
	ctx := context.Background()
	proto := func(lastErr string) string {
		r := "2002-Name       Proto      Table      State  Since         Info\n" +
			"1002-peer_a     BGP        ---        down   06:10:01.123  \n" +
			"1006-  BGP state:          Down\n" +
			"       Neighbor address: 192.0.2.2\n"
		if lastErr != "" {
			r += "       Last error:       " + lastErr + "\n"
		}
		return r + "0000 \n"
	}
	enables := func() int {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		n := 0
		for _, c := range fb.commands {
			if c == "enable peer_a" {
				n++
			}
		}
		return n
	}
	fb.mu.Lock()
	fb.protocols = proto("") // disabled by the operator: no error
	fb.mu.Unlock()
	d.pass(ctx, nil, true)
	if n := enables(); n != 0 {
		t.Fatalf("a protocol the operator disabled was enabled (%d)", n)
	}
	fb.mu.Lock()
	fb.protocols = proto("No listening socket")
	fb.mu.Unlock()
	d.pass(ctx, nil, true)
	d.pass(ctx, nil, true)
	if n := enables(); n != 1 {
		t.Fatalf("%d enables of the protocol BIRD disabled for want of its listener over two passes, want 1", n)
	}
}

// runDriver runs d until stop or the test's end, whichever comes first;
// stop returns once Run has.
func runDriver(t *testing.T, d *Driver) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return ctx, stop
}
