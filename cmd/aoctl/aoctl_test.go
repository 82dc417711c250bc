package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	goldenfile "github.com/aokeyd/aokeyd/internal/golden"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	goldenfile.Check(t, filepath.Join("testdata", name), got)
}

type result struct {
	code           int
	stdout, stderr string
}

// runAoctl runs one aoctl invocation against socket with the test clock.
func runAoctl(t *testing.T, socket string, args ...string) result {
	t.Helper()
	return runAoctlProbe(t, socket, nil, args...)
}

// runAoctlProbe is runAoctl with probe as the local kernel's TCP-AO probe.
func runAoctlProbe(t *testing.T, socket string, probe func() error, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, now: func() time.Time { return testNow },
		getenv: func(k string) string {
			if k == "AOKEYD_SOCKET" {
				return socket
			}
			return ""
		}, probe: probe}
	code := a.run(context.Background(), args)
	return result{code, out.String(), errb.String()}
}

// startDaemon serves the test daemon on a fresh control socket.
func startDaemon(t *testing.T) (string, *testDaemon) {
	t.Helper()
	d := newTestDaemon(t)
	return serveBackend(t, d), d
}

func serveBackend(t *testing.T, b control.Backend) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "control.sock")
	l, err := control.Listen(sock, control.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := control.NewServer(control.ServerOptions{Backend: b})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return sock
}

func TestCommandsAgainstDaemon(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"status", []string{"status"}, exitOK, "status.golden"},
		{"status brief", []string{"status", "--brief"}, exitOK, "status-brief.golden"},
		{"status one peer", []string{"status", "192.0.2.3"}, exitOK, "status-peer.golden"},
		{"status json", []string{"--json", "status", "192.0.2.2"}, exitOK, "status-peer.json.golden"},
		{"status unknown peer", []string{"status", "198.51.100.1"}, exitError, ""},
		{"plan", []string{"plan"}, exitOK, "plan-daemon.golden"},
		{"rotate", []string{"rotate", "--all"}, exitOK, "rotate.golden"},
		{"rotate unknown", []string{"rotate", "198.51.100.1"}, exitError, ""},
		{"revoke", []string{"revoke", "core/2026-11"}, exitOK, "revoke.golden"},
		{"revoke json", []string{"revoke", "core/2026-11", "--peer", "192.0.2.3", "--json"}, exitOK, "revoke.json.golden"},
		{"revoke unknown", []string{"revoke", "core/1999-01"}, exitError, ""},
		{"adopt prefix", []string{"adopt", "192.0.2.2", "--prefix", "192.0.2.0/24"}, exitOK, "adopt-prefix.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sock, _ := startDaemon(t)
			r := runAoctl(t, sock, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.code, r.stdout, r.stderr)
			}
			if tt.golden != "" {
				golden(t, tt.golden, r.stdout)
			} else if !strings.Contains(r.stderr, "not found") {
				t.Errorf("stderr %q does not say what was not found", r.stderr)
			}
		})
	}
}

// TestRotateThenStatus checks that a rotation reached the in-memory kernel:
// the peer that sent with the old key now has the new one as RNext.
func TestRotateThenStatus(t *testing.T) {
	sock, _ := startDaemon(t)
	before := runAoctl(t, sock, "status", "192.0.2.3")
	r := runAoctl(t, sock, "rotate", "192.0.2.3")
	if r.code != exitOK || !strings.Contains(r.stdout, "yes") {
		t.Fatalf("rotate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	after := runAoctl(t, sock, "status", "192.0.2.3")
	if before.stdout == after.stdout {
		t.Fatal("status unchanged by the rotation")
	}
	golden(t, "status-after-rotate.golden", after.stdout)
	again := runAoctl(t, sock, "rotate", "192.0.2.2")
	if !strings.Contains(again.stdout, "already sending with 2026-11") {
		t.Errorf("rotate of an up-to-date peer:\n%s", again.stdout)
	}
}

// recordDegraded answers every revoke as done, with its record degraded.
type recordDegraded struct{ *testDaemon }

func (d recordDegraded) Revoke(ctx context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	res, err := d.testDaemon.Revoke(ctx, req)
	res.RecordError = "revocations backup /var/lib/aokeyd/revocations.json.bak: input/output error; putting the record back failed too"
	return res, err
}

// A revoke that is done but left its record degraded (the backup behind)
// says so and exits 1: the operator has a disk to check.
func TestRevokeRecordDegraded(t *testing.T) {
	sock := serveBackend(t, recordDegraded{newTestDaemon(t)})
	r := runAoctl(t, sock, "revoke", "core/2026-10")
	if r.code != exitError || !strings.Contains(r.stdout, "Record: in force, but revocations backup /var/lib/aokeyd/revocations.json.bak") {
		t.Errorf("revoke with a degraded record: exit %d, want %d and the record error\n%s%s", r.code, exitError, r.stdout, r.stderr)
	}
}

// TestRevokeThenStatus checks that the revoked key left the kernel's
// sockets: status no longer lists it, and the sessions kept working.
func TestRevokeThenStatus(t *testing.T) {
	sock, d := startDaemon(t)
	if r := runAoctl(t, sock, "revoke", "core/2026-10"); r.code != exitOK {
		t.Fatalf("revoke: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, p := range d.peers {
		if err := d.net.Exchange(p.accepted, p.remote, 2); err != nil {
			t.Errorf("%s: session broken by the revoke: %v", peerName(p.binding), err)
		}
	}
	js := runAoctl(t, sock, "status", "--json")
	var rep control.StatusReport
	if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, js.stdout)
	}
	for _, p := range rep.Peers {
		if len(p.Keys) != 1 || p.Keys[0].Name != "2026-11" || !p.Keys[0].Current {
			t.Errorf("%s after revoking 2026-10: keys %+v, want 2026-11 alone and current", p.Peer, p.Keys)
		}
	}
	golden(t, "status-after-revoke.golden", runAoctl(t, sock, "status").stdout)
}

func TestPlanOffline(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"table", []string{"plan", "--config", "testdata/aokeyd.yaml", "--at", "2026-10-15"}, exitOK, "plan-offline.golden"},
		{"json", []string{"plan", "--config", "testdata/aokeyd.yaml", "--at", "2026-10-15", "--json"}, exitOK, "plan-offline.json.golden"},
		{"rotation schedule", []string{"plan", "--config", "testdata/rotation.yaml", "--at", "2026-01-15"}, exitOK, "plan-rotation.golden"},
		{"demo config", []string{"plan", "--config", "../../internal/config/testdata/aokeyd.yaml", "--at", "2029-12-01"}, exitOK, "plan-demo.golden"},
		{"bad config", []string{"plan", "--config", "testdata/bad.yaml"}, exitInvalid, ""},
		{"missing config", []string{"plan", "--config", "testdata/none.yaml"}, exitInvalid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No daemon: the socket does not exist.
			r := runAoctl(t, filepath.Join(t.TempDir(), "none.sock"), tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tt.code, r.stdout, r.stderr)
			}
			if tt.golden != "" {
				golden(t, tt.golden, r.stdout)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"ok", []string{"validate", "testdata/aokeyd.yaml", "--at", "2026-11-01"}, exitOK, "validate-ok.golden"},
		{"bad config", []string{"validate", "testdata/bad.yaml"}, exitInvalid, "validate-bad.golden"},
		{"bad metrics.per_key", []string{"validate", "testdata/bad-metrics.yaml"}, exitInvalid, "validate-bad-metrics.golden"},
		{"policy versus keys", []string{"validate", "testdata/bad-keys.yaml", "--at", "2026-11-01"}, exitInvalid, "validate-bad-keys.golden"},
		{"json", []string{"validate", "--json", "testdata/bad-keys.yaml", "--at", "2026-11-01"}, exitInvalid, "validate-bad-keys.json.golden"},
		{"config only", []string{"validate", "testdata/bad-keys.yaml", "--no-keys"}, exitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAoctl(t, "", tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tt.code, r.stdout, r.stderr)
			}
			if tt.golden != "" {
				golden(t, tt.golden, r.stdout)
			}
		})
	}
}

// TestKernelWithoutTCPAO: on a kernel built without CONFIG_TCP_AO, where
// aokeyd refuses to start, validate fails and status (which cannot reach
// the daemon) says why, in the daemon's own words.
func TestKernelWithoutTCPAO(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.sock")
	noAO := func() error { return fmt.Errorf("%w (%w)", tcpao.ErrNoKernelSupport, syscall.ENOPROTOOPT) }
	hasAO := func() error { return nil }
	// A probe a seccomp filter denied: no answer, so validate fails (as
	// aokeyd would not start); status, which explains an unreachable
	// daemon, does not guess from aoctl's own confinement.
	denied := func() error {
		return &tcpao.ProbeError{Err: os.NewSyscallError("getsockopt(TCP_AO_INFO)", syscall.EPERM)}
	}
	tests := []struct {
		name    string
		probe   func() error
		args    []string
		code    int
		mention bool   // the output names CONFIG_TCP_AO
		want    string // and this
	}{
		{"validate, probe denied", denied, []string{"validate", "testdata/aokeyd.yaml", "--at", "2026-11-01"}, exitInvalid, false, "seccomp"},
		{"validate json, probe denied", denied, []string{"validate", "--json", "testdata/aokeyd.yaml", "--at", "2026-11-01"}, exitInvalid, false, "seccomp"},
		{"validate for another machine, probe denied", denied, []string{"validate", "--no-kernel", "testdata/aokeyd.yaml", "--at", "2026-11-01"}, exitOK, false, ""},
		{"status, probe denied", denied, []string{"--socket", none, "status"}, exitUnreachable, false, ""},
		{"validate", noAO, []string{"validate", "testdata/aokeyd.yaml", "--at", "2026-11-01"}, exitInvalid, true, ""},
		{"validate json", noAO, []string{"validate", "--json", "testdata/aokeyd.yaml", "--at", "2026-11-01"}, exitInvalid, true, ""},
		{"validate for another machine", noAO, []string{"validate", "--no-kernel", "testdata/aokeyd.yaml", "--at", "2026-11-01"}, exitOK, false, ""},
		{"validate on a TCP-AO kernel", hasAO, []string{"validate", "testdata/aokeyd.yaml", "--at", "2026-11-01"}, exitOK, false, ""},
		{"status, daemon not running", noAO, []string{"--socket", none, "status"}, exitUnreachable, true, ""},
		{"status on a TCP-AO kernel", hasAO, []string{"--socket", none, "status"}, exitUnreachable, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAoctlProbe(t, "", tt.probe, tt.args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tt.code, r.stdout, r.stderr)
			}
			out := r.stdout + r.stderr
			if got := strings.Contains(out, "CONFIG_TCP_AO") && strings.Contains(out, "Kernel requirements"); got != tt.mention {
				t.Errorf("output names CONFIG_TCP_AO and the README section: %v, want %v\n%s", got, tt.mention, out)
			}
			if tt.want != "" && !strings.Contains(out, tt.want) {
				t.Errorf("output lacks %q\n%s", tt.want, out)
			}
			if tt.want == "" && strings.Contains(out, "seccomp") {
				t.Errorf("output blames a seccomp filter\n%s", out)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	none := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		name   string
		socket string
		args   []string
		code   int
		stderr string
	}{
		{"no command", none, nil, exitUsage, "Usage: aoctl"},
		{"unknown command", none, []string{"frobnicate"}, exitUsage, "unknown command"},
		{"unknown flag", none, []string{"status", "--colour"}, exitUsage, "flag provided but not defined"},
		{"rotate without peer", none, []string{"rotate"}, exitUsage, "name one PEER"},
		{"rotate peer and all", none, []string{"rotate", "192.0.2.2", "--all"}, exitUsage, "exclude each other"},
		{"revoke without chain", none, []string{"revoke", "2026-10"}, exitUsage, "CHAIN/KEY"},
		{"validate without file", none, []string{"validate"}, exitUsage, "CONFIG"},
		{"plan at without config", none, []string{"plan", "--at", "2026-11-01"}, exitUsage, "--at needs --config"},
		{"status unreachable", none, []string{"status"}, exitUnreachable, "daemon unreachable"},
		{"plan unreachable", none, []string{"plan"}, exitUnreachable, "aoctl plan --config"},
		{"rotate unreachable", none, []string{"rotate", "--all"}, exitUnreachable, "is aokeyd running?"},
		{"revoke unreachable", none, []string{"revoke", "core/x"}, exitUnreachable, "daemon unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runAoctl(t, tt.socket, tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
				t.Errorf("exit %d stderr %q; want exit %d and %q", r.code, r.stderr, tt.code, tt.stderr)
			}
		})
	}
}

// refusingBackend stands for a daemon whose SO_PEERCRED check refused us:
// it answers every request with control.ErrRefused.
type refusingBackend struct{ control.Backend }

func (refusingBackend) Status(context.Context, string) (control.StatusReport, error) {
	return control.StatusReport{}, control.ErrRefused
}

func TestRefusedExitCode(t *testing.T) {
	sock := serveBackend(t, refusingBackend{})
	r := runAoctl(t, sock, "status")
	if r.code != exitRefused || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("exit %d stderr %q; want %d and permission denied", r.code, r.stderr, exitRefused)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}} {
		r := runAoctl(t, "", args...)
		if r.code != exitOK {
			t.Errorf("%v: exit %d", args, r.code)
		}
		golden(t, "help.golden", r.stdout)
	}
	for _, c := range commands() {
		r := runAoctl(t, "", c.name, "--help")
		if r.code != exitOK || !strings.Contains(r.stdout, "Usage: aoctl "+c.name) || !strings.Contains(r.stdout, "-json") {
			t.Errorf("%s --help: exit %d\n%s", c.name, r.code, r.stdout)
		}
	}
}

// TestJSONHasNoSecrets checks that no JSON answer carries key bytes: the
// test keys' base64 must not appear anywhere.
func TestJSONHasNoSecrets(t *testing.T) {
	sock, _ := startDaemon(t)
	secrets := []string{"YW9rZXlkLXRlc3Qtc2VjcmV0LWFscGhhLTdRdlg=", "YW9rZXlkLXRlc3Qtc2VjcmV0LWJyYXZvLTRLbVo=",
		"aokeyd-test-secret"}
	for _, args := range [][]string{{"status", "--json"}, {"plan", "--json"}, {"revoke", "--json", "core/2026-11"},
		{"plan", "--json", "--config", "testdata/aokeyd.yaml", "--at", "2026-10-15"}} {
		r := runAoctl(t, sock, args...)
		for _, s := range secrets {
			if strings.Contains(r.stdout+r.stderr, s) {
				t.Errorf("%v output contains key material %q", args, s)
			}
		}
	}
}

// TestStatusHeldBack: keys and chains the key source lost are listed in
// the status table, next to their warnings.
func TestStatusHeldBack(t *testing.T) {
	rep := control.StatusReport{
		GeneratedAt: testNow,
		KeySource: control.KeySourceStatus{Name: "file /etc/aokeyd/keys.yaml", LastSync: testNow.Add(-time.Second), Age: control.Duration(time.Second),
			Held: []control.HeldKey{
				{Chain: "core", Key: "2026-11", Reason: control.HeldKeyRejected, Field: "secret", Source: "file /etc/aokeyd/keys.yaml:14", LastGood: true},
				{Chain: "edge", Reason: control.HeldChainMissing},
			}},
		Warnings: []string{"key core/2026-11 is invalid in the key source (file /etc/aokeyd/keys.yaml:14: field secret: want 1..80 bytes): held back, its last good version is kept"},
	}
	var b strings.Builder
	renderStatus(&b, rep, testNow, false, false)
	golden(t, "status-held.golden", b.String())
}

// TestStatusNamesSpeaker: the status says whose view of the sessions it
// shows (gobgpd's, FRR bgpd's).
func TestStatusNamesSpeaker(t *testing.T) {
	rep := control.StatusReport{GeneratedAt: testNow, Speaker: "frr bgpd /run/frr/bgpd.vty",
		KeySource: control.KeySourceStatus{Name: "file /etc/aokeyd/keys.yaml", LastSync: testNow}}
	var b strings.Builder
	renderStatus(&b, rep, testNow, false, false)
	if !strings.Contains(b.String(), "Speaker: frr bgpd /run/frr/bgpd.vty (sessions as it reports them)\n") {
		t.Fatalf("status does not name the speaker:\n%s", b.String())
	}
}

// TestValidateKernelAlgorithms: on a kernel that refuses an algorithm a
// chain uses (the in-memory kernel told to refuse it, as a kernel without
// its hash does), validate fails with a problem naming the key, the field,
// the algorithm and the kernel; on one that accepts them all it passes.
func TestValidateKernelAlgorithms(t *testing.T) {
	probe := func(refused ...tcpao.Algorithm) func() (map[tcpao.Algorithm]error, string) {
		return func() (map[tcpao.Algorithm]error, string) {
			n := tcpaotest.NewNet(tcpaotest.WithoutAlgorithms(refused...))
			return tcpao.ProbeAlgorithmsOn(func() (tcpao.Socket, func(), error) {
				s, err := n.Socket(netip.MustParseAddr("192.0.2.1"))
				return s, func() { _ = s.Close() }, err
			}, netip.MustParsePrefix("127.0.0.1/32")), "Linux 7.2.0-test"
		}
	}
	run := func(algs func() (map[tcpao.Algorithm]error, string)) result {
		var out, errb bytes.Buffer
		a := &app{stdout: &out, stderr: &errb, now: func() time.Time { return testNow },
			getenv: func(string) string { return "" }, probe: func() error { return nil }, algorithms: algs}
		code := a.run(context.Background(), []string{"validate", "testdata/aokeyd.yaml", "--at", "2026-11-01"})
		return result{code, out.String(), errb.String()}
	}
	if r := run(probe()); r.code != exitOK {
		t.Fatalf("every algorithm accepted: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := run(probe(tcpao.HMACSHA256))
	if r.code != exitInvalid {
		t.Fatalf("hmac(sha256) refused: exit %d, want %d\n%s%s", r.code, exitInvalid, r.stdout, r.stderr)
	}
	for _, w := range []string{"testdata/keys.yaml:6:9: chains.core.keys[0].algorithm: ", "hmac(sha256)", "Linux 7.2.0-test", "refuses it"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("the problem does not name %q:\n%s", w, r.stdout)
		}
	}
}

// What an operator reads in birdc show protocols all and FRR's show bgp
// neighbors, and Junos' show security keychain: status names the keys in
// use, the neighbor's AS, description, flaps and last down, NEXT as a time;
// --keys is the key chain view.
func TestStatusViews(t *testing.T) {
	sock, _ := startDaemon(t)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		golden string
	}{
		{"keys", []string{"status", "--keys"}, exitOK, "status-keys.golden"},
		{"keys json", []string{"status", "--keys", "--json"}, exitOK, "status-keys.json.golden"},
		{"keys with peer", []string{"status", "--keys", "192.0.2.2"}, exitUsage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runAoctl(t, sock, tc.args...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tc.code, r.stdout, r.stderr)
			}
			if tc.golden != "" {
				golden(t, tc.golden, r.stdout)
			}
		})
	}
	r := runAoctl(t, sock, "status", "192.0.2.2")
	for _, want := range []string{
		`Neighbor: AS 65002, "core-2 lon1", 1 flap, last down 2026-11-01T10:29:00Z (1h31m ago): Hold timer expired`,
		"Keys in use: sending with core/2026-11 (Current_key, send id 11); the peer sends with core/2026-11 (RNext_key, recv id 111)",
		"Next: watch at 2026-11-01T12:00:25Z (in 25s)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status 192.0.2.2 lacks %q:\n%s", want, r.stdout)
		}
	}
}
