package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/keystore"
)

// scanBindingFor is the reference lookup: the first binding in file order
// whose VRF is vrf and whose neighbor prefix contains peer.
func scanBindingFor(bindings []*Binding, peer netip.Addr, vrf string) (int, bool) {
	peer = peer.Unmap().WithZone("")
	for i, b := range bindings {
		if b.VRF == vrf && b.Neighbor.Contains(peer) {
			return i, true
		}
	}
	return -1, false
}

// scanOverlap is the reference overlap check of the parser: the first
// binding in file order in bd's VRF whose prefix overlaps bd's.
func scanOverlap(bindings []*Binding, bd *Binding) (int, bool) {
	for i, o := range bindings {
		if o.VRF == bd.VRF && o.Neighbor.Overlaps(bd.Neighbor) {
			return i, true
		}
	}
	return -1, false
}

// addrGen draws addresses from small v4 and v6 ranges so that random
// bindings overlap and random peers hit them often.
type addrGen struct{ r *rand.Rand }

func (g addrGen) addr() netip.Addr {
	low := g.r.IntN(1 << 10)
	if g.r.IntN(2) == 0 {
		return netip.AddrFrom4([4]byte{10, byte(g.r.IntN(2)), byte(low >> 8), byte(low)})
	}
	b := netip.MustParseAddr("2001:db8::").As16()
	b[7], b[14], b[15] = byte(g.r.IntN(2)), byte(low>>8), byte(low)
	return netip.AddrFrom16(b)
}

// prefix is a host prefix half of the time, else a masked prefix of any
// length (a few /0).
func (g addrGen) prefix() netip.Prefix {
	a := g.addr()
	bits := a.BitLen()
	if g.r.IntN(2) == 0 {
		bits = g.r.IntN(a.BitLen() + 1)
	}
	return netip.PrefixFrom(a, bits).Masked()
}

// peer is a random address, or one inside a binding's prefix, sometimes
// 4-in-6 mapped or with a zone, rarely the zero Addr.
func (g addrGen) peer(bindings []*Binding) netip.Addr {
	a := g.addr()
	if len(bindings) > 0 && g.r.IntN(4) != 0 {
		pfx := bindings[g.r.IntN(len(bindings))].Neighbor
		b := a.As16()
		if pfx.Addr().Is4() {
			v := pfx.Addr().As4()
			copy(b[12:], v[:])
		} else {
			b = pfx.Addr().As16()
		}
		// Randomise the host bits below the prefix.
		for i := pfx.Bits(); i < pfx.Addr().BitLen(); i++ {
			if g.r.IntN(2) == 0 {
				continue
			}
			bit := i + 128 - pfx.Addr().BitLen()
			b[bit/8] ^= 0x80 >> (bit % 8)
		}
		a = netip.AddrFrom16(b)
		if pfx.Addr().Is4() {
			a = a.Unmap()
		}
	}
	switch g.r.IntN(10) {
	case 0:
		if a.Is4() {
			a = netip.AddrFrom16(a.As16())
		}
	case 1:
		if a.Is6() {
			a = a.WithZone("eth0")
		}
	case 2:
		if g.r.IntN(10) == 0 {
			a = netip.Addr{}
		}
	}
	return a
}

// TestIndexMatchesScan: for random binding sets (hosts and prefixes of
// mixed lengths, both families, three VRFs, overlaps and duplicates that
// validation would reject) and random peers, the index answers exactly
// what the first-match scan answers, and the parser's overlap check finds
// the same binding as a scan.
func TestIndexMatchesScan(t *testing.T) {
	vrfs := []string{"", "blue", "red"}
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 8))
		g := addrGen{r}
		p := &Policy{}
		n := r.IntN(60)
		for range n {
			var pfx netip.Prefix
			switch r.IntN(20) {
			case 0:
				if len(p.bindings) > 0 {
					pfx = p.bindings[r.IntN(len(p.bindings))].Neighbor // duplicate
				}
			case 1:
				// Outside the Binding contract: unmasked or 4-in-6.
				a := g.addr()
				pfx = netip.PrefixFrom(netip.AddrFrom16(a.As16()), 96+r.IntN(33))
				if r.IntN(2) == 0 {
					pfx = netip.PrefixFrom(a, r.IntN(a.BitLen()+1))
				}
			default:
				pfx = g.prefix()
			}
			bd := &Binding{Neighbor: pfx, VRF: vrfs[r.IntN(len(vrfs))], Field: fmt.Sprint(len(p.bindings))}
			wantO, wantOK := scanOverlap(p.bindings, bd)
			if pfx.IsValid() && pfx.IsSingleIP() && pfx == pfx.Masked() && !pfx.Addr().Is4In6() {
				o := p.firstOverlap(bd)
				switch {
				case wantOK && (o == nil || o != p.bindings[wantO]):
					t.Fatalf("seed %d: firstOverlap(%s) = %v, want %s", seed, bd, o, p.bindings[wantO])
				case !wantOK && o != nil:
					t.Fatalf("seed %d: firstOverlap(%s) = %s, want none", seed, bd, o)
				}
			}
			p.bindings = append(p.bindings, bd)
			p.index.add(len(p.bindings)-1, bd)
		}
		for range 300 {
			peer, vrf := g.peer(p.bindings), vrfs[r.IntN(len(vrfs))]
			want, wantOK := scanBindingFor(p.bindings, peer, vrf)
			got, err := p.bindingFor(peer, vrf)
			switch {
			case wantOK && (err != nil || got != p.bindings[want]):
				t.Fatalf("seed %d: bindingFor(%s, %q) = %v, %v; want #%d %s", seed, peer, vrf, got, err, want, p.bindings[want])
			case !wantOK && err == nil:
				t.Fatalf("seed %d: bindingFor(%s, %q) = #%s %s, want none", seed, peer, vrf, got.Field, got)
			}
		}
	}
}

// FuzzBindingFor: the index agrees with the scan for bindings and a peer
// decoded from the fuzzer's bytes.
func FuzzBindingFor(f *testing.F) {
	f.Add([]byte{0, 10, 0, 0, 1, 32, 1, 8, 10, 0, 0, 0, 2, 0, 0, 0, 0}, []byte{10, 0, 0, 1}, uint8(0))
	f.Add([]byte{1, 32, 1, 13, 184, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}, []byte{32, 1, 13, 184, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2}, uint8(1))
	vrfs := []string{"", "blue"}
	f.Fuzz(func(t *testing.T, spec, peerBytes []byte, vrf uint8) {
		// spec is a list of bindings: family byte, address bytes (4 or
		// 16), prefix length byte.
		p := &Policy{}
		for len(spec) > 0 && len(p.bindings) < 64 {
			n := 4
			if spec[0]&1 == 1 {
				n = 16
			}
			if len(spec) < n+2 {
				break
			}
			a, _ := netip.AddrFromSlice(spec[1 : 1+n])
			bits := int(spec[1+n]) % (a.BitLen() + 1)
			bd := &Binding{Neighbor: netip.PrefixFrom(a, bits).Masked(), VRF: vrfs[(spec[0]>>1)&1]}
			if bd.Neighbor.IsSingleIP() {
				o := p.firstOverlap(bd)
				if i, ok := scanOverlap(p.bindings, bd); ok != (o != nil) || (ok && o != p.bindings[i]) {
					t.Fatalf("firstOverlap(%s) = %v, scan says %d %v", bd, o, i, ok)
				}
			}
			p.bindings = append(p.bindings, bd)
			p.index.add(len(p.bindings)-1, bd)
			spec = spec[n+2:]
		}
		peer, _ := netip.AddrFromSlice(peerBytes)
		v := vrfs[vrf%2]
		want, wantOK := scanBindingFor(p.bindings, peer, v)
		got, err := p.bindingFor(peer, v)
		if wantOK != (err == nil) || (wantOK && got != p.bindings[want]) {
			t.Fatalf("bindingFor(%s, %q) = %v, %v; scan says #%d %v", peer, v, got, err, want, wantOK)
		}
	})
}

// scalePolicy is a route-server policy: hosts /32 bindings, one per peer
// (10.0.0.1 upwards), half of them on a chain that lists its keys, plus a
// few prefixes in both families and two VRFs. peers returns an address
// covered by every binding, in file order.
func scalePolicy(tb testing.TB, hosts int) (p *Policy, peers []netip.Addr, vrfs []string) {
	tb.Helper()
	var sb strings.Builder
	sb.WriteString(`key_chains:
  - name: all
    source_chain: core
  - name: listed
    source_chain: core
    keys: [{name: k1}, {name: k2}, {name: k3}, {name: k4}]
peers:
`)
	a := netip.MustParseAddr("10.0.0.1")
	for i := range hosts {
		chain := "all"
		if i%2 == 1 {
			chain = "listed"
		}
		fmt.Fprintf(&sb, "  - {neighbor: %s, key_chain: %s}\n", a, chain)
		peers, vrfs = append(peers, a), append(vrfs, "")
		a = a.Next()
	}
	for _, pf := range []struct{ pfx, vrf, peer string }{
		{"192.168.0.0/16", "", "192.168.7.9"},
		{"172.16.0.0/12", "", "172.20.1.1"},
		{"2001:db8:1::/48", "", "2001:db8:1::99"},
		{"10.0.0.0/8", "blue", "10.200.0.1"},
		{"2001:db8::/32", "blue", "2001:db8:5::1"},
	} {
		vrf := ""
		if pf.vrf != "" {
			vrf = ", vrf: " + pf.vrf
		}
		fmt.Fprintf(&sb, "  - {neighbor: %s%s, key_chain: all}\n", pf.pfx, vrf)
		peers, vrfs = append(peers, netip.MustParseAddr(pf.peer)), append(vrfs, pf.vrf)
	}
	return mustParse(tb, sb.String()), peers, vrfs
}

// scaleSnapshot has the four keys of scalePolicy's chain: one retired, one
// sending, one accepted ahead of its send start, one in the future.
func scaleSnapshot() *keystore.Snapshot {
	const d = Day
	return snapshot(chain("core",
		mkt("core", "k1", 1, 1, life(-20*d, -9*d), life(-21*d, -9*d)),
		mkt("core", "k2", 2, 2, life(-10*d, 11*d), life(-11*d, 11*d)),
		mkt("core", "k3", 3, 3, from(10*d), from(-d)),
		mkt("core", "k4", 4, 4, from(40*d), from(39*d)),
	))
}

// BenchmarkBindingFor looks up every peer of a 4,096-host policy in turn:
// "index" is Policy.BindingFor, "scan" the linear reference it replaced.
func BenchmarkBindingFor(b *testing.B) {
	p, peers, vrfs := scalePolicy(b, 4096)
	b.Run("index", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := p.BindingFor(peers[i], vrfs[i]); err != nil {
				b.Fatal(err)
			}
			i = (i + 1) % len(peers)
		}
	})
	b.Run("scan", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, ok := scanBindingFor(p.bindings, peers[i], vrfs[i]); !ok {
				b.Fatal("no binding")
			}
			i = (i + 1) % len(peers)
		}
	})
}

// BenchmarkDesired: "small" is one peer of desiredPolicy; "4096" cycles
// through the peers of a 4,096-host policy with four keys per chain.
func BenchmarkDesired(b *testing.B) {
	b.Run("small", func(b *testing.B) {
		p := mustParse(b, desiredPolicy)
		snap := desiredSnapshot()
		peer := addr("10.0.0.1")
		for b.Loop() {
			if _, err := p.Desired(snap, peer, "", at(10*Day)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("4096", func(b *testing.B) {
		p, peers, vrfs := scalePolicy(b, 4096)
		snap := scaleSnapshot()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := p.Desired(snap, peers[i], vrfs[i], t0); err != nil {
				b.Fatal(err)
			}
			i = (i + 1) % len(peers)
		}
	})
}

// BenchmarkParse4096 parses a 4,096-host policy (the overlap check runs
// once per binding).
func BenchmarkParse4096(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("key_chains: [{name: all}]\npeers:\n")
	a := netip.MustParseAddr("10.0.0.1")
	for range 4096 {
		fmt.Fprintf(&sb, "  - {neighbor: %s, key_chain: all}\n", a)
		a = a.Next()
	}
	src := []byte(sb.String())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bench.yaml", src); err != nil {
			b.Fatal(err)
		}
	}
}
