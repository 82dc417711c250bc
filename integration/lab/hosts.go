package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// RequireNetns skips the test unless network namespaces can be made here
// (root and iproute2); inside the guest VM, where they always can, it fails
// instead.
func RequireNetns(t testing.TB) {
	t.Helper()
	if ok, why := netns.Available(); !ok {
		if kerneltest.InGuest() {
			t.Fatal(why)
		}
		t.Skip(why)
	}
}

// NSName names one of a test's namespaces (side "a", "b", ...): unique per
// test and process, so tests can run in parallel and next to another run
// (addresses may repeat: each pair of namespaces is its own world).
func NSName(t testing.TB, side string) string {
	return fmt.Sprintf("ao%08x-%d-%s", crc32.ChecksumIEEE([]byte(t.Name())), os.Getpid()%100000, side)
}

// Pair makes the two hosts of a test: namespaces a and b (named by NSName)
// joined by a veth pair, veth-a in a with address addrA and veth-b in b with
// addrB (CIDR notation), both up. Both are removed when the test ends.
func Pair(t testing.TB, addrA, addrB netip.Prefix) (a, b *netns.NS) {
	t.Helper()
	a = netns.New(t, NSName(t, "a"))
	b = netns.New(t, NSName(t, "b"))
	netns.Link(t, a, "veth-a", addrA.String(), b, "veth-b", addrB.String())
	return a, b
}

// DialFrom connects to dst from inside ns within timeout; control, if not
// nil, runs on the socket before connect (e.g. to set keys).
func DialFrom(ns *netns.NS, dst netip.AddrPort, timeout time.Duration, control func(fd int) error) (net.Conn, error) {
	var c net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Timeout: timeout}
		d.SetMultipathTCP(false) // control may key it: plain TCP (tcpao.ErrMPTCP)
		if control != nil {
			d.ControlContext = func(_ context.Context, _, _ string, rc syscall.RawConn) error {
				var cerr error
				if err := rc.Control(func(fd uintptr) { cerr = control(int(fd)) }); err != nil {
					return err
				}
				return cerr
			}
		}
		var err error
		c, err = d.Dial("tcp", dst.String())
		return err
	})
	return c, err
}

// Unanswered reports whether a dial failed the way a SYN that a keyed
// listener drops does: a timeout (or the connection closed unanswered).
func Unanswered(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF)
}

// logTail is how much of a log LogFile prints when the test fails.
const logTail = 256 << 10

// LogFile opens the log file of a process the test starts (appending: a
// restarted process's log follows its predecessor's); when the test fails,
// its tail is logged once, at the end of the test.
func LogFile(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, seen := logged.LoadOrStore(path, true); !seen {
		t.Cleanup(func() {
			logged.Delete(path)
			if t.Failed() {
				Dump(t, filepath.Base(path)+" (tail)", Tail(path, logTail))
			}
		})
	}
	return f
}

// logged holds the paths whose tail LogFile prints on failure.
var logged sync.Map

// Tail is the last n bytes of the file at path (what could be read).
//
// A Go goroutine dump at the end (a failed test's aokeyd gets SIGQUIT
// before its log is dumped, see StartAokeyd) does not eat the budget: the
// log before it keeps its last n bytes and the dump its first n.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	i := bytes.Index(b, []byte(goroutineDump))
	if i < 0 {
		return tail(b, n)
	}
	d := b[i:]
	if len(d) > n {
		d = d[:n]
	}
	return fmt.Sprintf("%s\n--- goroutine dump (%d bytes, the first %d):\n%s...", tail(b[:i], n), len(b)-i, len(d), d)
}

// goroutineDump starts the Go runtime's dump on SIGQUIT.
const goroutineDump = "SIGQUIT: quit\n"

func tail(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}

// InfoLines is the last n lines of an aokeyd JSON log at level info or
// above (debug lines and a goroutine dump left out).
func InfoLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "{") && !strings.Contains(l, `"level":"DEBUG"`) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep[max(0, len(keep)-n):], "\n")
}
