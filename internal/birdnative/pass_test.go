package birdnative

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/revocation"
)

// TestApplyAndRestore: the pass writes the neighbor's file and BIRD is
// reconfigured once; passes that change nothing configure nothing; a
// configure BIRD refuses puts the file back and status says so (with no
// secret), and the change goes through once BIRD takes it, after the
// backoff, with no pass spinning meanwhile.
func TestApplyAndRestore(t *testing.T) {
	e := newBirdEnv(t, nil, "k1")
	b := e.waitFile("the first pass", func(s string) bool {
		return strings.Contains(s, "send id 1; recv id 101;") && strings.Contains(s, "preferred;")
	})
	if !eventually(10*time.Second, func() bool { return e.fb.count() == 1 }) {
		t.Fatalf("%d configures, want 1", e.fb.count())
	}
	// Passes: idle ones too (a pass with nothing in flight reads nothing).
	passes := func() uint64 { idle, full := e.d.Passes(); return idle + full }
	n0 := passes()
	if !eventually(20*time.Second, func() bool { return passes() >= n0+3 }) {
		t.Fatal("no three passes in 20 s")
	}
	if n := e.fb.count(); n != 1 {
		t.Fatalf("passes that changed nothing configured BIRD (%d)", n)
	}

	e.fb.setRefuse(true)
	e.setKeys("k1", "k2")
	if !eventually(20*time.Second, func() bool { return warned(e.status(), "birdc configure failed") }) {
		t.Fatalf("status warnings %q, want the refused configure", e.status().Warnings)
	}
	if after, _ := os.ReadFile(e.file); string(after) != b {
		t.Fatalf("a refused configure left the new file:\n%s", after)
	}
	for _, s := range []string{"a secret of key k1", "a secret of key k2"} {
		if warned(e.status(), hex.EncodeToString([]byte(s))) {
			t.Fatal("a secret in status")
		}
	}
	// Within the backoff the plans wait: the daemon does not spin.
	n0 = passes()
	time.Sleep(500 * time.Millisecond)
	if n := passes(); n > n0+3 {
		t.Errorf("%d passes in 500 ms within the backoff, want the poll's", n-n0)
	}
	e.fb.setRefuse(false)
	e.waitFile("the change once BIRD takes it", func(s string) bool { return strings.Contains(s, "send id 2; recv id 102;") })
	if !eventually(20*time.Second, func() bool { return !warned(e.status(), "configure") }) {
		t.Errorf("warnings after the configure went through: %q", e.status().Warnings)
	}
}

// TestRevoke: a revoke records the key, writes it back to the key source
// and has the file rewritten without it before it returns; the record is
// the daemon's one (revocations.json), which a restart reads.
func TestRevoke(t *testing.T) {
	e := newBirdEnv(t, nil, "k1", "k2")
	e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })
	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: "core", Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.SourceRevoked || len(res.Sockets) != 1 || res.Sockets[0].Socket != "bird "+e.file {
		t.Errorf("revoke result %+v", res)
	}
	if k, _ := os.ReadFile(e.kf); !strings.Contains(string(k), "revoked") {
		t.Errorf("the key source does not mark k1 revoked:\n%s", k)
	}
	if b, _ := os.ReadFile(e.file); strings.Contains(string(b), "send id 1;") || !strings.Contains(string(b), "send id 2;") {
		t.Fatalf("file when the revoke returned:\n%s", b)
	}
	e.stop()
	s, err := revocation.Open(filepath.Join(e.state, revocation.File), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rs := s.List(); len(rs) != 1 || rs[0].Key != "k1" {
		t.Fatalf("recorded %+v", rs)
	}
}

// TestRevokeScoped: a revoke scoped to one peer takes the key out of that
// neighbor's file however the request spells the peer's address (a
// mapped IPv4 address is the same peer), leaves the key source alone,
// and is recorded once, naming the peer as it is; a scope naming another
// VRF of that address, which no binding covers, and a peer that is no
// address are refused, and nothing is recorded.
func TestRevokeScoped(t *testing.T) {
	for _, spelling := range []string{"192.0.2.2", "::ffff:192.0.2.2"} {
		t.Run(spelling, func(t *testing.T) {
			e := newBirdEnv(t, nil, "k1", "k2")
			e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })
			ctx := context.Background()
			if _, err := e.d.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: "k1", Peer: "bogus"}); !errors.Is(err, control.ErrInvalid) {
				t.Errorf("a revoke for peer bogus: %v, want control.ErrInvalid", err)
			}
			if _, err := e.d.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: "k1", Peer: spelling, VRF: "red"}); !errors.Is(err, control.ErrNotFound) {
				t.Errorf("a revoke for the peer in vrf red, which no binding covers: %v, want control.ErrNotFound", err)
			}
			if b, _ := os.ReadFile(e.file); !strings.Contains(string(b), "send id 1;") {
				t.Fatalf("a revoke scoped to vrf red took k1 from the default VRF's neighbor:\n%s", b)
			}
			if _, err := e.d.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: "k1", Peer: spelling}); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(e.file); strings.Contains(string(b), "send id 1;") || !strings.Contains(string(b), "send id 2;") {
				t.Fatalf("file after the scoped revoke:\n%s", b)
			}
			if k, _ := os.ReadFile(e.kf); strings.Contains(string(k), "revoked") {
				t.Error("a peer-scoped revoke wrote the key source")
			}
			b, err := os.ReadFile(filepath.Join(e.state, revocation.File))
			if err != nil {
				t.Fatal(err)
			}
			var rs []map[string]string
			if err := json.Unmarshal(b, &rs); err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0]["peer"] != "192.0.2.2" {
				t.Errorf("record %s, want the one scoped revocation, naming its peer", b)
			}
		})
	}
}

// TestRevokeElapsedCountsTheWait: a revoke's Elapsed is from the request
// to the last socket clean, the executor's application included (here a
// `bird -p` that takes 300 ms): the guest's bird-native-revoke line once
// measured only the work after a wait.
func TestRevokeElapsedCountsTheWait(t *testing.T) {
	const busy = 300 * time.Millisecond
	slow := filepath.Join(t.TempDir(), "bird")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nsleep 0.3\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	e := newBirdEnv(t, func(o *ExecOptions) { o.Bird = slow }, "k1", "k2")
	e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })
	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: "core", Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Duration(res.Elapsed); el < busy {
		t.Errorf("Elapsed %v, want at least the %v its application took", el, busy)
	}
}

// TestPlan: aoctl plan shows each neighbor's list as the next pass leaves
// it, and writes nothing.
func TestPlan(t *testing.T) {
	e := newBirdEnvIdle(t, nil, "k1", "k2")
	rep, err := e.d.Plan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The policy's preferred key: the same send start and no end, so the
	// greater name.
	want := "bird 192.0.2.2 " + e.file + ": write [1/101, 2/102 preferred]"
	if len(rep.Plan) != 1 || rep.Plan[0] != want {
		t.Fatalf("plan %q, want %q", rep.Plan, want)
	}
	if _, err := os.Stat(e.file); !errors.Is(err, os.ErrNotExist) || e.fb.count() != 0 {
		t.Fatalf("plan wrote the file (%v) or configured BIRD (%d)", err, e.fb.count())
	}
}

// TestStatusActiveOpensKeyed: BIRD keys its own connects, so the status
// of a peer BIRD may connect to carries no "not passive, nothing keys its
// active opens" warning once the control server completes it.
func TestStatusActiveOpensKeyed(t *testing.T) {
	e := newBirdEnv(t, nil, "k1")
	e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })
	rep := e.status()
	if len(rep.Peers) != 1 {
		t.Fatalf("status %+v, want one peer", rep.Peers)
	}
	rep.Complete()
	if w := rep.Peers[0].Warnings; slices.Contains(w, control.WarnNotPassive) {
		t.Errorf("peer warnings %q: BIRD keys its own active opens", w)
	}
	if !rep.Peers[0].ActiveOpensKeyed {
		t.Error("active_opens_keyed false for a peer BIRD keys itself")
	}
	if rep.Speaker != "bird" || len(rep.Chains) != 1 {
		t.Errorf("speaker %q, chains %+v", rep.Speaker, rep.Chains)
	}
}

// TestStatusSessionStateVocabulary: the session state in status (and so
// in the fleet document) is the one vocabulary every speaker's status
// uses (bgp.SessionState's names), not BIRD's own capitalisation: aoctl
// fleet status compared "Established" from a native BIRD router with
// "established" and flagged the link (the chaos run found it).
func TestStatusSessionStateVocabulary(t *testing.T) {
	e := newBirdEnv(t, func(o *ExecOptions) { o.Poll = 10 * time.Millisecond }, "k1")
	e.waitFile("the first pass", func(s string) bool { return strings.Contains(s, "send id 1;") })
	for _, tc := range []struct{ bird, want string }{
		{"Established", "established"}, {"Active", "active"}, {"Connect", "connect"}, {"Idle", "idle"},
		{"OpenSent", "opensent"}, {"OpenConfirm", "openconfirm"}, {"Down", "unknown"},
	} {
		e.fb.setProtocols("2002-Name       Proto      Table      State  Since         Info\n" +
			"1002-peer_a     BGP        ---        up     06:10:01.123  " + tc.bird + "\n" +
			"1006-  BGP state:          " + tc.bird + "\n" +
			"       Neighbor address: 192.0.2.2\n0000 \n")
		n := e.fb.shows()
		if !eventually(10*time.Second, func() bool { return e.fb.shows() >= n+2 }) {
			t.Fatal("BIRD's protocols not read")
		}
		e.d.Kick()
		var got string
		if !eventually(10*time.Second, func() bool { got = e.status().Peers[0].SessionState; return got == tc.want }) {
			t.Errorf("BIRD's %q: session_state %q, want %q", tc.bird, got, tc.want)
		}
	}
}
