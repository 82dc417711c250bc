package policy_test

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/policy"
)

// TestPolicyRetainsNoNodeTree: a parsed policy costs the daemon what its
// bindings need, not yaml.v3's node tree of the file (about 1.1 KB a
// peer, kept for the daemon's lifetime: 4.6 MB of make bench's daemon
// item at 4,096 peers). A route server's policy lists each peer.
func TestPolicyRetainsNoNodeTree(t *testing.T) {
	const n = 4096
	var b strings.Builder
	b.WriteString("version: 1\nkey_chains:\n  - name: core\npeers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - neighbor: %s\n    key_chain: core\n", netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}))
	}
	text := []byte(b.String())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p, err := policy.Parse("route-server.yaml", text)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPeer := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d peers: %d bytes a peer retained (the policy text is %d bytes a peer)", n, perPeer, len(text)/n)
	if perPeer > 700 {
		t.Errorf("a parsed policy of %d peers retains %d bytes a peer, want at most 700", n, perPeer)
	}
	runtime.KeepAlive(p)
}
