package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/revocation"
	"github.com/aokeyd/aokeyd/tcpao"
)

// otherAddr is a second neighbor bound to the same chain as peerAddr; it
// has listener keys but no session in these tests.
var (
	otherAddr = netip.MustParseAddr("192.0.2.3")
	otherHost = netip.PrefixFrom(otherAddr, 32)
)

const twoPeerPolicy = `version: 1
safety:
  switch_timeout: 5m
  on_revoke_only_key: keep
key_chains:
  - name: core
peers:
  - neighbor: 192.0.2.2
    key_chain: core
  - neighbor: 192.0.2.3
    key_chain: core
`

// keysFor lists the keys s holds for peer as sorted "send/recv" pairs.
func keysFor(t testing.TB, s tcpao.Socket, peer netip.Prefix) []string {
	t.Helper()
	ks, err := s.Keys(tcpao.KeyFilter{})
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	if err != nil {
		t.Fatalf("Keys: %v", err)
	}
	var out []string
	for _, k := range ks {
		if k.Peer == peer {
			out = append(out, fmt.Sprintf("%d/%d", k.SendID, k.RecvID))
		}
	}
	slices.Sort(out)
	return out
}

func (e *env) waitPeerKeys(name string, peer netip.Prefix, want []string) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("listener keys of %s %v (%s)", peer, want, name), func() bool {
		return slices.Equal(keysFor(e.t, e.lis, peer), want)
	})
}

// fullPass makes the daemon run a full pass and waits for it: k (which
// the other peer's listener entry must hold) is taken off it first, and
// its return proves the pass ran.
func (e *env) fullPass(k testKey) {
	e.t.Helper()
	if err := e.lis.DelKey(tcpao.DelKey{KeyRef: k.mkt().Key(otherHost, 0).KeyRef}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.d.RefreshKeys(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.waitFor("a full pass to restore the sentinel key", func() bool {
		return slices.Contains(keysFor(e.t, e.lis, otherHost), k.ids())
	})
}

// A revoke scoped to one peer touches that peer's session and listener
// entry only, never writes to the shared key source, and stays scoped
// across passes and a restart.
func TestRevokePeerScoped(t *testing.T) { synctest.Test(t, testRevokePeerScoped) }

func testRevokePeerScoped(t *testing.T) {
	_, k1, k2, _ := testKeys()
	file := filepath.Join(t.TempDir(), "revocations.json")
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}, policy: twoPeerPolicy, revocationsFile: file})
	e.waitPeerKeys("start", peerHost, ids(k1, k2))
	e.waitPeerKeys("start", otherHost, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)

	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name, Peer: peerAddr.String()})
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	for _, s := range res.Sockets {
		if s.Peer != peerAddr.String() && s.Peer != peerHost.String() {
			t.Errorf("peer-scoped revoke touched %+v", s)
		}
	}
	if len(res.Sockets) != 2 {
		t.Errorf("revoke outcomes %+v, want the session and its listener entry", res.Sockets)
	}
	if res.SourceRevoked || len(e.src.revokeCalls()) != 0 {
		t.Errorf("a peer-scoped revoke wrote to the shared key source: result %t, calls %v", res.SourceRevoked, e.src.revokeCalls())
	}
	if res.Failed() {
		t.Errorf("result %+v counts as failed", res)
	}
	check := func(when string) {
		t.Helper()
		if got := keysFor(t, e.lis, peerHost); !slices.Equal(got, ids(k2)) {
			t.Errorf("%s: listener keys of %s %v, want %v", when, peerAddr, got, ids(k2))
		}
		if got := keysFor(t, e.lis, otherHost); !slices.Equal(got, ids(k1, k2)) {
			t.Errorf("%s: listener keys of the unrelated %s %v, want %v", when, otherAddr, got, ids(k1, k2))
		}
		if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k2)) {
			t.Errorf("%s: session keys %v, want %v", when, got, ids(k2))
		}
	}
	check("after revoke")
	e.fullPass(k2)
	check("after a full pass")

	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var recs []revocation.Revocation
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatalf("revocations file: %v", err)
	}
	if len(recs) != 1 || recs[0].Peer != peerKey {
		t.Errorf("revocations file %s, want one record scoped to %s", b, peerAddr)
	}

	e.stop()
	release := e.sp.HoldSync()
	e.start(file)
	release()
	e.fullPass(k2)
	e.waitFor("the restarted daemon to take the session over", func() bool { return e.peerStatus().Rotation.State == "steady" })
	check("after a restart")
}

// A revoke scoped to a peer no binding covers is refused: nothing is
// recorded, no socket or source touched.
func TestRevokeUnknownPeer(t *testing.T) { synctest.Test(t, testRevokeUnknownPeer) }

func testRevokeUnknownPeer(t *testing.T) {
	_, k1, k2, _ := testKeys()
	file := filepath.Join(t.TempDir(), "revocations.json")
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}, policy: twoPeerPolicy, revocationsFile: file})
	e.waitPeerKeys("start", peerHost, ids(k1, k2))
	for _, tc := range []struct {
		name, peer, vrf string
		want            error
	}{
		{"no binding", "192.0.2.99", "", control.ErrNotFound},
		{"other vrf", peerAddr.String(), "blue", control.ErrNotFound},
		{"a name, no interface neighbour bound", "peer-two", "", control.ErrInvalid},
		{"not an address or an interface", "10.0.0.256", "", control.ErrInvalid},
		{"a VRF in the peer", "192.0.2.2 vrf blue", "", control.ErrInvalid},
	} {
		// One bubble, one daemon: the cases are a loop, not subtests.
		res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name, Peer: tc.peer, VRF: tc.vrf})
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.peer) {
			t.Errorf("%s: Revoke: %v, want %v naming %q", tc.name, err, tc.want, tc.peer)
		}
		if len(res.Sockets) != 0 {
			t.Errorf("%s: refused revoke touched %+v", tc.name, res.Sockets)
		}
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused revokes wrote a record (stat: %v)", err)
	}
	if c := e.src.revokeCalls(); len(c) != 0 {
		t.Errorf("refused revokes wrote to the source: %v", c)
	}
	e.fullPass(k2)
	if got := keysFor(t, e.lis, peerHost); !slices.Equal(got, ids(k1, k2)) {
		t.Errorf("listener keys of %s %v, want both", peerAddr, got)
	}
}

// A peer-scoped revoke leaves a prefix binding's listener key, which other
// peers of the prefix share, and says so in the result.
func TestRevokePeerScopedPrefixBinding(t *testing.T) {
	synctest.Test(t, testRevokePeerScopedPrefixBinding)
}

func testRevokePeerScopedPrefixBinding(t *testing.T) {
	_, k1, k2, _ := testKeys()
	pol := strings.Replace(fmt.Sprintf(basePolicy, "keep"), "neighbor: 192.0.2.2", "neighbor: 192.0.2.0/24", 1)
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}, policy: pol, revocationsFile: filepath.Join(t.TempDir(), "revocations.json")})
	prefix := netip.MustParsePrefix("192.0.2.0/24")
	e.waitPeerKeys("start", prefix, ids(k1, k2))
	res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name, Peer: peerAddr.String()})
	if err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if len(res.Sockets) != 1 || res.Sockets[0].Action != control.ActionKept || !strings.Contains(res.Sockets[0].Error, "other peers") {
		t.Errorf("outcomes %+v, want the prefix's listener key kept, with the reason", res.Sockets)
	}
	if !res.Failed() {
		t.Errorf("a revoke that left the key on the listener does not count as failed: %+v", res)
	}
	if got := keysFor(t, e.lis, prefix); !slices.Equal(got, ids(k1, k2)) {
		t.Errorf("listener keys of %s %v, want both kept", prefix, got)
	}
	if c := e.src.revokeCalls(); len(c) != 0 {
		t.Errorf("source written: %v", c)
	}
}

// A record written before a peer was one field holds a scoped
// revocation's peer as its writer spelled it (the BIRD driver kept the
// request's text, a mapped address among them) and its VRF in a field of
// its own: it is in force for that peer, and that peer alone, at start.
func TestScopedRevocationOfAnOlderRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, k2, _ := testKeys()
		file := filepath.Join(t.TempDir(), "revocations.json")
		rec := `[{"chain":"core","key":"k1","peer":"::ffff:` + peerAddr.String() + `","at":"2026-11-30T12:00:00Z"},` +
			`{"chain":"core","key":"k2","peer":"` + otherAddr.String() + `","vrf":"red","at":"2026-11-30T12:00:00Z"}]`
		if err := os.WriteFile(file, []byte(rec), 0o600); err != nil {
			t.Fatal(err)
		}
		e := newEnv(t, envOptions{keys: []testKey{k1, k2}, policy: twoPeerPolicy, revocationsFile: file})
		e.waitPeerKeys("start: k1 revoked for the peer", peerHost, ids(k2))
		e.waitPeerKeys("start: k2 revoked for the other peer in vrf red only", otherHost, ids(k1, k2))
	})
}
