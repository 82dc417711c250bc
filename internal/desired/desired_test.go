package desired

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

func TestPlanLines(t *testing.T) {
	peer := netip.MustParsePrefix("192.0.2.2/32")
	key := func(send, recv uint8) rotator.DesiredKey {
		return rotator.DesiredKey{Key: tcpao.Key{
			KeyRef:    tcpao.KeyRef{Peer: peer, SendID: send, RecvID: recv},
			Algorithm: tcpao.HMACSHA256, MACLen: 12, Secret: tcpao.NewSecret([]byte("0123456789abcdef")),
		}}
	}
	tests := []struct {
		name string
		in   []rotator.Input
		want []string
	}{
		{"nothing to plan", nil, nil},
		{"a socket with nothing to do", []rotator.Input{{Desired: rotator.Desired{Socket: "s1", Kind: rotator.Listening}}},
			[]string{"s1 listening ok"}},
		{"one line per op, sockets in order", []rotator.Input{
			{Desired: rotator.Desired{Socket: "s1", Kind: rotator.Listening, Keys: []rotator.DesiredKey{key(1, 2), key(3, 4)}}},
			{Desired: rotator.Desired{Socket: "s2", Kind: rotator.Listening}},
		}, []string{
			"s1 listening 1. add send=1 recv=2 peer=192.0.2.2/32 alg=hmac(sha256) maclen=12 (new)",
			"s1 listening 2. add send=3 recv=4 peer=192.0.2.2/32 alg=hmac(sha256) maclen=12 (new)",
			"s2 listening ok",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PlanLines(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("PlanLines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}
