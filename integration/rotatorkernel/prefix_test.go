//go:build linux

package rotatorkernel

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestKernelPrefixSessionLaggingPeer: the listener holds the peer's key for
// a prefix (127.0.0.0/8); the accepted socket carries it with that prefix,
// and the planner takes it for the desired key whether that names the host
// or the prefix (take-over writes nothing). A new key the peer lacks is
// added to the established socket and announced, but Current_key (sampled
// all along, data flowing all along) never becomes it; the roll aborts and
// retries; once the peer has the key and asks for it, the roll completes.
func TestKernelPrefixSessionLaggingPeer(t *testing.T) {
	kerneltest.Require(t)
	for _, peer := range []string{"127.0.0.1/32", "127.0.0.0/8"} {
		t.Run(peer, func(t *testing.T) {
			a, b := mkKey(peer, 1, 1, "prefix-a"), mkKey(peer, 2, 2, "prefix-b")
			s := dialSessionKeys(t, mkKey("127.0.0.0/8", 1, 1, "prefix-a"), mkKey("127.0.0.1/32", 1, 1, "prefix-a"))
			obs := observe(t, s.srvS)
			if len(obs.Keys) != 1 || obs.Keys[0].Peer.String() != "127.0.0.0/8" {
				t.Fatalf("accepted socket keys %+v, want the listener's key for 127.0.0.0/8", obs.Keys)
			}
			d := rotator.Desired{Kind: rotator.Established, Keys: []rotator.DesiredKey{dk(a)}, WantCurrent: rotator.ID(1), WantRNext: rotator.ID(1)}
			if sp := rotator.PlanSocket(d, obs); !sp.Empty() || len(sp.Blocked) > 0 {
				t.Fatalf("plan for the inherited key: %v, want nothing", planText(sp))
			}
			cfg := rotator.Config{SwitchTimeout: time.Second, Grace: 200 * time.Millisecond, Poll: 20 * time.Millisecond, Backoff: 300 * time.Millisecond, MaxBackoff: time.Second}
			us := rotator.NewController(rotator.Options{Config: cfg})
			defer us.Close()
			us.SetDesired(pid("client"), d)
			if sp, err := us.Accepted(pid("client"), s.srvS); err != nil || len(sp.Ops) > 0 {
				t.Fatalf("take-over wrote %v (%v), want nothing", planText(sp), err)
			}

			var samples, early atomic.Int64
			var peerHas atomic.Bool
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
					has := peerHas.Load()
					if in, err := s.srvS.Info(); err == nil && in.HaveCurrent {
						samples.Add(1)
						if in.CurrentKey == b.SendID && !has {
							early.Add(1)
						}
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()

			us.SetDesired(pid("client"), rotator.Desired{Kind: rotator.Established, Keys: []rotator.DesiredKey{{Key: a, AcceptOnly: true}, dk(b)}, WantCurrent: rotator.ID(2), WantRNext: rotator.ID(2)})
			waitFor(t, "two aborted attempts", time.Minute, func() bool { s.check(t); return statusOf(us, pid("client")).Attempts >= 2 })
			if st := statusOf(us, pid("client")); !strings.Contains(st.LastAbort, fmt.Sprintf("did not send with key recv=%d", b.RecvID)) || st.Rolls != 0 {
				t.Fatalf("status %+v, want aborts saying why and no roll", st)
			}

			// The peer gets b and asks for it with its RNext.
			peerHas.Store(true)
			if err := s.cliS.AddKey(mkKey("127.0.0.1/32", 2, 2, "prefix-b"), tcpao.AddOptions{SetRNext: true}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the roll to b", 30*time.Second, func() bool { s.check(t); return statusOf(us, pid("client")).Rolls == 1 })
			if cur, err := s.srvS.Keys(tcpao.KeyFilter{Current: true}); err != nil || len(cur) != 1 || cur[0].SendID != b.SendID {
				t.Fatalf("server current %+v (%v), want b", cur, err)
			}
			before := s.received()
			waitFor(t, "data still flowing", 30*time.Second, func() bool { s.check(t); return s.received() > before+4096 })
			for side, sock := range map[string]tcpao.Socket{"server": s.srvS, "client": s.cliS} {
				if in, err := sock.Info(); err != nil || in.PktBad != 0 || in.PktKeyNotFound != 0 {
					t.Fatalf("%s: pkt_bad=%d key_not_found=%d (%v)", side, in.PktBad, in.PktKeyNotFound, err)
				}
			}
			t.Logf("Current_key samples %d, with b before the peer had it %d", samples.Load(), early.Load())
			if early.Load() != 0 {
				t.Fatalf("b was Current_key in %d of %d samples before the peer had it", early.Load(), samples.Load())
			}
		})
	}
}
