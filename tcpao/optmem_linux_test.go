//go:build linux

package tcpao_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

// speakerIn starts a stand-in speaker process inside ns and returns its
// pid. Its first line of output comes from inside the namespace (ip netns
// exec has entered it and exec'd the shell, which keeps the pid), so once
// it is read the pid's network namespace is ns: no polling of /proc.
func speakerIn(t *testing.T, ns *netns.NS) int {
	t.Helper()
	cmd := ns.Command("sh", "-c", "echo ready; exec sleep 600")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the stand-in speaker in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the stand-in speaker in %s said %q (%v), want ready", ns.Name, line, err)
	}
	return cmd.Process.Pid
}

func optMemIn(t *testing.T, ns *netns.NS) int {
	t.Helper()
	out := ns.MustRun(t, "cat", tcpao.OptMemPath)
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRaiseOptMemIn: the limit is raised in the speaker's network
// namespace, not aokeyd's, and never lowered.
func TestRaiseOptMemIn(t *testing.T) {
	if ok, why := netns.Available(); !ok {
		t.Skip(why)
	}
	ns := netns.New(t, "aooptmem")
	pid := speakerIn(t, ns)
	own0, err := tcpao.OptMemMax()
	if err != nil {
		t.Fatal(err)
	}
	start := optMemIn(t, ns)
	tests := []struct {
		name       string
		want       int
		wantBefore int
		wantAfter  int
	}{
		{"raise", start + 1<<20, start, start + 1<<20},
		{"never lower", start, start + 1<<20, start + 1<<20},
		{"raise again", start + 2<<20, start + 1<<20, start + 2<<20},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, after, err := tcpao.RaiseOptMemIn(pid, tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if before != tc.wantBefore || after != tc.wantAfter {
				t.Errorf("before %d after %d, want %d and %d", before, after, tc.wantBefore, tc.wantAfter)
			}
			if got := optMemIn(t, ns); got != tc.wantAfter {
				t.Errorf("the speaker's namespace has %d, want %d", got, tc.wantAfter)
			}
			if own, _ := tcpao.OptMemMax(); own != own0 {
				t.Errorf("aokeyd's own namespace changed from %d to %d", own0, own)
			}
		})
	}
	if _, _, err := tcpao.RaiseOptMemIn(1<<30, 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no such pid: %v, want ErrNotExist", err)
	}
}

// TestRaiseOptMemInTakesKeys: on the real kernel a listener in the
// speaker's namespace is refused the key past the namespace's default
// optmem_max, and takes them all once RaiseOptMemIn raised it.
func TestRaiseOptMemInTakesKeys(t *testing.T) {
	kerneltest.Require(t)
	if ok, why := netns.Available(); !ok {
		t.Fatal(why)
	}
	ns := netns.New(t, "aooptkeys")
	pid := speakerIn(t, ns)
	limit := optMemIn(t, ns)
	fit := tcpao.OptMemMaxKeys(limit, tcpao.HMACSHA1)
	n := fit + 200
	addKeys := func() (added int, err error) {
		err = ns.Do(func() error {
			var lc net.ListenConfig
			lc.SetMultipathTCP(false) // an MPTCP listener takes no key (ErrMPTCP)
			ln, err := lc.Listen(context.Background(), "tcp4", "127.0.0.1:0")
			if err != nil {
				return err
			}
			defer ln.Close()
			rc, err := ln.(*net.TCPListener).SyscallConn()
			if err != nil {
				return err
			}
			s := tcpao.New(rc)
			for i := 0; i < n; i++ {
				k := tcpao.Key{
					KeyRef:    tcpao.KeyRef{Peer: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), SendID: 1, RecvID: 1},
					Algorithm: tcpao.HMACSHA1,
					Secret:    tcpao.NewSecret([]byte("optmem-test-secret")),
				}
				if err := s.AddKey(k, tcpao.AddOptions{}); err != nil {
					return err
				}
				added++
			}
			return nil
		})
		return added, err
	}
	added, err := addKeys()
	if !errors.Is(err, syscall.ENOMEM) || added != fit {
		t.Fatalf("at the namespace's default %d: %d keys then %v, want %d then ENOMEM", limit, added, err, fit)
	}
	want := tcpao.OptMemNeeded(n, tcpao.HMACSHA1) * 2
	before, after, err := tcpao.RaiseOptMemIn(pid, want)
	if err != nil || before != limit || after != want {
		t.Fatalf("RaiseOptMemIn: before %d after %d err %v, want %d, %d", before, after, err, limit, want)
	}
	if added, err := addKeys(); err != nil || added != n {
		t.Fatalf("after raising to %d: %d keys then %v, want all %d", want, added, err, n)
	}
	t.Logf("optmem_max %d -> %d in the speaker's namespace: %d hmac(sha1) keys fit, %d before", before, after, n, fit)
}
