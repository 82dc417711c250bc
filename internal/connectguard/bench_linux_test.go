//go:build linux

package connectguard

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// BenchmarkConnect measures connect+close to a loopback listener from inside
// a program: unfiltered, supervised but continued (unmanaged port), and
// supervised with keys installed (through pidfd_getfd on the real socket;
// the TCP_AO_ADD_KEY itself goes to a recorder so the host can run it).
// The ns/connect metric is timed inside the program; the difference to
// "direct" is the supervision overhead per connect.
func BenchmarkConnect(b *testing.B) {
	ln := acceptConns(b, "tcp4", "127.0.0.1:0", true)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	peer := netip.MustParseAddr("127.0.0.1")
	keys := func(int, netip.AddrPort) ([]tcpao.Key, uint8, uint8, bool) { return testKeys(peer), 1, 2, true }

	b.Run("direct", func(b *testing.B) {
		cmd := exec.Command(os.Args[0], "cg-connector")
		in, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { in.Close(); _ = cmd.Wait() }()
		benchConnects(b, in, bufio.NewScanner(out), ln.Addr().String())
	})
	for _, tc := range []struct {
		name  string
		ports []uint16
	}{{"continued", []uint16{port + 1}}, {"keyed", []uint16{port}}} {
		b.Run(tc.name, func(b *testing.B) {
			p := launchConnector(b)
			events, _ := startSupervisor(b, p.sock, keys, SupervisorOptions{Ports: tc.ports, Socket: newRecorder().socket})
			go func() {
				for range events { // Observe must not block the supervisor
				}
			}()
			benchConnects(b, p.in, nil, ln.Addr().String(), p)
		})
	}
}

func benchConnects(b *testing.B, in interface{ Write([]byte) (int, error) }, sc *bufio.Scanner, addr string, p ...*supervised) {
	b.Helper()
	if _, err := fmt.Fprintf(in, "bench %s %d\n", addr, b.N); err != nil {
		b.Fatal(err)
	}
	var line string
	if len(p) > 0 {
		line = p[0].line(10 * time.Minute)
	} else if sc.Scan() {
		line = sc.Text()
	}
	v, ok := strings.CutPrefix(line, "bench ")
	ns, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil {
		b.Fatalf("connector: %q", line)
	}
	b.ReportMetric(float64(ns), "ns/connect")
}
