package early

import (
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// earlyKeys is a peer's keys at t0: k1 sent with since an hour ago (the
// schedule's), k2 from half an hour on, k3 from an hour on.
func earlyKeys(t0 time.Time) policy.PeerKeys {
	key := func(name string, id uint8, start time.Duration) policy.ScheduledKey {
		m := keystore.MKT{Name: name, Chain: "core", SendID: id, RecvID: id + 1, Algorithm: tcpao.HMACSHA256, MACLen: 12,
			Secret: tcpao.NewSecret([]byte("early-desired-" + name))}
		return policy.ScheduledKey{MKT: m, SendLifetime: keystore.Lifetime{Start: t0.Add(start)}, Sendable: start <= 0}
	}
	return policy.PeerKeys{Chain: "core", SourceChain: "core", Preferred: 0, Keys: []policy.ScheduledKey{
		key("k1", 20, -time.Hour), key("k2", 30, 30*time.Minute), key("k3", 40, time.Hour),
	}}
}

// aoctl rotate rolls to the key with the latest send start, ties going
// to the schedule's key; a key no longer sent with is none to roll to.
func TestNewest(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	pk := earlyKeys(t0)
	if got := Newest(pk, t0); got != 2 {
		t.Errorf("Newest = %d, want k3 (2)", got)
	}
	pk.Keys[2].SendLifetime.End = t0
	if got := Newest(pk, t0); got != 1 {
		t.Errorf("Newest with k3's send lifetime over = %d, want k2 (1)", got)
	}
	pk.Keys[1].SendLifetime.Start = pk.Keys[0].SendLifetime.Start
	if got := Newest(pk, t0); got != 0 {
		t.Errorf("Newest with k1 and k2 starting together = %d, want the schedule's k1 (0)", got)
	}
	if got := Newest(policy.PeerKeys{Preferred: -1}, t0); got != -1 {
		t.Errorf("Newest of no keys = %d, want -1", got)
	}
}

// An Key is the same key while its chain, name, IDs and material
// are; its index follows it through a key set that changed around it.
func TestKeySame(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	pk := earlyKeys(t0)
	k := KeyOf(pk, 1)
	if k.Label() != "core/k2" || k.Start != t0.Add(30*time.Minute) {
		t.Fatalf("KeyOf = %+v", k)
	}
	moved := k
	moved.Start = t0
	if !k.Same(moved) {
		t.Errorf("a new send start made another key")
	}
	other := KeyOf(earlyKeys(t0), 1)
	other.Material.Fingerprint[0] ^= 1
	if k.Same(other) {
		t.Errorf("new material is the same key")
	}
	pk.Keys = pk.Keys[1:] // k1 gone: k2 is index 0 now
	pk.Preferred = -1
	if i, why, _ := k.In(pk); i != 0 || why != "" {
		t.Errorf("In = %d %q, want 0", i, why)
	}
}
