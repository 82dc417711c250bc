package birdnative

import (
	"strings"
	"testing"
	"time"

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

// sess is a session with good now and before at the previous read, whose
// RNext_key was key 2 (TestPlanPeer's preferred key) at that read and the
// one before (settled).
func sess(good, before map[ids]uint64) *session {
	return &session{good: good, before: before, base: settledOn(ids{2, 102}, before)}
}

// settledOn is a base read that found rnext RNext_key, as the reads had
// for settleAfter before it.
func settledOn(rnext ids, good map[ids]uint64) sessionRead {
	at := time.Date(2026, 12, 6, 17, 0, 0, 0, time.UTC)
	return sessionRead{good: good, at: at, rnext: rnext, hasRNext: true, since: at.Add(-settleAfter)}
}

// planPeerCase is one of TestPlanPeer's cases: an input and its file
// ("1p 2d": send IDs, p preferred, d deprecated).
type planPeerCase struct {
	name string
	in   input
	want string
}

func planPeerCases() []planPeerCase {
	one, two := ids{1, 101}, ids{2, 102}
	return []planPeerCase{
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
	}
}

// TestPlanPeer: the never-strand rule for BIRD's files.
func TestPlanPeer(t *testing.T) {
	for _, tc := range planPeerCases() {
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
		if len(p.Keys) != 1 || p.Keys[0].Secret.Fingerprint() != w.Secret.Fingerprint() || len(p.Kept) != 1 || p.Kept[0].Reason != keptEdited {
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

// TestFirstReadRetiresNothing: a key no longer desired that the peer sent
// with leaves the file only once a second read of the same session shows
// its pkt_good stopped. The first read of a session (after aokeyd
// started, or a reconnect between two reads, whose counts start again)
// was taken as its own base, so the key looked stopped and left at once,
// while the peer may still send with it between keepalives.
func TestFirstReadRetiresNothing(t *testing.T) {
	info := func(send uint8, good uint64) tcpao.KeyInfo {
		return tcpao.KeyInfo{KeyRef: tcpao.KeyRef{SendID: send, RecvID: send + 100}, PktGood: good, IsRNext: send == 2, IsCurrent: send == 2}
	}
	in := input{Desired: []policy.ScheduledKey{sk(2, true)}, Preferred: 0, Written: []bird.Key{wk(1, false), wk(2, true)}}
	settled := func(good map[ids]uint64) sessionRead { return settledOn(ids{2, 102}, good) }
	for _, tc := range []struct {
		name string
		last sessionRead
		have bool
		now  []tcpao.KeyInfo
		want string
	}{
		{"the first read", sessionRead{}, false, []tcpao.KeyInfo{info(1, 50), info(2, 3)}, "1d 2p"},
		{"a new session's first read: its counts are below the last read's", settled(map[ids]uint64{{1, 101}: 80, {2, 102}: 9}), true,
			[]tcpao.KeyInfo{info(1, 50), info(2, 3)}, "1d 2p"},
		{"a second read, key 1 stopped", settled(map[ids]uint64{{1, 101}: 50, {2, 102}: 1}), true, []tcpao.KeyInfo{info(1, 50), info(2, 3)}, "2p"},
		{"a second read, key 1 rising", settled(map[ids]uint64{{1, 101}: 49, {2, 102}: 1}), true, []tcpao.KeyInfo{info(1, 50), info(2, 3)}, "1d 2p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := in
			in.Session = sessionOf(tc.now, tc.last, tc.have, tc.last.at.Add(time.Second))
			if got := flags(planPeer(in)); got != tc.want {
				t.Errorf("plan %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRetireNeedsTheNewKeySeen: found by roll.pml's executor end. The
// rule before planPeer was the rotator's dropped key 1 in each case but
// the first, while the peer could still send with it: it took any segment
// with any desired key, once, for the peer's switch, and ignored the key
// BIRD's session sends with.
func TestRetireNeedsTheNewKeySeen(t *testing.T) {
	one, two := ids{1, 101}, ids{2, 102}
	// base is a base read that found rnext RNext_key, as the reads had for
	// the time before it.
	base := func(rnext ids, d time.Duration) sessionRead {
		b := settledOn(rnext, nil)
		b.since = b.at.Add(-d)
		return b
	}
	for _, tc := range []struct {
		name string
		s    *session
		want string
	}{
		{"the peer's switch is proved: key 2 rose since a settled read, key 1 did not",
			&session{good: map[ids]uint64{one: 50, two: 9}, before: map[ids]uint64{one: 50, two: 3}, base: base(two, settleAfter)}, "2p"},
		{"key 2 did not rise since the base: the peer may send with key 1 at its next keepalive",
			&session{good: map[ids]uint64{one: 50, two: 3}, before: map[ids]uint64{one: 50, two: 3}, base: base(two, settleAfter)}, "1d 2p"},
		{"the base found key 1 RNext_key: our last segments asking for it may still switch the peer back",
			&session{good: map[ids]uint64{one: 50, two: 9}, before: map[ids]uint64{one: 50, two: 3}, base: base(one, time.Minute)}, "1d 2p"},
		{"the base was read too soon after key 2 became RNext_key: the peer's segments signed before it followed may be in flight",
			&session{good: map[ids]uint64{one: 50, two: 9}, before: map[ids]uint64{one: 50, two: 3}, base: base(two, settleAfter-time.Millisecond)}, "1d 2p"},
		{"BIRD's session sends with key 1 (the peer's RNext asks for it): kept",
			&session{good: map[ids]uint64{one: 50, two: 9}, before: map[ids]uint64{one: 50, two: 3}, base: base(two, settleAfter), current: one, hasCurrent: true}, "1d 2p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input{Desired: []policy.ScheduledKey{sk(2, true)}, Preferred: 0, Written: []bird.Key{wk(1, false), wk(2, true)}, Session: tc.s}
			if got := flags(planPeer(in)); got != tc.want {
				t.Errorf("plan %q, want %q", got, tc.want)
			}
		})
	}
}
