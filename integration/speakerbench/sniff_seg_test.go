package speakerbench

import (
	"net/netip"
	"testing"
)

// TestSegment: the sniffer's rendering of a captured segment, and what it
// leaves out (another host's, not TCP, truncated).
func TestSegment(t *testing.T) {
	peer := netip.MustParseAddr("10.1.0.110")
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0, 10, 1, 0, 110, 10, 0, 0, 1}
	tcp := []byte{
		0x8b, 0xcf, 0x00, 0xb3, // 35791 > 179
		0, 0, 0, 7, 0, 0, 0, 0, // seq 7, ack 0
		0x80, 0x02, 0xff, 0xff, 0, 0, 0, 0, // 32-byte header, SYN
		2, 4, 0x05, 0xb4, // MSS
		1,                            // NOP
		29, 6, 101, 1, 0xaa, 0xbb, 0, // TCP-AO (a 2-byte MAC, for brevity), end
	}
	syn := append(append([]byte{}, ip...), tcp...)
	for _, c := range []struct {
		name string
		p    []byte
		peer netip.Addr
		want string
	}{
		{"syn", syn, peer, "10.1.0.110:35791 > 10.0.0.1:179 [S] seq=7 ack=0 len=0 opts=2,ao(key=101,rnext=1)"},
		{"other host", syn, netip.MustParseAddr("10.1.0.111"), ""},
		{"truncated", syn[:30], peer, ""},
		{"udp", append(append([]byte{}, ip[:9]...), append([]byte{17}, ip[10:]...)...), peer, ""},
	} {
		got, ok := segment(c.p, c.peer)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: segment = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
}

// TestCounterSection: one section of /proc/net/netstat or snmp, by name,
// prefixed; the other sections and a negative value (Tcp's MaxConn) as
// the kernel writes them.
func TestCounterSection(t *testing.T) {
	out := "TcpExt: SyncookiesSent TCPAOGood\nTcpExt: 0 42\nIpExt: InNoRoutes\nIpExt: 7\n" +
		"Tcp: RtoAlgorithm MaxConn InSegs\nTcp: 1 -1 5041\n"
	m := map[string]uint64{}
	counterSection(out, "TcpExt", "", m)
	counterSection(out, "Tcp", "Tcp.", m)
	want := map[string]uint64{"SyncookiesSent": 0, "TCPAOGood": 42, "Tcp.RtoAlgorithm": 1, "Tcp.MaxConn": 0, "Tcp.InSegs": 5041}
	if len(m) != len(want) {
		t.Fatalf("got %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, m[k], v, m)
		}
	}
}
