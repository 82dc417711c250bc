// Command probe is the field scenario's eye on the kernel (issue 48): the
// scenario is shell, as an operator's would be, and what it checks comes
// from the sockets, not from aokeyd's word.
//
//	probe keys PID|PIDFILE PEER    the TCP-AO keys the speaker's listeners and
//	                            its sessions with PEER hold for PEER:
//	                            "listener=S/R,... session=S/R,... current=S rnext=R"
//	probe unsigned FROM TO      exit 0 when an unsigned connection from
//	                            address FROM to TO:179 is taken (an unsigned
//	                            window), 1 when it is not
//	probe algs ADDR             TCP_AO_ADD_KEY of each algorithm on a
//	                            listener on ADDR: the kernel's answer
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/tcpao"
)

func main() {
	if len(os.Args) < 3 || (os.Args[1] != "algs" && len(os.Args) < 4) {
		fmt.Fprintln(os.Stderr, "usage: probe keys PIDFILE PEER | probe unsigned FROM TO")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "keys":
		if err := keys(os.Args[2], netip.MustParseAddr(os.Args[3])); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(2)
		}
	case "unsigned":
		from, to := netip.MustParseAddr(os.Args[2]), netip.MustParseAddr(os.Args[3])
		d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: from.AsSlice()}}
		d.SetMultipathTCP(false) // a plain TCP SYN, as a BGP peer's
		c, err := d.Dial("tcp", netip.AddrPortFrom(to, 179).String())
		if err != nil {
			fmt.Println("not taken:", err)
			os.Exit(1)
		}
		c.Close()
		fmt.Println("TAKEN: an unsigned connection was accepted")
	case "algs": // probe algs ADDR: TCP_AO_ADD_KEY of each algorithm on a listener
		// Plain TCP, and Multipath TCP (Go's default for listeners since
		// 1.24), which refuses every TCP-AO key (tcpao.ErrMPTCP).
		for _, mptcp := range []bool{false, true} {
			for _, a := range tcpao.Algorithms {
				var lc net.ListenConfig
				lc.SetMultipathTCP(mptcp)
				ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(os.Args[2], "0"))
				if err != nil {
					fmt.Println(err)
					os.Exit(2)
				}
				rc, _ := ln.(*net.TCPListener).SyscallConn()
				secret := []byte("field-probe-secret")
				if a == tcpao.CMACAES128 {
					secret = secret[:16]
				}
				err = tcpao.New(rc).AddKey(tcpao.Key{KeyRef: tcpao.KeyRef{Peer: netip.MustParsePrefix("192.0.2.2/32"), SendID: 1, RecvID: 1},
					Algorithm: a, Secret: tcpao.NewSecret(secret)}, tcpao.AddOptions{})
				fmt.Printf("mptcp=%v %s: %v (ErrMPTCP %v)\n", mptcp, a, err, errors.Is(err, tcpao.ErrMPTCP))
				ln.Close()
			}
		}
	default:
		os.Exit(2)
	}
}

func keys(pidArg string, peer netip.Addr) error {
	pid, err := strconv.Atoi(pidArg) // a pid, or a pid file
	if err != nil {
		if pid, err = frr.FindPID(pidArg, ""); err != nil {
			return err
		}
	}
	var cur, rnext string
	read := func(refs []sockets.Ref, session bool) []string {
		var out []string
		for _, r := range refs {
			_ = sockets.System{}.With(r, func(fd int) error {
				ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
				for _, k := range ks {
					if !k.Peer.Contains(peer) {
						continue
					}
					out = append(out, fmt.Sprintf("%d/%d", k.SendID, k.RecvID))
					if session && k.IsCurrent {
						cur = fmt.Sprint(k.SendID)
					}
					if session && k.IsRNext {
						rnext = fmt.Sprint(k.RecvID)
					}
				}
				return err
			})
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	lis, err := sockets.System{}.Listeners(pid, 179)
	if err != nil {
		return err
	}
	conns, err := sockets.System{}.Connections(pid, peer)
	if err != nil {
		return err
	}
	fmt.Printf("listener=%s session=%s current=%s rnext=%s\n", strings.Join(read(lis, false), ","),
		strings.Join(read(conns, true), ","), cur, rnext)
	return nil
}
