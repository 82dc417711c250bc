package daemon_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// A lossy key source: a read that succeeds but loses keys (a key edited
// into an invalid one, a chain emptied, renamed or deleted) must change
// nothing installed, warn, and keep doing so across a restart of aokeyd.

// keyDoc renders one key of a chain document (JSON, which is YAML too).
func keyDoc(k testKey, alg, secretB64 string) string {
	s := fmt.Sprintf(`{"name": %q, "send_id": %d, "recv_id": %d, "algorithm": %q, "secret_b64": %q`,
		k.name, k.send, k.recv, alg, secretB64)
	if !k.sendStart.IsZero() {
		s += fmt.Sprintf(`, "send_lifetime": {"start": %q}`, k.sendStart.UTC().Format(time.RFC3339Nano))
	}
	return s + "}"
}

func goodKeyDoc(k testKey) string {
	return keyDoc(k, "hmac(sha256)", base64.StdEncoding.EncodeToString([]byte(k.secret)))
}

// chainDoc is one chain document for the test neighbor.
func chainDoc(keys ...string) string {
	return fmt.Sprintf(`{"peers": ["%s"], "keys": [%s]}`, peerAddr, strings.Join(keys, ", "))
}

// keyFile renders a key file of chain name -> chain document.
func keyFile(chains map[string]string) string {
	var parts []string
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range chains {
			if !yield(n) {
				return
			}
		}
	}) {
		parts = append(parts, fmt.Sprintf("%q: %s", n, chains[n]))
	}
	return `{"chains": {` + strings.Join(parts, ", ") + "}}\n"
}

type lossyCase struct {
	name string
	// keys are the chain's keys before the fault; the peer holds them all
	// and sends with the last one (the newest).
	keys []testKey
	// fault is the chain's new document; "" removes the chain (renamed to
	// core-renamed, or deleted in Vault).
	fault string
	vault bool
	// warn are the words the status warning must carry.
	warn []string
}

func lossyCases() []lossyCase {
	k0, k1, _, _ := testKeys()
	long := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", 81)))
	return []lossyCase{
		{name: "only key: 81-byte secret", keys: []testKey{k1},
			fault: chainDoc(keyDoc(k1, "hmac(sha256)", long)), warn: []string{chainName, k1.name, "secret"}},
		{name: "only key: hmac(md5)", keys: []testKey{k1},
			fault: chainDoc(keyDoc(k1, "hmac(md5)", base64.StdEncoding.EncodeToString([]byte(k1.secret)))), warn: []string{chainName, k1.name, "algorithm"}},
		{name: "only key: bad base64", keys: []testKey{k1},
			fault: chainDoc(keyDoc(k1, "hmac(sha256)", "not*base64!")), warn: []string{chainName, k1.name, "secret_b64"}},
		{name: "chain emptied", keys: []testKey{k1}, fault: chainDoc(), warn: []string{chainName, "kept"}},
		{name: "chain renamed", keys: []testKey{k1}, fault: "", warn: []string{chainName, "kept"}},
		{name: "vault chain deleted", keys: []testKey{k1}, fault: "", vault: true, warn: []string{chainName, "kept"}},
		{name: "newest key invalid", keys: []testKey{k0, k1},
			fault: chainDoc(goodKeyDoc(k0), keyDoc(k1, "hmac(sha256)", long)), warn: []string{chainName, k1.name, "secret"}},
	}
}

// lossySource is a key file or a Vault that the test can put a fault into.
type lossySource struct {
	source keystore.Source
	apply  func(t *testing.T, faultDoc string)
}

func newFileLossy(t *testing.T, c lossyCase) lossySource {
	p := filepath.Join(t.TempDir(), "keys.yaml")
	write := func(chains map[string]string) {
		if err := os.WriteFile(p, []byte(keyFile(chains)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var docs []string
	for _, k := range c.keys {
		docs = append(docs, goodKeyDoc(k))
	}
	write(map[string]string{chainName: chainDoc(docs...)})
	fs, err := keystore.NewFile(keystore.FileOptions{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	return lossySource{source: fs, apply: func(t *testing.T, fault string) {
		if fault == "" { // renamed
			write(map[string]string{chainName + "-renamed": chainDoc(docs...)})
			return
		}
		write(map[string]string{chainName: fault})
	}}
}

// newVaultLossy is a Vault source over the fake Vault, in memory: server
// and client run in the test's bubble.
func newVaultLossy(t *testing.T, c lossyCase) lossySource {
	srv, err := vaulttest.New(vaulttest.Options{RootToken: "hvs.lossy-root", InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	v, err := keystore.NewVault(keystore.VaultOptions{Config: srv.ClientConfig(), Auth: keystore.VaultAuth{Token: srv.RootToken()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	var docs []string
	for _, k := range c.keys {
		docs = append(docs, goodKeyDoc(k))
	}
	other := testKey{name: "o1", send: 50, recv: 51, secret: "daemon-test-secret-other-Pq1"}
	ctx := context.Background()
	for name, doc := range map[string]string{chainName: chainDoc(docs...),
		"other": fmt.Sprintf(`{"peers": ["198.51.100.9"], "keys": [%s]}`, goodKeyDoc(other))} {
		if _, err := v.WriteChain(ctx, name, []byte(doc), -1); err != nil {
			t.Fatal(err)
		}
	}
	return lossySource{source: v, apply: func(t *testing.T, fault string) {
		if fault != "" {
			t.Fatal("only a deleted chain is tested with Vault")
		}
		if err := v.Client().KVv2("secret").DeleteMetadata(ctx, "aokeyd/chains/"+chainName); err != nil {
			t.Fatal(err)
		}
	}}
}

// warningsOf collects the daemon-wide and the test peer's warnings.
func (e *env) warningsOf() []string {
	e.t.Helper()
	rep, err := e.d.Status(context.Background(), "")
	if err != nil {
		e.t.Fatalf("Status: %v", err)
	}
	ws := slices.Clone(rep.Warnings)
	for _, p := range rep.Peers {
		ws = append(ws, p.Warnings...)
	}
	return ws
}

func hasWarning(ws []string, words []string) bool {
	return slices.ContainsFunc(ws, func(w string) bool {
		for _, x := range words {
			if !strings.Contains(w, x) {
				return false
			}
		}
		return true
	})
}

// settle runs one more full pass and gives the session's rotation machine
// time to act on it.
func (e *env) settle() {
	e.t.Helper()
	_, full := e.d.Passes()
	e.d.Kick()
	e.waitFor("a full pass", func() bool { _, f := e.d.Passes(); return f > full })
	e.quiet(150 * time.Millisecond) // the machine polls every 10ms
}

// reconnect opens a fresh connection from the peer (holding the mirrors
// of keys, sending with the last) through the listener.
func (e *env) reconnect(keys []testKey) error {
	c, err := e.net.Socket(peerAddr)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, k := range keys {
		m := k.mirror()
		err := c.AddKey(m, tcpao.AddOptions{})
		m.Secret.Zero()
		if err != nil {
			return err
		}
	}
	acc, err := e.net.Connect(c, e.lis)
	if err != nil {
		return err
	}
	defer acc.Close()
	return e.net.Exchange(c, acc, 2)
}

func TestLossyKeySourceKeepsKeys(t *testing.T) {
	for _, c := range lossyCases() {
		t.Run(c.name, func(t *testing.T) { synctest.Test(t, func(t *testing.T) { testLossyKeySourceKeepsKeys(t, c) }) })
	}
}

// testLossyKeySourceKeepsKeys runs one lossy case.
func testLossyKeySourceKeepsKeys(t *testing.T, c lossyCase) {
	ls := newFileLossy
	if c.vault {
		ls = newVaultLossy
	}
	src := ls(t, c)
	e := newEnv(t, envOptions{keys: c.keys, source: src.source})
	all := ids(c.keys...)
	e.waitKeys("listener", e.lis, all)
	newestKey := c.keys[len(c.keys)-1]
	e.up(all, c.keys...)
	if cur := info(t, e.acc).CurrentKey; cur != newestKey.send {
		t.Fatalf("setup: session sends with %d, want %s (%d)", cur, newestKey.name, newestKey.send)
	}

	src.apply(t, c.fault)
	if err := e.d.RefreshKeys(context.Background()); err != nil {
		t.Fatalf("RefreshKeys: %v (the read succeeds: the fault is in its content)", err)
	}
	check := func(when string) {
		t.Helper()
		e.settle()
		if got := keyIDs(t, e.lis); !slices.Equal(got, all) {
			t.Errorf("%s: listener keys %v, want %v kept", when, got, all)
		}
		if got := keyIDs(t, e.acc); !slices.Equal(got, all) {
			t.Errorf("%s: session keys %v, want %v kept", when, got, all)
		}
		if cur := info(t, e.acc).CurrentKey; cur != newestKey.send {
			t.Errorf("%s: session sends with %d, want %s (%d): no silent roll back", when, cur, newestKey.name, newestKey.send)
		}
		if err := e.net.Exchange(e.client, e.acc, 2); err != nil {
			t.Errorf("%s: established session: %v", when, err)
		}
		if err := e.reconnect(c.keys); err != nil {
			t.Errorf("%s: a fresh reconnect from the peer through the listener: %v", when, err)
		}
		if ws := e.warningsOf(); !hasWarning(ws, c.warn) {
			t.Errorf("%s: status warnings %q, want one naming %q", when, ws, c.warn)
		}
	}
	check("after the lossy read")

	// A restart with the source still bad: no last good snapshot
	// in memory, and still nothing deleted.
	e.stop()
	e.start("")
	e.waitFor("the restarted daemon's first pass", func() bool { _, f := e.d.Passes(); return f > 0 })
	e.waitFor("the session seen again", func() bool {
		rep, err := e.d.Status(context.Background(), "")
		return err == nil && len(rep.Peers) == 1 && rep.Peers[0].SessionState == "established"
	})
	check("after a restart")
}

// TestLossyFreezeEndsWhenSourceFixed: after a restart with a bad source
// the chain is frozen; once the source is fixed the warning goes and the
// session is managed again.
func TestLossyFreezeEndsWhenSourceFixed(t *testing.T) {
	synctest.Test(t, testLossyFreezeEndsWhenSourceFixed)
}

func testLossyFreezeEndsWhenSourceFixed(t *testing.T) {
	c := lossyCases()[0]
	k1 := c.keys[0]
	src := newFileLossy(t, c)
	e := newEnv(t, envOptions{keys: c.keys, source: src.source})
	e.waitKeys("listener", e.lis, ids(k1))
	e.up(ids(k1), k1)
	src.apply(t, c.fault)
	if err := e.d.RefreshKeys(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.settle()
	e.stop()
	e.start("")
	e.waitFor("the frozen chain's warning", func() bool { return hasWarning(e.warningsOf(), c.warn) })
	// No rotation machine runs on the session (its state is empty): one
	// that ran would work towards the degraded chain's keys, held back
	// only by the peer's RNext.
	if st := e.peerStatus().Rotation.State; st != "" {
		t.Fatalf("rotation %q while the chain is frozen, want no machine on the session", st)
	}

	src.apply(t, chainDoc(goodKeyDoc(k1)))
	if err := e.d.RefreshKeys(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the session managed again", func() bool { return e.peerStatus().Rotation.State == "steady" })
	if ws := e.warningsOf(); len(ws) != 0 {
		t.Errorf("warnings %q after the source was fixed, want none", ws)
	}
	if got := keyIDs(t, e.lis); !slices.Equal(got, ids(k1)) {
		t.Errorf("listener keys %v, want %v", got, ids(k1))
	}
}
