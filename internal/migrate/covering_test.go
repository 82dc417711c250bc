package migrate

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

func TestCovering(t *testing.T) {
	pfx := func(s string) netip.Prefix {
		if !strings.Contains(s, "/") {
			a := netip.MustParseAddr(s)
			return netip.PrefixFrom(a, a.BitLen())
		}
		return netip.MustParsePrefix(s)
	}
	md5 := func(a string) Neighbor { return Neighbor{Name: a, Prefix: pfx(a), Kind: MD5} }
	plain := func(a string) Neighbor { return Neighbor{Name: a, Prefix: pfx(a), Kind: Unsigned} }
	ao := func(name, at string, ids ...KeyIDs) Neighbor {
		return Neighbor{Name: name, Prefix: pfx(at), Kind: AO, IDs: ids}
	}
	one := []KeyIDs{{Send: 1, Recv: 1}}
	for _, tc := range []struct {
		name   string
		peer   string
		own    []KeyIDs
		others []Neighbor
		want   string // the prefix, or a part of the error
	}{
		{"a /30 link: .0/30, not .2/31 (its network address is the peer)", "10.255.0.2", one, nil, "10.255.0.0/30"},
		{"a /31 link", "10.0.0.1", one, nil, "10.0.0.0/31"},
		{".4's /31 and /30 start at .4", "10.0.0.4", one, nil, "10.0.0.0/29"},
		{"an IPv6 link", "2001:db8::2", one, nil, "2001:db8::/126"},
		{"an MD5 neighbor inside is taken", "10.0.0.7", one, []Neighbor{md5("10.0.0.6")}, "10.0.0.4/30"},
		{"not at an MD5 neighbor's network address", "10.0.0.3", one, []Neighbor{md5("10.0.0.2")}, "10.0.0.0/30"},
		{"an MD5 prefix over every network address", "10.0.0.3", one, []Neighbor{md5("10.0.0.0/24")}, "under 10.0.0.0/24's TCP-MD5 key"},
		{"an unsigned neighbor is never covered", "10.0.0.7", one, []Neighbor{plain("10.0.0.6")}, "10.0.0.6 , which connects unsigned"},
		{"an unsigned neighbor outside", "10.0.0.2", one, []Neighbor{plain("10.0.0.5")}, "10.0.0.0/30"},
		{"an unsigned neighbor in every candidate", "10.0.0.2", one, []Neighbor{plain("10.0.0.1")}, "10.0.0.1, which connects unsigned"},
		{"a TCP-AO neighbor with other IDs inside", "10.0.0.3", one, []Neighbor{ao("10.0.0.2", "10.0.0.2", KeyIDs{Send: 2, Recv: 2})}, "10.0.0.2/31"},
		{"a TCP-AO neighbor with the same SendID", "10.0.0.3", one, []Neighbor{ao("10.0.0.2", "10.0.0.2", KeyIDs{Send: 1, Recv: 9})}, "share a key ID"},
		{"a TCP-AO neighbor with the same RecvID", "10.0.0.3", one, []Neighbor{ao("10.0.0.2", "10.0.0.2", KeyIDs{Send: 9, Recv: 1})}, "share a key ID"},
		{"a neighbor's covering prefix with other IDs", "10.0.0.3", one, []Neighbor{md5("10.0.0.2"), ao("10.0.0.2", "10.0.0.0/30", KeyIDs{Send: 2, Recv: 2})}, "10.0.0.0/30"},
		{"the same IDs beyond the overlap", "10.0.0.3", one, []Neighbor{ao("10.0.0.9", "10.0.0.9", KeyIDs{Send: 1, Recv: 1})}, "10.0.0.2/31"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Covering(netip.MustParseAddr(tc.peer), tc.own, tc.others, 8)
			if strings.Contains(tc.want, "/") && !strings.Contains(tc.want, " ") {
				if err != nil || got.String() != tc.want {
					t.Fatalf("Covering = %s, %v; want %s", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), strings.ReplaceAll(tc.want, " ,", ",")) {
				t.Fatalf("Covering = %s, %v; want an error saying %q", got, err, tc.want)
			}
		})
	}
}

// A peering LAN's /24 whose members hold consecutive addresses, every one
// on TCP-MD5, each with key IDs of its own: every member finds a covering
// prefix, whichever order they start in, each regarding the prefixes
// taken before it; with one pair of IDs shared by all, the second member
// whose prefix overlaps the first's is refused, and says so.
func TestCoveringDenseLAN(t *testing.T) {
	const members = 200
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(10 + i)}) }
	run := func(ids func(i int) KeyIDs) (taken int, err error) {
		var lan []Neighbor
		for i := range members {
			lan = append(lan, Neighbor{Name: addr(i).String(), Prefix: netip.PrefixFrom(addr(i), 32), Kind: MD5})
		}
		for i := range members {
			others := make([]Neighbor, 0, len(lan))
			for _, n := range lan {
				if n.Name != addr(i).String() {
					others = append(others, n)
				}
			}
			p, err := Covering(addr(i), []KeyIDs{ids(i)}, others, 8)
			if err != nil {
				return taken, fmt.Errorf("member %d: %w", i, err)
			}
			if !p.Contains(addr(i)) || p.Addr() == addr(i) {
				return taken, fmt.Errorf("member %d: %s", i, p)
			}
			lan = append(lan, Neighbor{Name: addr(i).String(), Prefix: p, Kind: AO, IDs: []KeyIDs{ids(i)}})
			taken++
		}
		return taken, nil
	}
	if n, err := run(func(i int) KeyIDs { return KeyIDs{Send: byte(i), Recv: byte(i)} }); err != nil || n != members {
		t.Fatalf("own IDs: %d of %d members: %v", n, members, err)
	}
	n, err := run(func(int) KeyIDs { return KeyIDs{Send: 1, Recv: 1} })
	if err == nil || !strings.Contains(err.Error(), "share a key ID") || n == members {
		t.Fatalf("shared IDs: %d members took a prefix, then %v", n, err)
	}
}
