package bird

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestParseProtocols: every protocol of `show protocols all`, with a BGP
// protocol's session and TCP-AO block.
func TestParseProtocols(t *testing.T) {
	out := "BIRD 2.17.6 ready.\n" +
		"Name       Proto      Table      State  Since         Info\n" +
		"device1    Device     ---        up     2026-12-04 05:00:00.000  \n" +
		"peer_a     BGP        ---        up     2026-12-04 05:00:01.123  Established   \n" +
		"  BGP state:          Established\n" +
		"    Neighbor address: 10.255.0.1\n" +
		"    TCP-AO:\n" +
		"      Current key:    101\n" +
		"      RNext key:      1\n" +
		"      Good packets:   42\n" +
		"      Bad packets:    0\n" +
		"peer_1     BGP        ---        start  2026-12-04 05:00:02.000  Active        Socket: Connection refused\n" +
		"  BGP state:          Active\n" +
		"    Neighbor address: 2001:db8::1\n" +
		"    Last error:       Socket: Connection refused\n"
	ps := ParseProtocols(out)
	if len(ps) != 3 {
		t.Fatalf("%d protocols: %+v", len(ps), ps)
	}
	a := ps[1]
	if a.Name != "peer_a" || a.Proto != "BGP" || a.State != "up" || a.Since != "2026-12-04 05:00:01.123" || a.BGPState != "Established" ||
		a.Neighbor != netip.MustParseAddr("10.255.0.1") || a.CurrentKey != 101 || a.RNextKey != 1 || a.PktGood != 42 || a.PktBad != 0 {
		t.Errorf("peer_a %+v", a)
	}
	b := ps[2]
	if b.State != "start" || b.Neighbor != netip.MustParseAddr("2001:db8::1") || b.CurrentKey != -1 || b.LastError != "Socket: Connection refused" {
		t.Errorf("peer_1 %+v", b)
	}
}

// TestRenderKeys: BIRD's key block, and what BIRD cannot hold.
func TestRenderKeys(t *testing.T) {
	got := string(RenderKeys([]Key{
		{SendID: 1, RecvID: 101, Algorithm: tcpao.HMACSHA1, Secret: tcpao.NewSecret([]byte{0xab, 0xcd}), Deprecated: true},
		{SendID: 2, RecvID: 102, Algorithm: tcpao.CMACAES128, Secret: tcpao.NewSecret([]byte{0x01}), Preferred: true},
	}))
	want := "authentication ao;\nkeys {\n" +
		"\tkey { send id 1; recv id 101; secret hex:abcd; algorithm hmac sha1; deprecated; };\n" +
		"\tkey { send id 2; recv id 102; secret hex:01; algorithm cmac aes128; preferred; };\n};\n"
	if got != want {
		t.Errorf("rendered\n%s\nwant\n%s", got, want)
	}
	for _, tc := range []struct {
		k    tcpao.Key
		want string
	}{
		{tcpao.Key{ExcludeOptions: true}, "exclude TCP options"},
		{tcpao.Key{MACLen: 16}, "MAC length"},
		{tcpao.Key{MACLen: 12}, ""},
	} {
		err := Check(tc.k)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%+v) = %v, want %q", tc.k, err, tc.want)
		}
	}
}
