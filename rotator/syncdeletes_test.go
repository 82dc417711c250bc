package rotator

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestSyncListenerSyncDeletes: ListenerOptions.SyncDeletes (set on a
// kernel with a del_async defect, tcpao.SyncListenerDeletes) turns every
// listener delete the in-memory kernel sees from del_async into a
// synchronous one, across batches, and the plan SyncListener returns says
// so; without it the same rotation deletes with del_async. A key still
// Current_key from before listen() is refused with the same typed error
// either way, and no delete reads a freed key.
func TestSyncListenerSyncDeletes(t *testing.T) {
	const peers = 5
	peer := func(i int) string { return fmt.Sprintf("192.0.2.%d/32", 10+i) }
	cases := []struct {
		name        string
		syncDeletes bool
		staleCur    bool // the first peer's old key set Current_key before listen()
		batch       int
		want        tcpaotest.ListenerDeletes
		wantErr     error
		left        int
	}{
		{name: "del_async", batch: 2, want: tcpaotest.ListenerDeletes{Async: peers}, left: peers},
		{name: "sync deletes", syncDeletes: true, batch: 2, want: tcpaotest.ListenerDeletes{Sync: peers}, left: peers},
		{name: "sync deletes, one batch", syncDeletes: true, batch: 64, want: tcpaotest.ListenerDeletes{Sync: peers}, left: peers},
		{name: "stale current, del_async", staleCur: true, batch: 64, want: tcpaotest.ListenerDeletes{Async: peers - 1},
			wantErr: tcpao.ErrListenerKeyInUse, left: peers + 1},
		{name: "stale current, sync deletes", syncDeletes: true, staleCur: true, batch: 64, want: tcpaotest.ListenerDeletes{Sync: peers - 1},
			wantErr: tcpao.ErrListenerKeyInUse, left: peers + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := tcpaotest.NewNet(tcpaotest.WithKernelBugs(tcpaotest.BugAsyncDelInUse))
			s, err := n.Socket(netip.MustParseAddr("192.0.2.1"))
			must(t, err)
			var want []DesiredKey
			for i := range peers {
				o := tcpao.AddOptions{}
				if c.staleCur && i == 0 {
					o = tcpao.AddOptions{SetCurrent: true, SetRNext: true}
				}
				must(t, s.AddKey(mkKey(peer(i), 1, 1, "old"), o))
				want = append(want, dk(mkKey(peer(i), 2, 2, "new")))
			}
			must(t, s.Listen())
			// The first peer's key, installed first, is the kernel's last
			// listed and so deleted last: its refusal ends the run.
			sp, err := SyncListener(s, Desired{Socket: "lis", Kind: Listening, Keys: want},
				ListenerOptions{PeersPerBatch: c.batch, SyncDeletes: c.syncDeletes})
			if c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("SyncListener error %v, want %v", err, c.wantErr)
			}
			if got := n.ListenerDeletes(); got != c.want {
				t.Fatalf("the kernel saw listener deletes %+v, want %+v", got, c.want)
			}
			dels, async := 0, 0
			for _, l := range opLines(sp) {
				if strings.HasPrefix(l, "del ") {
					dels++
					if strings.Contains(l, " async") {
						async++
					}
				}
			}
			if dels == 0 || c.syncDeletes && async != 0 || !c.syncDeletes && async != dels {
				t.Fatalf("returned plan: %d of %d deletes async, sync deletes %v:\n%s", async, dels, c.syncDeletes, strings.Join(opLines(sp), "\n"))
			}
			if uaf := n.UseAfterFree(); uaf != 0 {
				t.Fatalf("%d reads of a freed key", uaf)
			}
			ks, err := s.Keys(tcpao.KeyFilter{})
			must(t, err)
			if len(ks) != c.left {
				t.Fatalf("%d keys left on the listener, want %d", len(ks), c.left)
			}
		})
	}
}
