package daemon_test

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
	"github.com/aokeyd/aokeyd/tcpao"
	vaultapi "github.com/hashicorp/vault/api"
)

// fleetVault is the test Vault in memory with a root-token client.
func fleetVault(t *testing.T) (*vaulttest.Server, *vaultapi.Client) {
	t.Helper()
	srv, err := vaulttest.New(vaulttest.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := vaultapi.NewClient(srv.ClientConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(srv.RootToken())
	return srv, c
}

// leakForms are the ways a key could leak into a document: its bytes in
// the usual encodings, and fingerprints of it (aokeyd's keyed one, plain
// SHA-1 and SHA-256) in hex and base64.
func leakForms(secret string) []string {
	out := secretForms(secret)
	fp := tcpao.NewSecret([]byte(secret)).Fingerprint()
	s1, s256 := sha1.Sum([]byte(secret)), sha256.Sum256([]byte(secret))
	for _, b := range [][]byte{fp[:], s1[:], s256[:], fp[:8], s256[:8]} {
		out = append(out, hex.EncodeToString(b), strings.ToUpper(hex.EncodeToString(b)),
			base64.StdEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b))
	}
	return out
}

// The status document names the session's keys, IDs, current and RNext
// keys, TCP-options setting and counters, and holds no key material: not
// the bytes, not any fingerprint of them, as stored in Vault.
func TestFleetDocumentHoldsNoKeyMaterial(t *testing.T) {
	synctest.Test(t, testFleetDocumentHoldsNoKeyMaterial)
}

func testFleetDocumentHoldsNoKeyMaterial(t *testing.T) {
	_, k1, k2, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	_, c := fleetVault(t)
	st := fleet.Store{V: fleet.Client{C: c}, Mount: "secret", Prefix: "aokeyd/fleet"}
	p := fleet.NewPublisher(fleet.Options{Store: st, RouterID: "r1", Refresh: time.Second,
		Status: func(ctx context.Context) (control.StatusReport, error) { return e.d.Status(ctx, "") }, Revoke: e.d.RevokeFleet})
	p.Round(context.Background())

	resp, err := c.Logical().ReadRawWithContext(context.Background(), "secret/data/aokeyd/fleet/routers/r1")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []testKey{k1, k2} {
		for _, f := range leakForms(k.secret) {
			if strings.Contains(string(raw), f) {
				t.Errorf("the published document holds key %s's material (%q)", k.name, f)
			}
		}
	}
	for _, field := range []string{"fingerprint", "secret", "\"key\":"} {
		if strings.Contains(strings.ToLower(string(raw)), field) {
			t.Errorf("the published document has a %s field", field)
		}
	}
	docs, _, err := st.Statuses(context.Background())
	if err != nil || len(docs) != 1 || len(docs[0].Peers) != 1 {
		t.Fatalf("documents %+v, %v", docs, err)
	}
	pe := docs[0].Peers[0]
	var names []string
	for _, k := range pe.Keys {
		names = append(names, k.Ref())
		if !k.IncludeTCPOptions {
			t.Errorf("key %s published as excluding TCP options", k.Ref())
		}
	}
	slices.Sort(names)
	if pe.ID != peer.KeyOf(peerAddr, "") || pe.Local != localAddr || pe.Current == "" || pe.RNext == "" ||
		!slices.Equal(names, []string{"core/k1", "core/k2"}) || !slices.Contains(docs[0].Addresses, localAddr) {
		t.Errorf("published peer %+v (addresses %v)", pe, docs[0].Addresses)
	}
}

// A fleet revocation read from Vault takes the key off the session and the
// listener at the router's next round, is recorded as seen and clean, and
// is not written back to the key source (the fleet record holds it).
func TestFleetRevokeAppliedAtNextRound(t *testing.T) {
	synctest.Test(t, testFleetRevokeAppliedAtNextRound)
}

func testFleetRevokeAppliedAtNextRound(t *testing.T) {
	_, k1, k2, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	_, c := fleetVault(t)
	st := fleet.Store{V: fleet.Client{C: c}, Mount: "secret", Prefix: "aokeyd/fleet"}
	const refresh = 2 * time.Second
	p := fleet.NewPublisher(fleet.Options{Store: st, RouterID: "r1", Refresh: refresh,
		Status: func(ctx context.Context) (control.StatusReport, error) { return e.d.Status(ctx, "") }, Revoke: e.d.RevokeFleet})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	synctest.Wait()

	written := time.Now()
	if _, _, err := st.AddRevocation(ctx, fleet.Revocation{Chain: chainName, Key: k1.name, By: "alice", Reason: "leaked", At: written}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the revocation clean in the published document", func() bool {
		docs, _, err := st.Statuses(ctx)
		return err == nil && len(docs) == 1 && len(docs[0].Revocations) == 1 && !docs[0].Revocations[0].Clean.IsZero()
	})
	a := p.Last().Revocations[0]
	if d := a.Clean.Sub(written); d > refresh {
		t.Errorf("clean %s after the write, want within one refresh (%s)", d, refresh)
	}
	if a.Sockets == 0 || a.Error != "" {
		t.Errorf("applied %+v", a)
	}
	if got := keyIDs(t, e.acc); slices.Contains(got, k1.ids()) {
		t.Errorf("session keys %v still hold %s", got, k1.ids())
	}
	if got := keysFor(t, e.lis, peerHost); slices.Contains(got, k1.ids()) {
		t.Errorf("listener keys %v still hold %s", got, k1.ids())
	}
	if calls := e.src.revokeCalls(); len(calls) != 0 {
		t.Errorf("a fleet revocation wrote to the key source: %v", calls)
	}
}

// blockedVault never answers until its context ends: the publisher's
// round hangs on it.
type blockedVault struct{}

func (blockedVault) WithClient(ctx context.Context, _ func(*vaultapi.Client) error) error {
	<-ctx.Done()
	return ctx.Err()
}

// A hung Vault holds up the publisher only: the daemon goes on
// reconciling (a new key reaches the session's socket meanwhile).
func TestFleetPublisherNeverBlocksReconcile(t *testing.T) {
	synctest.Test(t, testFleetPublisherNeverBlocksReconcile)
}

func testFleetPublisherNeverBlocksReconcile(t *testing.T) {
	k0, k1, k2, _ := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k2}})
	e.waitKeys("listener", e.lis, ids(k1, k2))
	e.up(ids(k1, k2), k2, k1)
	p := fleet.NewPublisher(fleet.Options{Store: fleet.Store{V: blockedVault{}, Mount: "secret", Prefix: "f"}, RouterID: "r1",
		Refresh: time.Hour, Status: func(ctx context.Context) (control.StatusReport, error) { return e.d.Status(ctx, "") },
		Revoke: e.d.RevokeFleet})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Run(ctx) }()
	for range 100 {
		p.Wake()
	}
	e.refreshWith(k0, k1, k2)
	e.waitKeys("session", e.acc, ids(k0, k1, k2))
}
