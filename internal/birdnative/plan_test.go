package birdnative

import (
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

func sk(send uint8, sendable bool) policy.ScheduledKey {
	return policy.ScheduledKey{MKT: keystore.MKT{Name: "k" + string('0'+rune(send)), SendID: send, RecvID: send + 100, Algorithm: tcpao.HMACSHA256,
		Secret: tcpao.NewSecret([]byte("sixteen byte key" + string('0'+rune(send))))}, Sendable: sendable, IncludeTCPOptions: true}
}

func wk(send uint8, preferred bool) bird.Key {
	k := sk(send, true)
	return bird.Key{SendID: send, RecvID: send + 100, Algorithm: tcpao.HMACSHA256, Secret: k.MKT.Secret, Preferred: preferred}
}

// flags renders a plan as "1p 2d" (send ID, p preferred, d deprecated).
func flags(p plan) string {
	if p.Err != nil {
		return "error"
	}
	if p.Disabled {
		return "disabled"
	}
	var s []string
	for _, k := range p.Keys {
		f := string('0' + rune(k.SendID))
		if k.Preferred {
			f += "p"
		}
		if k.Deprecated {
			f += "d"
		}
		s = append(s, f)
	}
	return strings.Join(s, " ")
}

func sess(good, before map[ids]uint64) *session { return &session{good: good, before: before} }

// TestPlanPeer: the never-strand rule for BIRD's files.
func TestPlanPeer(t *testing.T) {
	one, two := ids{1, 101}, ids{2, 102}
	for _, tc := range []struct {
		name string
		in   input
		want string
	}{
		{"first file: the desired keys, newest preferred", input{Desired: []policy.ScheduledKey{sk(1, true), sk(2, true)}, Preferred: 1}, "1 2p"},
		{"accept-only keys deprecated", input{Desired: []policy.ScheduledKey{sk(1, false), sk(2, true)}, Preferred: 1}, "1d 2p"},
		{"an old key stays while no session is up", input{Desired: []policy.ScheduledKey{sk(2, true)}, Preferred: 0, Written: []bird.Key{wk(1, true)}}, "1d 2p"},
		{"an old key stays until the peer sends with the new one",
			input{Desired: []policy.ScheduledKey{sk(2, true)}, Preferred: 0, Written: []bird.Key{wk(1, true), wk(2, false)},
				Session: sess(map[ids]uint64{one: 50}, map[ids]uint64{one: 40})}, "1d 2p"},
		{"an old key stays while the peer still sends with it",
			input{Desired: []policy.ScheduledKey{sk(2, true)}, Preferred: 0, Written: []bird.Key{wk(1, false), wk(2, true)},
				Session: sess(map[ids]uint64{one: 50, two: 3}, map[ids]uint64{one: 40, two: 1})}, "1d 2p"},
		{"retired once the peer switched",
			input{Desired: []policy.ScheduledKey{sk(2, true)}, Preferred: 0, Written: []bird.Key{wk(1, false), wk(2, true)},
				Session: sess(map[ids]uint64{one: 50, two: 9}, map[ids]uint64{one: 50, two: 3})}, "2p"},
		{"a revoked key leaves even in use",
			input{Desired: []policy.ScheduledKey{sk(2, true)}, Preferred: 0, Written: []bird.Key{wk(1, true), wk(2, false)}, Revoked: []ids{one},
				Session: sess(map[ids]uint64{one: 50}, map[ids]uint64{one: 40})}, "2p"},
		{"the only key revoked: the protocol is disabled", input{Preferred: -1, Written: []bird.Key{wk(1, true)}, Revoked: []ids{one}}, "disabled"},
		{"no key to send with: the written preferred one keeps sending",
			input{Desired: []policy.ScheduledKey{sk(1, false)}, Preferred: -1, Written: []bird.Key{wk(1, true)}}, "1p"},
		{"no key to send with and none written: nothing BIRD takes", input{Desired: []policy.ScheduledKey{sk(1, false)}, Preferred: -1}, "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := flags(planPeer(tc.in)); got != tc.want {
				t.Errorf("plan %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("an edit in place keeps the written material", func(t *testing.T) {
		w := wk(1, true)
		w.Secret = tcpao.NewSecret([]byte("the old material"))
		p := planPeer(input{Desired: []policy.ScheduledKey{sk(1, true)}, Preferred: 0, Written: []bird.Key{w}})
		if len(p.Keys) != 1 || p.Keys[0].Secret.Fingerprint() != w.Secret.Fingerprint() || len(p.Kept) != 1 || !strings.Contains(p.Kept[0].Why, "edited in place") {
			t.Fatalf("plan %+v", p)
		}
	})
}

// TestFileRoundTrip: a rendered file reads back as the same keys.
func TestFileRoundTrip(t *testing.T) {
	in := []bird.Key{wk(1, false), wk(2, true)}
	in[0].Deprecated = true
	in[1].Algorithm = tcpao.CMACAES128
	b := render(in, false)
	out, err := parseFile(b)
	if err != nil || len(out) != 2 {
		t.Fatalf("parse: %v (%d keys)\n%s", err, len(out), b)
	}
	for i := range in {
		if out[i].SendID != in[i].SendID || out[i].RecvID != in[i].RecvID || out[i].Algorithm != in[i].Algorithm ||
			out[i].Preferred != in[i].Preferred || out[i].Deprecated != in[i].Deprecated || !out[i].Secret.Equal(in[i].Secret) {
			t.Errorf("key %d: %+v, want %+v", i, out[i], in[i])
		}
	}
}
