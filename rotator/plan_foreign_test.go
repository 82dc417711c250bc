package rotator

import (
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// ownsFingerprints is an Ownership by the material aokeyd installed.
type ownsFingerprints map[tcpao.Fingerprint]bool

// owning returns an Ownership of keys' material (a pointer: Same compares
// it by identity).
func owning(keys ...tcpao.Key) *ownsFingerprints {
	o := ownsFingerprints{}
	for _, k := range keys {
		o[k.Secret.Fingerprint()] = true
	}
	return &o
}

func (o *ownsFingerprints) Owns(k tcpao.KeyInfo) bool { return (*o)[k.Fingerprint] }

// TestPlanForeign: a key aokeyd did not install (Desired.Owner does not
// own it) is never deleted or replaced: not as stale, not revoked, not
// approved for replacement; a desired key whose IDs clash with one is
// blocked, saying so; without an Owner every key is aokeyd's, as before.
func TestPlanForeign(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	f := mkKey(peerA, 9, 9, "an operator's key")
	fa := mkKey(peerA, 1, 1, "an operator's key under a's IDs")
	cases := []struct {
		name string
		sock func() *testSock
		d    Desired
		want []string
	}{{
		name: "listener: a foreign key is kept",
		sock: func() *testSock {
			s := newListener()
			setup(s.AddKey(a, tcpao.AddOptions{}))
			setup(s.AddKey(f, tcpao.AddOptions{}))
			return s
		},
		d: Desired{Kind: Listening, Keys: []DesiredKey{dk(b)}, Owner: owning(a, b)},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"del send=1 recv=1 peer=192.0.2.1/32 async (stale)",
			"kept send=9 recv=9 peer=192.0.2.1/32 (foreign)",
		},
	}, {
		name: "listener: without an owner it is stale, as before",
		sock: func() *testSock { s := newListener(); setup(s.AddKey(f, tcpao.AddOptions{})); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(b)}},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"del send=9 recv=9 peer=192.0.2.1/32 async (stale)",
		},
	}, {
		name: "listener: a revoke or an approval of aokeyd's names no foreign key",
		sock: func() *testSock { s := newListener(); setup(s.AddKey(fa, tcpao.AddOptions{})); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(b)}, Revoked: revokedOf(a), Replace: []tcpao.KeyRef{a.KeyRef}, Owner: owning(a, b)},
		want: []string{
			"add send=2 recv=2 peer=192.0.2.1/32 alg=hmac(sha256) maclen=12 (new)",
			"kept send=1 recv=1 peer=192.0.2.1/32 (foreign)",
		},
	}, {
		name: "listener: a desired key whose IDs clash with a foreign key is blocked",
		sock: func() *testSock { s := newListener(); setup(s.AddKey(fa, tcpao.AddOptions{})); return s },
		d:    Desired{Kind: Listening, Keys: []DesiredKey{dk(a)}, Replace: []tcpao.KeyRef{a.KeyRef}, Owner: owning(a)},
		want: []string{"blocked send=1 recv=1 peer=192.0.2.1/32 (foreign-clash)"},
	}, {
		name: "established: a foreign key the peer never used is kept",
		sock: func() *testSock { s := newEstablished(a); setup(s.AddKey(f, tcpao.AddOptions{})); return s },
		d:    Desired{Kind: Established, Keys: []DesiredKey{dk(a)}, WantCurrent: ID(1), WantRNext: ID(1), Owner: owning(a)},
		want: []string{"kept send=9 recv=9 peer=192.0.2.1/32 (foreign)"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.sock()
			sp := PlanSocket(c.d, observe(t, s))
			got := opLines(sp)
			if !slices.Equal(got, c.want) {
				t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
			if _, err := Apply(s, sp.Ops); err != nil {
				t.Fatalf("apply: %v", err)
			}
			if again := PlanSocket(c.d, observe(t, s)); len(again.Ops) > 0 {
				t.Fatalf("replan:\n%s", strings.Join(opLines(again), "\n"))
			}
		})
	}
}
