package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/keystore/vaulttest"
)

// newVault is the test Vault in memory (its clock is the bubble's) and a
// client with its root token.
func newVault(t *testing.T) (*vaulttest.Server, *api.Client) {
	t.Helper()
	srv, err := vaulttest.New(vaulttest.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, clientFor(t, srv, srv.RootToken())
}

func clientFor(t *testing.T, srv *vaulttest.Server, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(srv.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(token)
	return c
}

// hookVault runs hook before the nth use of the client.
type hookVault struct {
	Vault
	n    atomic.Int32
	at   int32
	hook func()
}

func (h *hookVault) WithClient(ctx context.Context, f func(*api.Client) error) error {
	if h.n.Add(1) == h.at {
		h.hook()
	}
	return h.Vault.WithClient(ctx, f)
}

// Two operators revoking at once: the second writer's check-and-set fails,
// it reads the record again and appends; neither revocation is lost.
func testAddRevocationCheckAndSet(t *testing.T, e *storeEnv) {
	c, prefix := e.root, e.prefix
	other := Store{V: Client{c}, Mount: "secret", Prefix: prefix}
	ctx := context.Background()
	racer := &hookVault{Vault: Client{c}, at: 2, hook: func() {
		// Between our read (use 1) and our write (use 2).
		if _, _, err := other.AddRevocation(ctx, Revocation{Chain: "core", Key: "k9", By: "bob", Reason: "r", At: time.Now()}); err != nil {
			t.Errorf("the other writer: %v", err)
		}
	}}
	st := Store{V: racer, Mount: "secret", Prefix: prefix}
	_, ver, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k1", By: "alice", Reason: "leaked", At: time.Now()})
	if err != nil {
		t.Fatalf("AddRevocation: %v", err)
	}
	l, got, err := st.Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, r := range l.Revocations {
		refs = append(refs, r.Ref()+" by "+r.By)
	}
	if !slices.Equal(refs, []string{"core/k9 by bob", "core/k1 by alice"}) || ver != 2 || got != 2 {
		t.Errorf("record %v at version %d (returned %d), want both revocations at version 2", refs, got, ver)
	}
	had, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k1", By: "carol", Reason: "again", At: time.Now()})
	if !errors.Is(err, ErrAlreadyRevoked) || had.By != "alice" {
		t.Errorf("a second revoke of core/k1: %v, entry by %q; want ErrAlreadyRevoked with alice's entry", err, had.By)
	}
}

// Statuses lists every router's document and reports (not fails on) one
// that does not decode.
func testStatusesSkipsABadDocument(t *testing.T, e *storeEnv) {
	c, prefix := e.root, e.prefix
	st := Store{V: Client{c}, Mount: "secret", Prefix: prefix}
	ctx := context.Background()
	// Vault answers a LIST of nothing with 404: an empty fleet.
	if docs, errs, err := st.Statuses(ctx); err != nil || len(docs) != 0 || len(errs) != 0 {
		t.Errorf("empty fleet: %v %v %v, want nothing and no error", docs, errs, err)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := st.PutStatus(ctx, Document{Schema: Schema, RouterID: id, PublishedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.KVv2("secret").Put(ctx, prefix+"/routers/r3", map[string]any{"router_id": 7}); err != nil {
		t.Fatal(err)
	}
	docs, errs, err := st.Statuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 || docs[0].RouterID != "r1" || docs[1].RouterID != "r2" || len(errs) != 1 {
		t.Errorf("docs %+v errs %v; want r1, r2 and one error for r3", docs, errs)
	}
}

// overlapVault holds each use of the client after the first free ones
// until want of them are in flight at once, or a second passes: it
// records the most it saw.
type overlapVault struct {
	Vault
	free, want int32
	calls, cur atomic.Int32
	most       atomic.Int32
}

func (o *overlapVault) WithClient(ctx context.Context, f func(*api.Client) error) error {
	if o.calls.Add(1) <= o.free {
		return o.Vault.WithClient(ctx, f)
	}
	n := o.cur.Add(1)
	defer o.cur.Add(-1)
	for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
	}
	for deadline := time.Now().Add(time.Second); o.most.Load() < o.want && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return o.Vault.WithClient(ctx, f)
}

// Statuses reads the documents of a fleet at once, not one after the
// other: an operator's view of dozens of routers costs a few round trips
// to Vault, and so does the flag of a lagging link.
func TestStatusesReadsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := newVault(t)
		ctx := context.Background()
		st := Store{V: Client{c}, Mount: "secret", Prefix: "fleet"}
		for i := range 12 {
			id := fmt.Sprintf("r%02d", i)
			if err := st.PutStatus(ctx, Document{Schema: Schema, RouterID: id, PublishedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		ov := &overlapVault{Vault: Client{c}, free: 1, want: readsAtOnce} // the list is free
		st.V = ov
		start := time.Now()
		docs, errs, err := st.Statuses(ctx)
		if err != nil || len(errs) != 0 || len(docs) != 12 {
			t.Fatalf("Statuses: %d docs, %v, %v; want 12", len(docs), errs, err)
		}
		for i, d := range docs {
			if want := fmt.Sprintf("r%02d", i); d.RouterID != want {
				t.Errorf("docs[%d] is %s, want %s (sorted by router)", i, d.RouterID, want)
			}
		}
		if m := ov.most.Load(); m != readsAtOnce {
			t.Errorf("at most %d reads in flight, want %d", m, readsAtOnce)
		}
		// One list, then the 12 reads in two waves that do not wait.
		if took := time.Since(start); took >= time.Second {
			t.Errorf("Statuses took %v of waiting for reads to overlap, want none", took)
		}
	})
}

// testRevocationRecordGone: the record's current version soft-deleted
// (vault kv delete), then destroyed (vault kv destroy). Neither is an
// empty record: Revocations fails naming the version and what to do, so
// the publisher keeps the revocations it read, and AddRevocation fails at
// once with the same words, not after its retries.
func testRevocationRecordGone(t *testing.T, e *storeEnv) {
	c, prefix := e.root, e.prefix
	ctx := context.Background()
	st := Store{V: Client{c}, Mount: "secret", Prefix: prefix}
	if _, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k1", By: "alice", Reason: "leaked", At: time.Now()}); err != nil {
		t.Fatalf("AddRevocation: %v", err)
	}
	kv := c.KVv2("secret")
	for _, step := range []struct {
		name, want string
		do         func() error
	}{
		{"deleted", "version 1 is deleted", func() error { return kv.Delete(ctx, prefix+"/revocations") }},
		{"destroyed", "version 1 is destroyed", func() error { return kv.Destroy(ctx, prefix+"/revocations", []int{1}) }},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		l, ver, err := st.Revocations(ctx)
		if err == nil || !strings.Contains(err.Error(), step.want) {
			t.Errorf("%s: Revocations = %d revocations at version %d, err %v; want an error saying %q", step.name, len(l.Revocations), ver, err, step.want)
		}
		_, _, err = st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k2", By: "bob", Reason: "r", At: time.Now()})
		if err == nil || !strings.Contains(err.Error(), step.want) {
			t.Errorf("%s: AddRevocation: %v; want an error saying %q", step.name, err, step.want)
		}
	}
}
