package peer

import (
	"encoding/json"
	"maps"
	"net/netip"
	"strings"
	"testing"
)

func TestKeyText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Key
		text string
		err  bool
	}{
		{"192.0.2.2", Key{Addr: netip.MustParseAddr("192.0.2.2")}, "192.0.2.2", false},
		{"10.0.0.2 vrf red", Key{Addr: netip.MustParseAddr("10.0.0.2"), VRF: "red"}, "10.0.0.2 vrf red", false},
		{"2001:db8::2 vrf blue", Key{Addr: netip.MustParseAddr("2001:db8::2"), VRF: "blue"}, "2001:db8::2 vrf blue", false},
		{"::ffff:192.0.2.2", Key{Addr: netip.MustParseAddr("192.0.2.2")}, "192.0.2.2", false},
		{"fe80::1%eth0", Key{}, "", true}, // a zone is not a VRF
		{"10.0.0.2 vrf ", Key{}, "", true},
		{"swp1 interface", OnLink("swp1", ""), "swp1 interface", false},
		{"swp1 interface vrf red", OnLink("swp1", "red"), "swp1 interface vrf red", false},
		{"bond0.100 interface vrf blue", Key{Link: LinkOf("bond0.100"), VRF: "blue"}, "bond0.100 interface vrf blue", false},
		{"swp1", Key{}, "", true}, // a bare word is no peer: records never held one
		{"bogus", Key{}, "", true},
		{"swp1 vrf red", Key{}, "", true},
		{"swp1 interface vrf ", Key{}, "", true},
		{"a-name-of-16-byt interface", Key{}, "", true}, // past IFNAMSIZ
		{".. interface", Key{}, "", true},
		{"sw/p1 interface", Key{}, "", true},
		{"swp%1 interface", Key{}, "", true},
		{" interface", Key{}, "", true},
		{" vrf red", Key{}, "", true},
		{"10.0.0.256 interface", Key{}, "", true}, // a mistyped address, not an interface
		{"fe80::1 interface", Key{}, "", true},
	} {
		k, err := Parse(c.in)
		if (err != nil) != c.err || k != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v (error %t)", c.in, k, err, c.want, c.err)
			continue
		}
		if !c.err && k.String() != c.text {
			t.Errorf("%+v.String() = %q, want %q", k, k.String(), c.text)
		}
	}
	if a, b := KeyOf(netip.MustParseAddr("10.0.0.2"), "red"), KeyOf(netip.MustParseAddr("10.0.0.2"), "blue"); a == b || a.Compare(b) <= 0 {
		t.Errorf("the same address in two VRFs: %v and %v are one key, or out of order", a, b)
	}
	if KeyOf(netip.MustParseAddr("fe80::1%eth0"), "") != KeyOf(netip.MustParseAddr("fe80::1"), "") {
		t.Error("a zone makes another key")
	}
}

// TestLinkKeys: an interface neighbour is its interface and VRF: two
// links are two peers, the same name twice one (interned or not), and a
// link key is never an address key (its address is the session's, not
// the key's).
func TestLinkKeys(t *testing.T) {
	swp1, swp2 := OnLink("swp1", ""), OnLink("swp2", "")
	if swp1 == swp2 || swp1 == OnLink("swp1", "red") {
		t.Errorf("two links (or one link in two VRFs) are one key: %v %v", swp1, swp2)
	}
	if name := string([]byte("swp1")); OnLink(name, "") != swp1 {
		t.Error("one interface name makes two keys")
	}
	addr := KeyOf(netip.MustParseAddr("fe80::1"), "")
	for _, c := range []struct {
		k           Key
		valid, link bool
	}{
		{swp1, true, true},
		{addr, true, false},
		{Key{}, false, false},
		{Key{Addr: addr.Addr, Link: swp1.Link}, false, false}, // both: not a key
		{Key{VRF: "red"}, false, false},
	} {
		if c.k.IsValid() != c.valid || c.k.IsLink() != c.link {
			t.Errorf("%#v: valid %t link %t, want %t %t", c.k, c.k.IsValid(), c.k.IsLink(), c.valid, c.link)
		}
	}
	if _, err := (Key{Addr: addr.Addr, Link: swp1.Link}).MarshalText(); err == nil {
		t.Error("a key with both an address and a link was marshalled")
	}
	ordered := []Key{KeyOf(netip.MustParseAddr("10.0.0.1"), ""), addr, swp1, OnLink("swp1", "red"), swp2}
	for i := 1; i < len(ordered); i++ {
		if ordered[i-1].Compare(ordered[i]) >= 0 || ordered[i].Compare(ordered[i-1]) <= 0 {
			t.Errorf("%v and %v out of order", ordered[i-1], ordered[i])
		}
	}
	ll := netip.MustParseAddr("fe80::b%swp1")
	for _, c := range []struct {
		k    Key
		addr netip.Addr
		want string
	}{
		{swp1, ll, "swp1 (fe80::b)"},
		{OnLink("swp1", "red"), ll, "swp1 vrf red (fe80::b)"},
		{swp1, netip.Addr{}, "swp1 (none)"},
		{addr, ll, "fe80::1"},
	} {
		if got := c.k.Shown(c.addr); got != c.want {
			t.Errorf("%v.Shown(%v) = %q, want %q", c.k, c.addr, got, c.want)
		}
	}
	if swp1.Name() != "swp1" || OnLink("swp1", "red").Name() != "swp1" || addr.Name() != "fe80::1" {
		t.Errorf("names %q %q", swp1.Name(), addr.Name())
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"192.0.2.2", "10.0.0.2 vrf red", "fe80::1%eth0", "2001:db8::1 vrf x", "swp1 interface", "swp1 interface vrf red", "swp1 interface vrf a vrf b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Parse(s)
		if err != nil {
			return
		}
		if !k.IsValid() {
			t.Fatalf("Parse(%q) = %+v, not a valid key", s, k)
		}
		back, err := Parse(k.String())
		if err != nil || back != k {
			t.Fatalf("Parse(%q) = %+v, whose text %q reads back as %+v, %v", s, k, k.String(), back, err)
		}
		field := strings.TrimSuffix(k.String(), " vrf "+k.VRF) // an older record's form: the VRF beside it
		if old, err := ParseWithVRF(field, k.VRF); err != nil || old != k {
			t.Fatalf("ParseWithVRF(%q, %q) = %+v, %v; want %+v", field, k.VRF, old, err, k)
		}
		if arg, err := ParseArg(k.String()); err != nil || arg != k {
			t.Fatalf("ParseArg(%q) = %+v, %v; want %+v", k.String(), arg, err, k)
		}
	})
}

// TestKeyJSON: a Key is a JSON value and a JSON object's key in its text
// form, read back to the same Key; a key with no address is not written.
func TestKeyJSON(t *testing.T) {
	m := map[Key]int{
		KeyOf(netip.MustParseAddr("192.0.2.2"), ""):    1,
		KeyOf(netip.MustParseAddr("192.0.2.2"), "red"): 2,
		KeyOf(netip.MustParseAddr("2001:db8::2"), ""):  3,
		OnLink("swp1", ""):                             4,
		OnLink("swp1", "red"):                          5,
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"192.0.2.2":1,"192.0.2.2 vrf red":2,"2001:db8::2":3,"swp1 interface":4,"swp1 interface vrf red":5}`; string(b) != want {
		t.Errorf("marshalled %s, want %s", b, want)
	}
	var back map[Key]int
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(back, m) {
		t.Errorf("read back %v, want %v", back, m)
	}
	if _, err := json.Marshal(Key{}); err == nil {
		t.Error("a key with no address was marshalled")
	}
	var k Key
	if err := json.Unmarshal([]byte(`"192.0.2.2 vrf "`), &k); err == nil {
		t.Errorf("an empty VRF name was read as %v", k)
	}
}

// TestParseWithVRF: a record's older entries (a bare address, its VRF in
// a field of its own, the address as older writers left it) read as the
// same Key as the one-field form.
func TestParseWithVRF(t *testing.T) {
	red := KeyOf(netip.MustParseAddr("10.0.0.2"), "red")
	for _, c := range []struct {
		s, vrf string
		want   Key
		err    bool
	}{
		{"10.0.0.2 vrf red", "", red, false},
		{"10.0.0.2", "red", red, false},
		{"10.0.0.2 vrf red", "red", red, false},
		{"::ffff:10.0.0.2", "red", red, false},
		{"fe80::1%eth0", "", KeyOf(netip.MustParseAddr("fe80::1"), ""), false},
		{"10.0.0.2", "", KeyOf(netip.MustParseAddr("10.0.0.2"), ""), false},
		{"swp1 interface", "red", OnLink("swp1", "red"), false},
		{"swp1 interface vrf red", "", OnLink("swp1", "red"), false},
		{"swp1 interface vrf red", "blue", Key{}, true},
		{"swp1", "", Key{}, true}, // an older record's bare word is no peer
		{"bogus", "red", Key{}, true},
		{"10.0.0.2 vrf red", "blue", Key{}, true},
		{"10.0.0.2 vrf ", "", Key{}, true},
		{"", "red", Key{}, true},
		{"bo/gus interface", "", Key{}, true},
	} {
		k, err := ParseWithVRF(c.s, c.vrf)
		if (err != nil) != c.err || (!c.err && k != c.want) {
			t.Errorf("ParseWithVRF(%q, %q) = %+v, %v; want %+v (error %t)", c.s, c.vrf, k, err, c.want, c.err)
		}
	}
}

// TestParseArg: an operator names an interface neighbour by its interface
// alone too, as FRR's CLI does; anything Parse reads reads the same.
func TestParseArg(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Key
		err  bool
	}{
		{"swp1", OnLink("swp1", ""), false},
		{"swp1 vrf red", OnLink("swp1", "red"), false},
		{"swp1 interface vrf red", OnLink("swp1", "red"), false},
		{"192.0.2.2 vrf red", KeyOf(netip.MustParseAddr("192.0.2.2"), "red"), false},
		{"10.0.0.256", Key{}, true},
		{"swp1 vrf ", Key{}, true},
		{"sw p1", Key{}, true},
	} {
		k, err := ParseArg(c.in)
		if (err != nil) != c.err || k != c.want {
			t.Errorf("ParseArg(%q) = %+v, %v; want %+v (error %t)", c.in, k, err, c.want, c.err)
		}
	}
}
