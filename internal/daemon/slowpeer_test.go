package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// stuckSpeaker is a speaker whose answer about one neighbor, once armed,
// never comes (until the test ends): a query for that neighbor, and a
// listing of every neighbor (which holds its answer), block without
// looking at their context. Everything else answers at once.
type stuckSpeaker struct {
	*bgptest.Speaker
	stuck   netip.Addr
	armed   atomic.Bool
	release chan struct{}
	once    sync.Once
	blocked atomic.Int32 // calls blocked right now
}

func (s *stuckSpeaker) block() {
	s.blocked.Add(1)
	defer s.blocked.Add(-1)
	<-s.release
}

func (s *stuckSpeaker) unblock() { s.once.Do(func() { close(s.release) }) }

func (s *stuckSpeaker) Peers(ctx context.Context) ([]bgp.PeerInfo, error) {
	if s.armed.Load() {
		s.block()
	}
	return s.Speaker.Peers(ctx)
}

func (s *stuckSpeaker) Peer(ctx context.Context, k peer.Key) (bgp.PeerInfo, error) {
	if s.armed.Load() && k.Addr == s.stuck {
		s.block()
	}
	return s.Speaker.Peer(ctx, k)
}

// TestOneStuckPeerHoldsUpNoOther: the speaker's answer about 192.0.2.9
// never comes (and its event stream is down, so the guard asks it) while
// every session retires its old key. Every other peer
// completes its roll on the roll's own schedule, the reconcile pass that
// started the rolls finishes, status answers, and the stuck peer's status
// says what it waits for (and it keeps both keys).
func TestOneStuckPeerHoldsUpNoOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		k0 := testKey{name: "k0", send: 10, recv: 11, secret: "slow-peer-test-secret-k0-Tz8", sendStart: now.Add(-2 * time.Hour)}
		k1 := testKey{name: "k1", send: 20, recv: 21, secret: "slow-peer-test-secret-k1-Wq3", sendStart: now.Add(-time.Hour)}
		stuck := netip.MustParseAddr("192.0.2.9")
		fast := []netip.Addr{netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3"),
			netip.MustParseAddr("192.0.2.4"), netip.MustParseAddr("192.0.2.5")}
		all := append(slices.Clone(fast), stuck)

		pol := "version: 1\nsafety:\n  switch_timeout: 5m\nkey_chains:\n  - name: core\npeers:\n"
		var infos []bgp.PeerInfo
		for _, a := range all {
			pol += fmt.Sprintf("  - neighbor: %s\n    key_chain: core\n", a)
			infos = append(infos, bgp.PeerInfo{Neighbor: a, Local: localAddr, State: bgp.StateActive, Passive: true, PeerASN: 65002})
		}
		src := &fakeSource{}
		defer src.close()
		setKeys := func(keys ...testKey) {
			mkts := make([]keystore.MKT, len(keys))
			for i, k := range keys {
				mkts[i] = k.mkt()
			}
			src.setKeys(mkts...)
			for i := range mkts {
				mkts[i].Zero()
			}
		}
		setKeys(k0, k1)
		sp := &stuckSpeaker{Speaker: bgptest.NewSpeaker("stuck-speaker", speakerPID, 16, infos...), stuck: stuck, release: make(chan struct{})}
		defer sp.unblock() // before the daemon stops (deferred later, so run earlier)
		net, disc := tcpaotest.NewNet(), newFakeDiscoverer()
		lis, _ := listenOn(t, net, disc)
		cache := keystore.NewCache(src, keystore.CacheOptions{})
		defer cache.Close()
		logs := &testkit.SyncBuffer{}
		d, err := daemon.New(daemon.Options{
			Policy: parsePolicy(t, pol), Keys: cache, Source: src, Speaker: sp, Discoverer: disc, ListenPort: bgpPort,
			Rotator: rotator.Config{SwitchTimeout: 5 * time.Second, Grace: 20 * time.Millisecond,
				Poll: 10 * time.Millisecond, Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond},
			Resync: time.Hour, OptMemMax: func() (int, error) { return net.OptMemMax(), nil },
			Logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			SocketOf: disc.socketOf,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		defer func() {
			sp.unblock()
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()
		waitFor := func(what string, within time.Duration, cond func() bool) {
			t.Helper()
			if !testkit.Until(within, cond) {
				t.Fatalf("not within %s: %s\nlogs:\n%s", within, what, logs.String())
			}
		}
		// status calls the control backend's Status and fails the test when
		// it does not answer within 3 seconds (a speaker that does not answer
		// costs status at most 2).
		status := func() control.StatusReport {
			t.Helper()
			type res struct {
				rep control.StatusReport
				err error
			}
			ch := make(chan res, 1)
			go func() {
				rep, err := d.Status(context.Background(), "")
				ch <- res{rep, err}
			}()
			select {
			case r := <-ch:
				if r.err != nil {
					t.Fatalf("Status: %v", r.err)
				}
				return r.rep
			case <-time.After(3 * time.Second):
				t.Fatalf("Status did not answer within 3s\nlogs:\n%s", logs.String())
			}
			panic("unreachable")
		}
		waitFor("the listener's keys", time.Minute, func() bool { return slices.Equal(slices.Compact(keyIDs(t, lis)), ids(k0, k1)) })

		accs := map[netip.Addr]*tcpaotest.Sock{}
		for _, a := range all {
			client, err := net.Socket(a)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []testKey{k0, k1} { // k1 last: the router's current key
				m := k.mirror()
				if err := client.AddKey(m, tcpao.AddOptions{}); err != nil {
					t.Fatal(err)
				}
				m.Secret.Zero()
			}
			acc, err := net.Connect(client, lis)
			if err != nil {
				t.Fatalf("connect %s: %v", a, err)
			}
			disc.add(acc, netip.AddrPortFrom(localAddr, bgpPort), client.LocalAddr(), false)
			accs[a] = acc
			sp.Set(bgp.PeerInfo{Neighbor: a, Local: localAddr, LocalPort: bgpPort, RemotePort: client.LocalAddr().Port(),
				State: bgp.StateEstablished, Uptime: time.Now().Add(-time.Minute).Truncate(time.Second), Passive: true, PeerASN: 65002})
		}
		waitFor("every session managed and steady", time.Minute, func() bool {
			rep := status()
			if len(rep.Peers) != len(all) {
				return false
			}
			for _, p := range rep.Peers {
				if p.Rotation.State != string(rotator.StateSteady) {
					return false
				}
			}
			return true
		})

		// From now on the speaker never answers about 192.0.2.9. The source
		// drops k0: every session retires it (a guarded step).
		sp.armed.Store(true)
		// ... and its event stream breaks, so that the session guard,
		// which answers from the followed session state while the stream
		// vouches for it, asks the speaker about each peer.
		sp.Lose()
		synctest.Wait()
		_, full0 := d.Passes()
		setKeys(k1)
		if err := d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The roll's own schedule: grace 20ms, polls of 10ms.
		waitFor("every other peer's roll", time.Second, func() bool {
			for _, a := range fast {
				if !slices.Equal(keyIDs(t, accs[a]), ids(k1)) {
					return false
				}
			}
			return true
		})
		waitFor("the reconcile pass to finish", time.Second, func() bool { _, full := d.Passes(); return full > full0 })
		waitFor("the speaker asked about 192.0.2.9", time.Second, func() bool { return sp.blocked.Load() > 0 })

		rep := status()
		var got []string
		for _, p := range rep.Peers {
			got = append(got, p.Peer)
			switch {
			case p.Peer == stuck.String():
				if want := "speaker: session state of 192.0.2.9"; p.Rotation.Waiting != want {
					t.Errorf("stuck peer's rotation waits for %q, want %q (rotation %+v)", p.Rotation.Waiting, want, p.Rotation)
				}
			case p.Rotation.State != string(rotator.StateSteady) || p.Rotation.Waiting != "":
				t.Errorf("peer %s rotation %+v, want steady, waiting for nothing", p.Peer, p.Rotation)
			}
		}
		if len(got) != len(all) {
			t.Errorf("status lists peers %v, want all of %v", got, all)
		}
		if ks := keyIDs(t, accs[stuck]); !slices.Equal(ks, ids(k0, k1)) {
			t.Errorf("the stuck peer's keys %v, want %v untouched", ks, ids(k0, k1))
		}
	})
}
