package rotator

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// The listener path on kernels with the two TCP_AO_DEL_KEY bugs fixed
// upstream in the stable trees (tcpao.DeleteKey): a VRF-scoped key that the
// kernel cannot delete gives a clear, typed error (not a bare ENOENT), one
// that is gone after an ENOENT is not an error, and a key that is still
// Current_key/RNext_key of the listener (set before listen()) is never
// deleted with del_async, so nothing reads freed memory. Each case is also
// run on a fixed kernel, where every delete must succeed.
func TestListenerDeleteKernelBugs(t *testing.T) {
	const vrf = 7
	vrfKey := func(send, recv uint8, sec string) tcpao.Key {
		k := mkKey("192.0.2.2/32", send, recv, sec)
		k.IfIndex = vrf
		return k
	}
	cases := []struct {
		name    string
		bugs    tcpaotest.Bug
		setup   func(t *testing.T, s *tcpaotest.Sock) // on the closed socket, before listen()
		want    []DesiredKey
		wantErr error // nil: the sync converges
		left    int   // keys left on the listener
	}{
		{name: "vrf key, fixed kernel", setup: func(t *testing.T, s *tcpaotest.Sock) {
			must(t, s.AddKey(vrfKey(1, 1, "old"), tcpao.AddOptions{}))
		}, want: []DesiredKey{dk(vrfKey(2, 2, "new"))}, left: 1},
		{name: "vrf key, ENOENT bug", bugs: tcpaotest.BugVRFDelete, setup: func(t *testing.T, s *tcpaotest.Sock) {
			must(t, s.AddKey(vrfKey(1, 1, "old"), tcpao.AddOptions{}))
		}, want: []DesiredKey{dk(vrfKey(2, 2, "new"))}, wantErr: tcpao.ErrKernelVRFDelete, left: 2},
		{name: "stale current, fixed kernel", setup: func(t *testing.T, s *tcpaotest.Sock) {
			must(t, s.AddKey(mkKey("192.0.2.2/32", 1, 1, "old"), tcpao.AddOptions{SetCurrent: true, SetRNext: true}))
		}, want: []DesiredKey{dk(mkKey("192.0.2.2/32", 2, 2, "new"))}, wantErr: tcpao.ErrListenerKeyInUse, left: 2},
		{name: "stale current, async bug", bugs: tcpaotest.BugAsyncDelInUse, setup: func(t *testing.T, s *tcpaotest.Sock) {
			must(t, s.AddKey(mkKey("192.0.2.2/32", 1, 1, "old"), tcpao.AddOptions{SetCurrent: true, SetRNext: true}))
		}, want: []DesiredKey{dk(mkKey("192.0.2.2/32", 2, 2, "new"))}, wantErr: tcpao.ErrListenerKeyInUse, left: 2},
		{name: "not current, async bug", bugs: tcpaotest.BugAsyncDelInUse, setup: func(t *testing.T, s *tcpaotest.Sock) {
			must(t, s.AddKey(mkKey("192.0.2.2/32", 1, 1, "old"), tcpao.AddOptions{}))
		}, want: []DesiredKey{dk(mkKey("192.0.2.2/32", 2, 2, "new"))}, left: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := tcpaotest.NewNet(tcpaotest.WithVRF(vrf), tcpaotest.WithKernelBugs(c.bugs))
			s, err := n.Socket(netip.MustParseAddr("192.0.2.1"))
			must(t, err)
			c.setup(t, s)
			must(t, s.Listen())
			_, err = SyncListener(s, Desired{Socket: "lis", Kind: Listening, Keys: c.want}, ListenerOptions{})
			switch {
			case c.wantErr == nil && err != nil:
				t.Fatalf("SyncListener: %v", err)
			case c.wantErr != nil && !errors.Is(err, c.wantErr):
				t.Fatalf("SyncListener error %v, want %v", err, c.wantErr)
			}
			if _, err := s.Info(); err != nil && !errors.Is(err, syscall.ENOENT) {
				t.Fatal(err)
			}
			if uaf := n.UseAfterFree(); uaf != 0 {
				t.Fatalf("%d reads of a freed key after the sync", uaf)
			}
			ks, err := s.Keys(tcpao.KeyFilter{})
			must(t, err)
			if len(ks) != c.left {
				t.Fatalf("%d keys left on the listener, want %d: %v", len(ks), c.left, ks)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
