package fleet

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/internal/kvv2"
	"github.com/aokeyd/aokeyd/keystore"
)

// unavailableOps runs each operation of st once and checks that it fails
// with a *kvv2.UnavailableError for the Vault at addr, sealed or not as
// sealed says, whose text names that Vault and the fix and shows none of
// the tokens. None may answer an empty record or fleet as if it were
// Vault's. With late > 0 each operation has that long, and Vault is too
// slow for it: the error must say it gave no answer in time.
func unavailableOps(t *testing.T, st Store, addr string, sealed bool, late time.Duration, tokens ...string) {
	t.Helper()
	fix := "start Vault"
	switch {
	case sealed:
		fix = "unseal it (vault operator unseal)"
	case late > 0:
		fix = "gave no answer in time: "
	}
	var ctx context.Context
	var cancel context.CancelFunc
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"Revocations", func() error { _, _, err := st.Revocations(ctx); return err }},
		{"RevocationsVersion", func() error { _, err := st.RevocationsVersion(ctx); return err }},
		{"Statuses", func() error { _, _, err := st.Statuses(ctx); return err }},
		{"PutStatus", func() error {
			return st.PutStatus(ctx, Document{Schema: Schema, RouterID: "r1", PublishedAt: time.Now()})
		}},
		{"AddRevocation", func() error {
			_, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k2", By: "bob", Reason: "r", At: time.Now()})
			return err
		}},
	} {
		ctx, cancel = context.Background(), func() {}
		if late > 0 {
			ctx, cancel = context.WithTimeout(ctx, late)
		}
		err := op.do()
		cancel()
		var ue *kvv2.UnavailableError
		if !errors.As(err, &ue) || ue.Sealed != sealed || ue.Vault != addr || (late > 0) != ue.Late {
			t.Errorf("%s: %v; want an UnavailableError for %s, sealed %t", op.name, err, addr, sealed)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "vault at "+addr) || !strings.Contains(msg, fix) || strings.Contains(msg, "\n") {
			t.Errorf("%s: %q; want one line naming the Vault at %s and the fix %q", op.name, msg, addr, fix)
		}
		for _, tok := range tokens {
			if tok != "" && strings.Contains(msg, tok) {
				t.Errorf("%s: a token in the error", op.name)
			}
		}
	}
}

// testVaultDown: Vault sealed (then unsealed) or stopped (then started on
// the same address with its data). Meanwhile every operation of the store
// fails with an UnavailableError naming the Vault and the fix; after, the
// same Store reads the record and the document written before, nothing
// lost, and check-and-set still refuses a stale write.
func testVaultDown(sealed bool) func(t *testing.T, e *storeEnv) {
	return func(t *testing.T, e *storeEnv) {
		ctx := context.Background()
		down, up := e.stop, e.start
		if sealed {
			down, up = e.seal, e.unseal
		}
		st := Store{V: Client{e.root}, Mount: "secret", Prefix: e.prefix}
		if _, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k1", By: "alice", Reason: "leaked", At: time.Now()}); err != nil {
			t.Fatalf("AddRevocation: %v", err)
		}
		if err := st.PutStatus(ctx, Document{Schema: Schema, RouterID: "r0", PublishedAt: time.Now()}); err != nil {
			t.Fatalf("PutStatus: %v", err)
		}
		down(t)
		unavailableOps(t, st, e.addr, sealed, 0, e.root.Token())
		up(t)
		l, ver, err := st.Revocations(ctx)
		if err != nil || ver != 1 || len(l.Revocations) != 1 || l.Revocations[0].Ref() != "core/k1" {
			t.Fatalf("the record after: %+v at version %d, %v; want core/k1 at version 1", l.Revocations, ver, err)
		}
		docs, errs, err := st.Statuses(ctx)
		if err != nil || len(errs) != 0 || len(docs) != 1 || docs[0].RouterID != "r0" {
			t.Errorf("the fleet after: %+v %v %v; want r0's document only", docs, errs, err)
		}
		// A writer that read version 0 (before the record existed) is
		// refused; the record stays at version 1.
		stale := RevocationList{Schema: Schema, Revocations: []Revocation{{Chain: "core", Key: "stale", By: "mallory", At: time.Now()}}}
		err = st.put(ctx, "revocations", stale, 0)
		var re *api.ResponseError
		if !errors.As(err, &re) || re.StatusCode != http.StatusBadRequest {
			t.Errorf("a write with a stale check-and-set version: %v; want Vault's 400", err)
		}
		if _, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k2", By: "bob", Reason: "r", At: time.Now()}); err != nil {
			t.Fatalf("AddRevocation after: %v", err)
		}
		l, ver, err = st.Revocations(ctx)
		var refs []string
		for _, r := range l.Revocations {
			refs = append(refs, r.Ref())
		}
		if err != nil || ver != 2 || !slices.Equal(refs, []string{"core/k1", "core/k2"}) {
			t.Errorf("the record at the end: %v at version %d, %v; want core/k1, core/k2 at version 2", refs, ver, err)
		}
		if sealed && !t.Failed() {
			e.count(t, "sealed_ok", 1)
		}
	}
}

// testAppRoleSource: the store as aokeyd builds it, on its key source (a
// keystore.VaultSource, here logged in with AppRole): it publishes and
// revokes with the role's token, logs in again when that token dies, and
// a sealed Vault reached through it is an UnavailableError too, after
// which the same store works again.
func testAppRoleSource(t *testing.T, e *storeEnv) {
	ctx := context.Background()
	rf, sf := e.appRole(t)
	src, err := keystore.NewVault(keystore.VaultOptions{Config: e.config(),
		Auth: keystore.VaultAuth{Method: "approle", RoleIDFile: rf, SecretIDFile: sf}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	st := Store{V: src, Mount: "secret", Prefix: e.prefix}
	if err := st.PutStatus(ctx, Document{Schema: Schema, RouterID: "r1", PublishedAt: time.Now()}); err != nil {
		t.Fatalf("PutStatus with the AppRole token: %v", err)
	}
	if _, ver, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k1", By: "r1", Reason: "leaked", At: time.Now()}); err != nil || ver != 1 {
		t.Fatalf("AddRevocation with the AppRole token: version %d, %v", ver, err)
	}
	first := src.Client().Token()
	if first == "" || first == e.root.Token() {
		t.Fatal("the store did not use an AppRole token")
	}
	e.kill(t, first)
	if _, ver, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k2", By: "r1", Reason: "r", At: time.Now()}); err != nil || ver != 2 {
		t.Fatalf("AddRevocation after the token died: version %d, %v", ver, err)
	}
	second := src.Client().Token()
	if second == first || second == "" {
		t.Fatal("no new AppRole login after the token died")
	}
	e.seal(t)
	unavailableOps(t, st, e.addr, true, 0, e.root.Token(), first, second)
	e.unseal(t)
	l, ver, err := st.Revocations(ctx)
	if err != nil || ver != 2 || len(l.Revocations) != 2 {
		t.Errorf("the record after unseal: %d revocations at version %d, %v; want 2 at version 2", len(l.Revocations), ver, err)
	}
	if !t.Failed() {
		e.count(t, "approle_relogins", 1)
	}
}

// testVaultSlow: Vault slower than a request may wait (a delay on the
// store's paths, the test server's Delay or the fault proxy's Slow in
// front of real Vault). Each operation fails with an UnavailableError
// saying that Vault gave no answer in time, not a bare "context deadline
// exceeded"; the record is as it was, and once Vault answers in time the
// same Store reads it.
func testVaultSlow(t *testing.T, e *storeEnv) {
	c, addr, slow := e.slowClient(t)
	st := Store{V: Client{c}, Mount: "secret", Prefix: e.prefix}
	ctx := context.Background()
	if _, _, err := st.AddRevocation(ctx, Revocation{Chain: "core", Key: "k1", By: "alice", Reason: "leaked", At: time.Now()}); err != nil {
		t.Fatalf("AddRevocation: %v", err)
	}
	const delay = time.Second
	slow(delay)
	unavailableOps(t, st, addr, false, delay/2, e.root.Token())
	slow(0)
	// The requests held when their time ran out end too: the test
	// server's handler waits its delay out.
	time.Sleep(delay)
	if l, ver, err := st.Revocations(ctx); err != nil || ver != 1 || len(l.Revocations) != 1 {
		t.Errorf("the record after: %d revocations at version %d, %v; want 1 at version 1", len(l.Revocations), ver, err)
	}
}
