package peer

import (
	"encoding/json"
	"maps"
	"net/netip"
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
		{"bogus", Key{}, "", true},
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

func FuzzParse(f *testing.F) {
	for _, s := range []string{"192.0.2.2", "10.0.0.2 vrf red", "fe80::1%eth0", "2001:db8::1 vrf x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Parse(s)
		if err != nil {
			return
		}
		back, err := Parse(k.String())
		if err != nil || back != k {
			t.Fatalf("Parse(%q) = %+v, whose text %q reads back as %+v, %v", s, k, k.String(), back, err)
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
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"192.0.2.2":1,"192.0.2.2 vrf red":2,"2001:db8::2":3}`; string(b) != want {
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
		{"10.0.0.2 vrf red", "blue", Key{}, true},
		{"10.0.0.2 vrf ", "", Key{}, true},
		{"", "red", Key{}, true},
		{"bogus", "", Key{}, true},
	} {
		k, err := ParseWithVRF(c.s, c.vrf)
		if (err != nil) != c.err || (!c.err && k != c.want) {
			t.Errorf("ParseWithVRF(%q, %q) = %+v, %v; want %+v (error %t)", c.s, c.vrf, k, err, c.want, c.err)
		}
	}
}
