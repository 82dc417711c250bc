package daemon_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// Issue 47 item 3, "ownership is exact": aokeyd claims, adopts and revokes
// only keys that are exactly its own (or that the operator named).

// otherPeer is a neighbor aokeyd does not manage: no binding covers it.
var otherPeer = netip.MustParsePrefix("198.51.100.9/32")

// keyAs is k's material (secret, algorithm, MAC length, options) under
// the IDs send/recv for peer: what another agent installs when it reuses
// a key of the key source.
func keyAs(k testKey, peer netip.Prefix, send, recv uint8) tcpao.Key {
	m := k.mkt()
	defer m.Zero()
	tk := m.Key(peer, 0)
	tk.SendID, tk.RecvID = send, recv
	return tk
}

func addKey(t *testing.T, s *tcpaotest.Sock, k tcpao.Key) {
	t.Helper()
	defer k.Secret.Zero()
	if err := s.AddKey(k, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestFirstStartClaimsOnlyDesired: with no ownership record yet (a first
// start, or an upgrade), a key is aokeyd's only when its IDs, material and
// peer are those of a key desired on that socket (what rotator.Claimer
// claims). Another agent's key that merely reuses a key source's material
// (for a peer aokeyd does not manage, or under other IDs) is foreign and
// stays through every pass of the first process. On the tree before,
// every key whose material was in the key source was aokeyd's for the
// whole first process, and those keys were deleted at the next pass.
func TestFirstStartClaimsOnlyDesired(t *testing.T) {
	_, k1, _, k3 := testKeys()
	for _, tc := range []struct {
		name    string
		session bool // on the established session, else on the listener
		key     tcpao.Key
		// desired: the key is k3 as aokeyd installs it, desired while the
		// source has k3: claimed, so retired when the source drops k3.
		desired bool
	}{
		{name: "unmanaged peer, a desired key's IDs and material", key: keyAs(k1, otherPeer, k1.send, k1.recv)},
		{name: "managed peer, other IDs, a source key's material", key: keyAs(k1, peerHost, 70, 71)},
		{name: "session: other IDs, a source key's material", session: true, key: keyAs(k1, peerHost, 70, 71)},
		{name: "desired in place (control)", key: keyAs(k3, peerHost, k3.send, k3.recv), desired: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, envOptions{keys: []testKey{k1}})
				e.waitKeys("listener", e.lis, ids(k1))
				e.up(ids(k1), k1)
				s, name, want := e.lis, "listener", ids(k1)
				if tc.session {
					s, name = e.acc, "session"
				}
				ref := tc.key.KeyRef
				addKey(t, s, tc.key)
				// k3 joins the source (every socket's desired state
				// changes, so each is read and planned in full) and
				// leaves it again.
				e.refreshWith(k1, k3)
				for range 5 {
					e.d.Kick()
					e.quiet(time.Second)
				}
				e.refreshWith(k1)
				e.waitFor("k3 gone from the "+name, func() bool { return !slices.Contains(keyIDs(t, s), k3.ids()) })
				for range 5 {
					e.d.Kick()
					e.quiet(time.Second)
				}
				if !tc.desired {
					// Foreign: it stays.
					want = append(want, foreignK(ref.SendID, ref.RecvID))
					slices.Sort(want)
				}
				if got := keyIDs(t, s); !slices.Equal(got, want) {
					t.Errorf("%s keys %v, want %v (the key %s for %s)", name, got, want, foreignK(ref.SendID, ref.RecvID), ref.Peer)
				}
			})
		})
	}
}

// TestAdoptTakesOnlyPeerHostKeys: `aoctl adopt PEER` takes the foreign
// keys of the peer's host prefix only. Another agent's key for a wider
// prefix that covers the peer (192.0.2.0/24, which other neighbors such as
// 192.0.2.3 connect with) stays foreign, listed as left, and is kept
// through the passes after the adopt; --prefix takes it, unless another
// neighbor relies on the prefix (the adopt is then refused and changes
// nothing). On the tree before, adopt took every key whose prefix
// contained the peer and the next pass retired the /24 key, stranding
// 192.0.2.3.
func TestAdoptTakesOnlyPeerHostKeys(t *testing.T) {
	other := netip.MustParseAddr("192.0.2.3")
	for _, tc := range []struct {
		name    string
		prefix  string
		other   bgp.SessionState // 192.0.2.3, unmanaged; StateUnknown: not a neighbor
		adopted []string         // prefix and IDs
		left    []string         // Left: prefix and IDs
		err     string           // the refusal's text, "" for none
		keys    []string         // the listener's keys after
	}{
		{name: "peer only", adopted: []string{"192.0.2.2/32 80/81"}, left: []string{"192.0.2.0/24 90/91"}, keys: []string{"20/21", "90/91"}},
		{name: "prefix named, no other neighbor in it", prefix: "192.0.2.0/24", adopted: []string{"192.0.2.0/24 90/91"},
			left: []string{"192.0.2.2/32 80/81"}, keys: []string{"20/21", "80/81"}},
		{name: "prefix named, another neighbor's session in it", prefix: "192.0.2.0/24", other: bgp.StateEstablished,
			err: "prefix 192.0.2.0/24 is used by other neighbors: 192.0.2.3 (established)", keys: []string{"20/21", "80/81", "90/91"}},
		{name: "prefix named, an unmanaged neighbor in it", prefix: "192.0.2.0/24", other: bgp.StateActive,
			err: "prefix 192.0.2.0/24 is used by other neighbors: 192.0.2.3 (not managed by aokeyd)", keys: []string{"20/21", "80/81", "90/91"}},
		{name: "prefix without the peer", prefix: "198.51.100.0/24", err: "prefix 198.51.100.0/24 does not contain the peer 192.0.2.2",
			keys: []string{"20/21", "80/81", "90/91"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, k1, _, _ := testKeys()
				e := newEnv(t, envOptions{keys: []testKey{k1}})
				e.waitKeys("listener", e.lis, ids(k1))
				if tc.other != bgp.StateUnknown {
					e.sp.Set(bgp.PeerInfo{Neighbor: other, Local: localAddr, State: tc.other, PeerASN: 65003})
				}
				wide := foreignKey(90, 91)
				wide.Peer = netip.MustParsePrefix("192.0.2.0/24")
				addKey(t, e.lis, wide)
				addKey(t, e.lis, foreignKey(80, 81))
				res, err := e.d.Adopt(context.Background(), control.AdoptRequest{Peer: peerAddr.String(), Prefix: tc.prefix})
				switch {
				case tc.err == "" && err != nil:
					t.Fatalf("Adopt: %v", err)
				case tc.err != "" && (err == nil || !errors.Is(err, control.ErrInvalid) || !strings.Contains(err.Error(), tc.err)):
					t.Fatalf("Adopt = %v, want an invalid request saying %q", err, tc.err)
				}
				list := func(ks []control.AdoptedKey) []string {
					out := []string{}
					for _, k := range ks {
						out = append(out, k.Prefix+" "+foreignK(k.SendID, k.RecvID))
					}
					return out
				}
				if tc.err == "" {
					if got := list(res.Adopted); !slices.Equal(got, tc.adopted) {
						t.Errorf("adopted %v, want %v", got, tc.adopted)
					}
					if got := list(res.Left); !slices.Equal(got, tc.left) {
						t.Errorf("left %v, want %v", got, tc.left)
					}
				}
				// What was adopted is aokeyd's and not desired: retired.
				// The rest stays.
				e.waitFor("the adopted keys retired", func() bool { return len(keyIDs(t, e.lis)) <= len(tc.keys) })
				for range 5 {
					e.d.Kick()
					e.quiet(time.Second)
				}
				if got := keyIDs(t, e.lis); !slices.Equal(got, tc.keys) {
					t.Errorf("listener keys %v, want %v", got, tc.keys)
				}
			})
		})
	}
}
