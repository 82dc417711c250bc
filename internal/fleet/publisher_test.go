package fleet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// countMetrics is a fleet.Metrics that counts.
type countMetrics struct {
	mu        sync.Mutex
	failed    map[string]int
	published time.Time
}

func (c *countMetrics) FleetFailed(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failed == nil {
		c.failed = map[string]int{}
	}
	c.failed[op]++
}

func (c *countMetrics) FleetPublished(at time.Time) { c.mu.Lock(); c.published = at; c.mu.Unlock() }

func (c *countMetrics) get(op string) (int, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed[op], c.published
}

// fakeDaemon answers Status with one established peer and records Revoke
// calls; kept makes the revoke leave the key on a socket.
type fakeDaemon struct {
	mu      sync.Mutex
	revokes []string
	kept    bool
	unknown bool
}

func (f *fakeDaemon) status(context.Context) (control.StatusReport, error) {
	return control.StatusReport{Peers: []control.PeerStatus{{
		Peer: "10.0.0.2", SessionState: "established",
		Sockets: []control.Socket{{Kind: control.KindEstablished, Local: "10.0.0.1:179", Remote: "10.0.0.2:40000"}},
		Keys: []control.Key{{Chain: "core", Name: "k1", SendID: 1, RecvID: 2, Alg: "hmac(sha256)", TCPOptions: control.TCPOptionsExclude,
			Current: true, RNext: true, State: control.KeyInstalled}},
		Rotation: control.Rotation{State: "steady"},
		Counters: control.Counters{PktGood: 10, PktBad: 1, PktKeyNotFound: 2},
	}}}, nil
}

func (f *fakeDaemon) revoke(_ context.Context, chain, key string) (control.RevokeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revokes = append(f.revokes, chain+"/"+key)
	if f.unknown {
		return control.RevokeResult{}, control.ErrNotFound
	}
	act := control.ActionForcedReplaced
	if f.kept {
		act = control.ActionKept
	}
	return control.RevokeResult{Chain: chain, Key: key, Sockets: []control.RevokeSocket{{Socket: "peer 10.0.0.2", Action: act}}}, nil
}

func (f *fakeDaemon) calls() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.revokes) }

func TestPublisherPublishesAndAppliesRevocations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := newVault(t)
		st := Store{V: Client{c}, Mount: "secret", Prefix: "aokeyd/fleet"}
		fd := &fakeDaemon{kept: true}
		p := NewPublisher(Options{Store: st, RouterID: "r1", Addresses: []string{"192.0.2.1"}, Refresh: time.Second,
			SwitchTimeout: time.Minute, Status: fd.status, Revoke: fd.revoke})
		ctx := context.Background()
		p.Round(ctx)
		docs, _, err := st.Statuses(ctx)
		if err != nil || len(docs) != 1 {
			t.Fatalf("docs %+v, %v", docs, err)
		}
		d := docs[0]
		pe := d.Peers[0]
		if d.RouterID != "r1" || len(d.Addresses) != 2 || pe.Local.String() != "10.0.0.1" || pe.Current != "core/k1" || pe.RNext != "core/k1" ||
			pe.Keys[0].IncludeTCPOptions || pe.Counters.PktKeyNotFound != 2 || pe.CurrentSince.IsZero() || time.Duration(d.Refresh) != time.Second {
			t.Errorf("document %+v", d)
		}
		at := time.Now()
		if _, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k1", By: "alice", Reason: "leaked", At: at}); err != nil {
			t.Fatal(err)
		}
		applied := func() Applied {
			t.Helper()
			docs, _, err := st.Statuses(ctx)
			if err != nil || len(docs) != 1 || len(docs[0].Revocations) != 1 {
				t.Fatalf("docs %+v, %v", docs, err)
			}
			return docs[0].Revocations[0]
		}
		// The only key, kept by policy: seen, not clean, tried again.
		time.Sleep(time.Second)
		p.Round(ctx)
		a := applied()
		if a.Seen.IsZero() || !a.Clean.IsZero() || a.Error == "" || !a.At.Equal(at) {
			t.Errorf("kept key: %+v, want seen, not clean, with the reason", a)
		}
		fd.mu.Lock()
		fd.kept = false
		fd.mu.Unlock()
		time.Sleep(time.Second)
		p.Round(ctx)
		a = applied()
		if a.Clean.IsZero() || a.Error != "" || a.Sockets != 1 || !a.Clean.After(a.Seen) {
			t.Errorf("cleaned: %+v", a)
		}
		p.Round(ctx)
		if fd.calls() != 2 {
			t.Errorf("revoke applied %d times, want twice (kept, then clean) and not again", fd.calls())
		}
	})
}

// A key this router's source lacks is clean at once, and applied again
// each round in case the key appears.
func TestPublisherRevocationNotInSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := newVault(t)
		st := Store{V: Client{c}, Mount: "secret", Prefix: "f"}
		fd := &fakeDaemon{unknown: true}
		p := NewPublisher(Options{Store: st, RouterID: "r1", Refresh: time.Second, Status: fd.status, Revoke: fd.revoke})
		ctx := context.Background()
		if _, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "zz", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		p.Round(ctx)
		first := p.Last().Revocations[0]
		time.Sleep(time.Second)
		p.Round(ctx)
		a := p.Last().Revocations[0]
		if !a.NotInSource || a.Clean.IsZero() || !a.Clean.Equal(first.Clean) || fd.calls() != 2 {
			t.Errorf("applied %+v (first %+v), %d calls", a, first, fd.calls())
		}
	})
}

// Vault down: the round fails, is counted and logged, and the publisher
// goes on; Wake never blocks even with nobody running.
func TestPublisherSurvivesVaultDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := newVault(t)
		m := &countMetrics{}
		st := Store{V: Client{c}, Mount: "secret", Prefix: "f"}
		fd := &fakeDaemon{}
		p := NewPublisher(Options{Store: st, RouterID: "r1", Refresh: time.Second, Status: fd.status, Revoke: fd.revoke, Metrics: m})
		for range 10 {
			p.Wake()
		}
		srv.Seal()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if n, _ := m.get(OpPublish.String()); n < 2 {
			t.Errorf("publish errors %v, want one per round", n)
		}
		srv.Unseal()
		time.Sleep(time.Second)
		synctest.Wait()
		if p.Last().RouterID != "r1" {
			t.Error("nothing published after Vault came back")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if _, at := m.get(""); errors.Is(ctx.Err(), context.Canceled) && at.IsZero() {
			t.Error("last publish time not set")
		}
	})
}

// TestPublishWaitsForNoRevocationRead: a round writes the document while
// it reads the revocation record, not after: a slow record read (3 s
// here) does not hold up the document a wake asked for (a roll's announce,
// which the far end's view waits on). A revocation the read finds is still
// applied in the same round, and the document published again with it.
// Before, the round read the record first and wrote the document after.
func TestPublishWaitsForNoRevocationRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, c := newVault(t)
		st := Store{V: Client{c}, Mount: "secret", Prefix: "f"}
		fd := &fakeDaemon{}
		p := NewPublisher(Options{Store: st, RouterID: "r1", Refresh: 10 * time.Second, Status: fd.status, Revoke: fd.revoke})
		ctx := context.Background()
		if _, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k1", By: "alice", At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		srv.Delay("secret/metadata/f/revocations", 3*time.Second)
		start := time.Now()
		done := make(chan struct{})
		go func() { p.Round(ctx); close(done) }()
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		docs, _, err := st.Statuses(ctx)
		if err != nil || len(docs) != 1 {
			t.Fatalf("100 ms into a round whose record read takes 3 s: docs %+v (%v), want the document written", docs, err)
		}
		if len(docs[0].Revocations) != 0 {
			t.Fatalf("the first document holds revocations %+v before the record was read", docs[0].Revocations)
		}
		<-done
		if took := time.Since(start); took < 3*time.Second {
			t.Fatalf("the round took %s, want it to wait for the record read (3 s)", took)
		}
		docs, _, err = st.Statuses(ctx)
		if err != nil || len(docs) != 1 || len(docs[0].Revocations) != 1 || docs[0].Revocations[0].Clean.IsZero() {
			t.Fatalf("after the round: docs %+v (%v), want the revocation applied and published", docs, err)
		}
		if fd.calls() != 1 {
			t.Fatalf("revoke applied %d times, want once", fd.calls())
		}
		if got := p.Last().Revocations; len(got) != 1 {
			t.Fatalf("Last() revocations %+v, want the one applied", got)
		}
	})
}
