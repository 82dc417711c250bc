package tcpao_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestProbeAlgorithmsOn: a kernel whose crypto API lacks an algorithm
// (the in-memory kernel told to refuse it, ENOENT like Linux) is reported
// refusing that one and accepting the rest; the scratch sockets are
// released.
func TestProbeAlgorithmsOn(t *testing.T) {
	for _, refused := range [][]tcpao.Algorithm{nil, {tcpao.CMACAES128}, {tcpao.HMACSHA1, tcpao.HMACSHA256}} {
		n := tcpaotest.NewNet(tcpaotest.WithoutAlgorithms(refused...))
		open, closed := 0, 0
		got := tcpao.ProbeAlgorithmsOn(func() (tcpao.Socket, func(), error) {
			s, err := n.Socket(netip.MustParseAddr("192.0.2.1"))
			open++
			return s, func() { closed++; _ = s.Close() }, err
		}, netip.MustParsePrefix("192.0.2.2/32"))
		for _, a := range tcpao.Algorithms {
			want := false
			for _, r := range refused {
				want = want || r == a
			}
			if err := got[a]; errors.Is(err, tcpao.ErrAlgorithmRefused) != want || (!want && err != nil) {
				t.Errorf("refusing %v: %s: %v, want refused %v", refused, a, err, want)
			}
		}
		if open != len(tcpao.Algorithms) || closed != open {
			t.Errorf("%d scratch sockets opened, %d released; want %d each", open, closed, len(tcpao.Algorithms))
		}
	}
}
