package integration

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestBIRDSpeaksTCPAO proves the independent peer of the end-to-end tests
// works with this kernel and these bindings: BIRD 2.17 in one namespace
// connects to a listener in another that carries an AO key put there by
// tcpao; with the right key the connection is accepted and BIRD's BGP OPEN
// arrives, with a wrong key nothing is accepted and the listener counts the
// refused segments.
func TestBIRDSpeaksTCPAO(t *testing.T) {
	kerneltest.Require(t)
	secret := []byte("bird-interop-smoke-key")
	cases := []struct {
		name     string
		birdKey  []byte
		wantOpen bool
	}{
		{"right key", secret, true},
		{"wrong key", []byte("not-the-right-key-at-all"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := lab.Pair(t, netip.MustParsePrefix("10.255.1.1/30"), netip.MustParsePrefix("10.255.1.2/30"))

			var ln net.Listener
			err := a.Do(func() error {
				lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
					return tcpao.New(rc).AddKey(tcpao.Key{
						KeyRef:    tcpao.KeyRef{Peer: netip.MustParsePrefix("10.255.1.2/32"), SendID: 2, RecvID: 1},
						Algorithm: tcpao.HMACSHA256,
						Secret:    tcpao.NewSecret(secret),
					}, tcpao.AddOptions{})
				}}
				lc.SetMultipathTCP(false) // keyed: plain TCP (tcpao.ErrMPTCP)
				var err error
				ln, err = lc.Listen(context.Background(), "tcp4", "10.255.1.1:179")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()

			bird.Start(t, b, bird.Config{
				RouterID: "10.255.1.2", LocalAddr: "10.255.1.2", LocalAS: 65002,
				Neighbor: "10.255.1.1", PeerAS: 65001,
				Keys: []bird.Key{{SendID: 1, RecvID: 2, Secret: tc.birdKey, Algorithm: "hmac sha256", Preferred: true}},
			})

			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err == nil {
					accepted <- c
				}
			}()
			wait := 20 * time.Second
			if !tc.wantOpen {
				wait = 8 * time.Second // BIRD retries every 2 s: several tries
			}
			select {
			case c := <-accepted:
				defer c.Close()
				if !tc.wantOpen {
					t.Fatal("a connection signed with the wrong key was accepted")
				}
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				hdr := make([]byte, 19)
				if _, err := io.ReadFull(c, hdr); err != nil {
					t.Fatalf("reading BIRD's OPEN: %v", err)
				}
				if !bytes.Equal(hdr[:16], bytes.Repeat([]byte{0xff}, 16)) || hdr[18] != 1 {
					t.Fatalf("not a BGP OPEN: % x", hdr)
				}
				sc, err := c.(*net.TCPConn).SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				keys, err := tcpao.New(sc).Keys(tcpao.KeyFilter{})
				if err != nil {
					t.Fatal(err)
				}
				if len(keys) != 1 || keys[0].SendID != 2 || keys[0].RecvID != 1 || keys[0].PktGood == 0 {
					t.Fatalf("accepted socket keys = %+v, want the listener's key with pkt_good > 0", keys)
				}
			case <-time.After(wait):
				if tc.wantOpen {
					t.Fatal("BIRD's connection with the right key was not accepted")
				}
				rc, err := ln.(*net.TCPListener).SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				info, err := tcpao.New(rc).Info()
				if err != nil && !errors.Is(err, syscall.ENOENT) {
					t.Fatal(err)
				}
				if info.PktBad == 0 {
					t.Fatalf("listener counters %+v: want pkt_bad > 0 for BIRD's wrongly signed SYNs", info)
				}
				t.Logf("wrong key refused: listener pkt_bad=%d", info.PktBad)
			}
		})
	}
}
