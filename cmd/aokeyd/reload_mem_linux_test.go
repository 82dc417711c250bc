//go:build linux

package main

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/bgptest"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// The test secrets (keystore/testdata/test-secrets.txt) this test alone
// uses, so that no other test's copies are counted: the key's, and a
// second key's that some reloads add.
const (
	reloadSecret = "aokeyd-test-secret-foxtrot"
	otherSecret  = "aokeyd-test-secret-echo"
)

// secretsFile lists the test secrets.
var secretsFile = filepath.Join("..", "..", "keystore", "testdata", "test-secrets.txt")

// TestReloadsDoNotMultiplySecrets runs the daemon over the in-memory
// kernel with a key file and a peer's session, reloads it 20 times (what
// SIGHUP does: check the configuration, key file included, swap the
// policy, re-read the keys) and counts the copies of the key's secret, raw
// and base64, in the process's memory (/proc/self/mem: live objects, freed
// ones not yet reused, stacks). Once the garbage is collected there must be
// no more copies after the reloads than before (the live ones: the key
// source's, the cache's, the shared snapshot's, the listener's and the
// session's desired keys), and at no time a base64 copy.
func TestReloadsDoNotMultiplySecrets(t *testing.T) {
	for _, edit := range []bool{false, true} {
		t.Run(map[bool]string{false: "unchanged", true: "edited"}[edit], func(t *testing.T) { testReloads(t, edit) })
	}
}

// testReloads is TestReloadsDoNotMultiplySecrets; with edit, each reload
// adds or removes a second key (accepted only: no roll) in the key file.
func testReloads(t *testing.T, edit bool) {
	raw, b64 := testkit.SecretNeedles(t, secretsFile, reloadSecret)
	_, other := testkit.SecretNeedles(t, secretsFile, otherSecret)
	h := acceptingHost()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfgPath := initTestConfig(t, dir)
		policy := "version: 1\nkey_chains:\n  - name: core\npeers:\n  - neighbor: 192.0.2.2\n    key_chain: core\n"
		if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o640); err != nil {
			t.Fatal(err)
		}
		writeKeys := func(withOther bool) {
			t.Helper()
			keys := make([]byte, 0, 1024) // never outgrown: a dropped buffer would hold the secret
			keys = append(keys, "chains:\n  core:\n    peers: [192.0.2.2]\n    keys:\n      - name: k1\n        send_id: 1\n"+
				"        recv_id: 2\n        algorithm: hmac(sha256)\n        secret_b64: \""...)
			keys = append(append(append(keys, b64.Head...), b64.Tail...), "\"\n"...)
			if withOther {
				keys = append(keys, "      - name: k2\n        send_id: 3\n        recv_id: 4\n        algorithm: hmac(sha256)\n"+
					"        send_lifetime: {start: \"2099-01-01T00:00:00Z\"}\n        secret_b64: \""...)
				keys = append(append(append(keys, other.Head...), other.Tail...), "\"\n"...)
			}
			err := os.WriteFile(filepath.Join(dir, "keys.yaml"), keys, 0o600)
			clear(keys)
			if err != nil {
				t.Fatal(err)
			}
		}
		writeKeys(false)

		logs := &testkit.SyncBuffer{}
		log := slog.New(slog.NewTextHandler(logs, nil))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		checked := config.Check(ctx, cfgPath, config.CheckOptions{SkipKeySource: true})
		if !checked.OK() {
			t.Fatalf("config: %v", checked.Problems)
		}
		src, err := checked.Config.OpenKeySource(config.SourceOptions{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		cache := keystore.NewCache(src, keystore.CacheOptions{Logger: log})
		defer cache.Close()

		const pid = 4242
		local := netip.MustParseAddr("192.0.2.1")
		knet := tcpaotest.NewNet()
		lis, err := knet.Socket(local)
		if err != nil {
			t.Fatal(err)
		}
		if err := lis.Listen(); err != nil {
			t.Fatal(err)
		}
		disc := bgptest.NewDiscoverer(pid, 1001)
		disc.Add(lis, netip.AddrPortFrom(local, 179), netip.AddrPort{}, true)
		peer := netip.MustParseAddr("192.0.2.2")
		sp := bgptest.NewSpeaker("fake-speaker", pid, 16, bgp.PeerInfo{Neighbor: peer,
			Local: local, State: bgp.StateActive, Passive: true, PeerASN: 65002})
		d, err := daemon.New(daemon.Options{
			Policy: checked.Policy, Keys: cache, Source: src, Speaker: sp, Discoverer: disc, ListenPort: 179,
			Refresh: time.Hour, Resync: time.Hour, Logger: log,
			OptMemMax: func() (int, error) { return knet.OptMemMax(), nil },
			SocketOf:  func(h bgp.SocketHandle) tcpao.Socket { return disc.Socket(h.Ref().Inode) },
		})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		synctest.Wait()
		if ks, err := lis.Keys(tcpao.KeyFilter{SkipFingerprint: true}); err != nil || len(ks) != 1 {
			t.Fatalf("listener keys %d (%v), want the key installed", len(ks), err)
		}
		// The peer connects with the mirror key; its session is
		// established and the daemon's rotation machine takes it over.
		client, err := knet.Socket(peer)
		if err != nil {
			t.Fatal(err)
		}
		secret := raw.Join()
		mirror := tcpao.Key{KeyRef: tcpao.KeyRef{Peer: netip.PrefixFrom(local, 32), SendID: 2, RecvID: 1},
			Algorithm: tcpao.HMACSHA256, MACLen: 12, Secret: tcpao.NewSecret(secret)}
		clear(secret)
		err = client.AddKey(mirror, tcpao.AddOptions{})
		mirror.Secret.Zero()
		if err != nil {
			t.Fatal(err)
		}
		acc, err := knet.Connect(client, lis)
		if err != nil {
			t.Fatal(err)
		}
		disc.Add(acc, netip.AddrPortFrom(local, 179), client.LocalAddr(), false)
		sp.Set(bgp.PeerInfo{Neighbor: peer, Local: local, LocalPort: 179, RemotePort: client.LocalAddr().Port(),
			State: bgp.StateEstablished, Uptime: time.Now().Add(-time.Minute).Truncate(time.Second), Passive: true, PeerASN: 65002})
		time.Sleep(2 * time.Minute) // the roll's grace period, on the bubble's clock
		synctest.Wait()
		st, err := d.Status(ctx, "")
		if err != nil || len(st.Peers) != 1 || st.Peers[0].Rotation.State != "steady" || len(st.Peers[0].Keys) != 1 {
			t.Fatalf("status %+v (%v), want the peer's machine steady with the key", st.Peers, err)
		} else {
			t.Logf("peer %s: %s, keys %d", st.Peers[0].Peer, st.Peers[0].Rotation.State, len(st.Peers[0].Keys))
		}

		// count counts the copies as they are, then (collected) once the
		// garbage is collected and the secrets nothing refers to any more
		// are wiped.
		count := func() (asIs, collected [2]int) {
			t.Helper()
			for i, dst := range []*[2]int{&asIs, &collected} {
				if i == 1 && !testkit.CollectGarbage() {
					t.Fatal("the finalizers did not run")
				}
				c, err := testkit.CountInMemory(raw, b64)
				if err != nil {
					t.Fatal(err)
				}
				*dst = [2]int{c[0], c[1]}
			}
			return asIs, collected
		}
		const reloads = 20
		_, before := count()
		for i := range reloads {
			if edit {
				writeKeys(i%2 == 0)
			}
			h.reload(ctx, cfgPath, checked.Config, d, log, nil)
			synctest.Wait()
			if edit && i == 0 {
				if st, err := d.Status(ctx, ""); err != nil || len(st.Peers) != 1 || len(st.Peers[0].Keys) != 2 {
					t.Fatalf("after adding a key: status %+v (%v), want the peer with 2 keys", st.Peers, err)
				}
			}
		}
		asIs, after := count()
		t.Logf("copies of the secret (raw, base64), collected: %v before %d reloads, %v after (%v before the collection)",
			before, reloads, after, asIs)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if after[0] > before[0] || after[1] > before[1] {
			t.Errorf("reloads multiplied the secret: %v copies (raw, base64) before %d reloads, %v after", before, reloads, after)
		}
		if asIs[1] != 0 {
			t.Errorf("%d base64 copies of the secret before the collection, want none", asIs[1])
		}
	})
}
