package speakerbench

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// sniff records, for d, the TCP segments to or from peer that cross
// interface ifname in ns (the guest root has no tcpdump): one line each,
// with the time since the start, the direction, addresses, flags,
// sequence numbers and the TCP options' kinds (29 is TCP-AO). It is a
// diagnostic for a set-up that did not finish, never a measurement.
func sniff(ns *netns.NS, ifname string, peer netip.Addr, d time.Duration) (string, error) {
	var fd int
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(ifname)
		if err != nil {
			return err
		}
		proto := htons(unix.ETH_P_IP)
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
			unix.Close(fd)
			return fmt.Errorf("bind %s: %w", ifname, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 2048)
	start := time.Now()
	for time.Since(start) < d {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue // the timeout, or an interrupted read
		}
		if line, ok := segment(buf[:n], peer); ok {
			dir := "in "
			if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
				dir = "out"
			}
			fmt.Fprintf(&b, "    %6.3fs %s %s %s\n", time.Since(start).Seconds(), ifname, dir, line)
		}
	}
	return b.String(), nil
}

// segment renders an IPv4 TCP segment to or from peer.
func segment(p []byte, peer netip.Addr) (string, bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != unix.IPPROTO_TCP {
		return "", false
	}
	ihl := int(p[0]&0xf) * 4
	src, _ := netip.AddrFromSlice(p[12:16])
	dst, _ := netip.AddrFromSlice(p[16:20])
	if src != peer && dst != peer || len(p) < ihl+20 {
		return "", false
	}
	t := p[ihl:]
	off := int(t[12]>>4) * 4
	if off < 20 || len(t) < off {
		return "", false
	}
	var flags []string
	for i, name := range []string{"F", "S", "R", "P", ".", "U"} {
		if t[13]&(1<<i) != 0 {
			flags = append(flags, name)
		}
	}
	var kinds []string
	for o := t[20:off]; len(o) > 0; {
		switch o[0] {
		case 0:
			o = nil
		case 1:
			o = o[1:]
		default:
			if len(o) < 2 || int(o[1]) < 2 || int(o[1]) > len(o) {
				o = nil
				continue
			}
			k := fmt.Sprint(o[0])
			if o[0] == 29 && o[1] >= 4 {
				k = fmt.Sprintf("ao(key=%d,rnext=%d)", o[2], o[3])
			}
			kinds = append(kinds, k)
			o = o[o[1]:]
		}
	}
	return fmt.Sprintf("%s:%d > %s:%d [%s] seq=%d ack=%d len=%d opts=%s",
		src, binary.BigEndian.Uint16(t[0:2]), dst, binary.BigEndian.Uint16(t[2:4]), strings.Join(flags, ""),
		binary.BigEndian.Uint32(t[4:8]), binary.BigEndian.Uint32(t[8:12]), len(t)-off, strings.Join(kinds, ",")), true
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// wire is what crosses both ends of the link for peer during d (sniff),
// with the TCP and TcpExt counters that moved meanwhile, gobgpd's
// listener's socket memory and the kernel's last messages.
func (f *bench) wire(peer netip.Addr, d time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "wire for %s over %v:\n", peer, d)
	ca, _ := tcpCounters(f.a)
	cb, _ := tcpCounters(f.b)
	type res struct {
		s   string
		err error
	}
	ra, rb := make(chan res, 1), make(chan res, 1)
	go func() { s, err := sniff(f.a, "veth-a", peer, d); ra <- res{s, err} }()
	go func() { s, err := sniff(f.b, "veth-b", peer, d); rb <- res{s, err} }()
	for _, r := range []res{<-ra, <-rb} {
		b.WriteString(r.s)
		if r.err != nil {
			fmt.Fprintf(&b, "    sniff: %v\n", r.err)
		}
	}
	for _, side := range []struct {
		name   string
		ns     *netns.NS
		before map[string]uint64
	}{{"A", f.a, ca}, {"B", f.b, cb}} {
		after, _ := tcpCounters(side.ns)
		var moved []string
		for k, v := range after {
			if v != side.before[k] {
				moved = append(moved, fmt.Sprintf("%s+%d", k, v-side.before[k]))
			}
		}
		slices.Sort(moved)
		fmt.Fprintf(&b, "  %s's counters that moved: %s\n", side.name, strings.Join(moved, " "))
	}
	lis, _ := f.a.Run("ss", "-ltnmH", "sport", "179")
	fmt.Fprintf(&b, "  A's listeners:\n%s\n", lis)
	if out, err := exec.Command("dmesg").CombinedOutput(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		fmt.Fprintf(&b, "  dmesg (tail):\n%s\n", strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
	return b.String()
}

// tcpCounters are a namespace's TCP and TcpExt counters (prefixed Tcp. and
// TcpExt.).
func tcpCounters(ns *netns.NS) (map[string]uint64, error) {
	m := map[string]uint64{}
	for _, src := range []struct{ file, section string }{{"/proc/net/netstat", "TcpExt"}, {"/proc/net/snmp", "Tcp"}} {
		out, err := ns.Run("cat", src.file)
		if err != nil {
			return m, err
		}
		counterSection(out, src.section, src.section+".", m)
	}
	return m, nil
}
