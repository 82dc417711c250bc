package rotator_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

func md5Key(peer, pw string) tcpao.MD5Key {
	return tcpao.MD5Key{MD5Ref: tcpao.MD5Ref{Peer: netip.MustParsePrefix(peer)}, Secret: tcpao.NewSecret([]byte(pw))}
}

func md5Have(peer, pw string) tcpao.MD5Info {
	k := md5Key(peer, pw)
	return tcpao.MD5Info{MD5Ref: k.MD5Ref, Fingerprint: k.Secret.Fingerprint()}
}

func md5Ref(peer string) tcpao.MD5Ref { return tcpao.MD5Ref{Peer: netip.MustParsePrefix(peer)} }

// PlanMD5 is the never-strand rule for TCP-MD5 keys: nothing of aokeyd's
// leaves or changes its password unless an operator action or a proved
// TCP-AO session says so, and nothing foreign is touched.
func TestPlanMD5(t *testing.T) {
	const a, b = "192.0.2.2/32", "192.0.2.6/32"
	type op struct {
		del  bool
		peer string
		why  rotator.Reason
	}
	type held struct {
		peer string
		why  rotator.Reason
	}
	for _, tc := range []struct {
		name string
		d    rotator.MD5Desired
		have []tcpao.MD5Info
		ops  []op
		held []held
	}{
		{"new password added", rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key(a, "pw")}}, nil,
			[]op{{false, a, rotator.ReasonNew}}, nil},
		{"in place: nothing", rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key(a, "pw")}}, []tcpao.MD5Info{md5Have(a, "pw")}, nil, nil},
		{"gone from the source: kept", rotator.MD5Desired{Owns: func(tcpao.MD5Info) bool { return true }},
			[]tcpao.MD5Info{md5Have(a, "pw")}, nil, []held{{a, rotator.ReasonCarried}}},
		{"changed password: held", rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key(a, "new")}, Owns: func(tcpao.MD5Info) bool { return true }},
			[]tcpao.MD5Info{md5Have(a, "old")}, nil, []held{{a, rotator.ReasonEdited}}},
		{"changed password at a planned reset", rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key(a, "new")}, ApproveChange: []tcpao.MD5Ref{md5Ref(a)},
			Owns: func(tcpao.MD5Info) bool { return true }}, []tcpao.MD5Info{md5Have(a, "old")},
			[]op{{false, a, rotator.ReasonReplace}}, nil},
		{"migrated: retired", rotator.MD5Desired{Retire: []tcpao.MD5Ref{md5Ref(a)}, Owns: func(tcpao.MD5Info) bool { return true }, AOCovers: anyAO},
			[]tcpao.MD5Info{md5Have(a, "pw"), md5Have(b, "pw")}, []op{{true, a, rotator.ReasonMigrated}}, []held{{b, rotator.ReasonCarried}}},
		{"migrated but no TCP-AO covers the peer: kept", rotator.MD5Desired{Retire: []tcpao.MD5Ref{md5Ref(a)}, Owns: func(tcpao.MD5Info) bool { return true }},
			[]tcpao.MD5Info{md5Have(a, "pw")}, nil, []held{{a, rotator.ReasonNoReplace}}},
		{"revoked", rotator.MD5Desired{Revoked: []tcpao.MD5Ref{md5Ref(a)}, Owns: func(tcpao.MD5Info) bool { return true }},
			[]tcpao.MD5Info{md5Have(a, "pw")}, []op{{true, a, rotator.ReasonRevoked}}, nil},
		{"foreign: never touched, even retired", rotator.MD5Desired{Retire: []tcpao.MD5Ref{md5Ref(a)}, Revoked: []tcpao.MD5Ref{md5Ref(a)}},
			[]tcpao.MD5Info{md5Have(a, "speaker's")}, nil, []held{{a, rotator.ReasonForeign}}},
		{"foreign at a desired prefix: not replaced", rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key(a, "ours")}, ApproveChange: []tcpao.MD5Ref{md5Ref(a)}},
			[]tcpao.MD5Info{md5Have(a, "speaker's")}, nil, []held{{a, rotator.ReasonForeignClash}}},
		{"tcp-ao covers the peer: not added", rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key(a, "pw")},
			AOCovers: func(x netip.Addr) bool { return x == netip.MustParseAddr("192.0.2.2") }}, nil, nil, []held{{a, rotator.ReasonAOCovers}}},
		{"deletes before adds", rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key(b, "pw")}, Retire: []tcpao.MD5Ref{md5Ref(a)},
			Owns: func(tcpao.MD5Info) bool { return true }, AOCovers: func(x netip.Addr) bool { return x == netip.MustParseAddr("192.0.2.2") }}, []tcpao.MD5Info{md5Have(a, "pw")},
			[]op{{true, a, rotator.ReasonMigrated}, {false, b, rotator.ReasonNew}}, nil},
		{"v4-mapped installed key is the v4 key", rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key(a, "pw")}},
			[]tcpao.MD5Info{md5Have("::ffff:192.0.2.2/32", "pw")}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rotator.PlanMD5(tc.d, tc.have)
			var ops []op
			for _, o := range p.Ops {
				ops = append(ops, op{o.Del, o.Ref.Peer.String(), o.Why})
			}
			var hs []held
			for _, h := range p.Held {
				hs = append(hs, held{h.Ref.Peer.String(), h.Why})
			}
			if !slices.Equal(ops, tc.ops) || !slices.Equal(hs, tc.held) {
				t.Fatalf("ops %v held %v, want ops %v held %v", ops, hs, tc.ops, tc.held)
			}
		})
	}
}

// A plan applied to the in-memory kernel lands: the add installs the
// password (a connection with it is accepted), the retire removes it.
func TestApplyMD5(t *testing.T) {
	n := tcpaotest.NewNet()
	l, _ := n.Socket(netip.MustParseAddr("127.0.0.1"))
	if err := l.Listen(); err != nil {
		t.Fatal(err)
	}
	d := rotator.MD5Desired{Keys: []tcpao.MD5Key{md5Key("127.0.0.2/32", "pw")}}
	p := rotator.PlanMD5(d, keysOf(l))
	if _, err := rotator.ApplyMD5(l, p.Ops); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(l); len(got) != 1 || got[0] != md5Have("127.0.0.2/32", "pw") {
		t.Fatalf("installed %+v", got)
	}
	if again := rotator.PlanMD5(d, keysOf(l)); len(again.Ops) != 0 {
		t.Fatalf("second plan %+v, want nothing", again)
	}
	c, _ := n.Socket(netip.MustParseAddr("127.0.0.2"))
	if err := c.AddMD5(md5Key("127.0.0.1/32", "pw")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Connect(c, l); err != nil {
		t.Fatalf("MD5 connection: %v", err)
	}
	p = rotator.PlanMD5(rotator.MD5Desired{Retire: []tcpao.MD5Ref{md5Ref("127.0.0.2/32")}, Owns: func(tcpao.MD5Info) bool { return true }, AOCovers: anyAO}, keysOf(l))
	if _, err := rotator.ApplyMD5(l, p.Ops); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(l); len(got) != 0 {
		t.Fatalf("after the retire %+v", got)
	}
}

func keysOf(l *tcpaotest.Sock) []tcpao.MD5Info {
	ks, err := l.MD5Keys()
	if err != nil {
		panic(err)
	}
	return ks
}

func anyAO(netip.Addr) bool { return true }
