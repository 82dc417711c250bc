package keystore

import (
	"fmt"
	"strings"
	"testing"
)

// A route server or a large PE binds hundreds of neighbors to one chain;
// the decoder's hostile-input bound on a chain's peer list sits far above
// that, and past it the chain is refused with the count and the limit.
func TestChainPeerListLimit(t *testing.T) {
	sec := loadSecrets(t)
	doc := func(n int) []byte {
		peers := make([]string, n)
		for i := range peers {
			peers[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		}
		return fmt.Appendf(nil, "chains:\n  core:\n    peers: [%s]\n    keys:\n      - {name: k, send_id: 1, recv_id: 2, algorithm: sha1, secret_b64: %q}\n",
			strings.Join(peers, ", "), b64(sec[0]))
	}
	for _, tc := range []struct {
		n    int
		want string // "" for accepted
	}{
		{1, ""},
		{512, ""},
		{maxPeers, ""},
		{maxPeers + 1, fmt.Sprintf("more than %d peers", maxPeers)},
	} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			s, err := DecodeFile("keys.yaml", doc(tc.n))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%d peers: %v", tc.n, err)
				}
				defer s.Zero()
				if c := s.Chains["core"]; c == nil || len(c.Keys) != 1 || len(c.Keys[0].Peers) != tc.n {
					t.Fatalf("%d peers: chain %+v", tc.n, c)
				}
				return
			}
			if err == nil {
				s.Zero()
				t.Fatalf("%d peers accepted, want %q", tc.n, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "peers") {
				t.Fatalf("%d peers: error %q, want it to say %q and name the field", tc.n, err, tc.want)
			}
		})
	}
}
