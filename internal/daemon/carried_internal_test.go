package daemon

import (
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestCarriedRecord: the carried-keys record reads back what was saved
// (per peer address and VRF, each key's reference and fingerprint); a key
// read bare keeps the fingerprint recorded for it; an unchanged save
// writes nothing; a record made under another fingerprint key keeps the
// references and drops the fingerprints.
func TestCarriedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "carried-keys.json")
	log := slog.New(slog.DiscardHandler)
	red := rotator.PeerID{Addr: netip.MustParseAddr("192.0.2.2"), VRF: "red"}
	def := rotator.PeerID{Addr: netip.MustParseAddr("192.0.2.2")}
	fp := func(b byte) (f tcpao.Fingerprint) { f[0], f[15] = b, b; return f }
	ref := func(p string, send, recv uint8) tcpao.KeyRef {
		return tcpao.KeyRef{Peer: netip.MustParsePrefix(p), SendID: send, RecvID: recv}
	}
	want := map[rotator.PeerID][]rotator.CarriedKey{
		def: {{Ref: ref("192.0.2.2/32", 20, 21), FP: fp(1)}},
		red: {{Ref: ref("192.0.2.0/30", 30, 31), FP: fp(2)}, {Ref: ref("192.0.2.0/30", 20, 21), FP: fp(3)}},
	}
	r, got, err := openCarried(path, nil, log)
	if err != nil || got != nil {
		t.Fatalf("first open: %v, %v; want nothing", got, err)
	}
	if err := r.save(want); err != nil {
		t.Fatal(err)
	}
	writes := 0
	r.fault = func(p, step string) error {
		if step == durable.StepCreate && (p == path || p == path+".bak") {
			writes++
		}
		return nil
	}
	// The same keys, red's in another order and one read bare: no write.
	bare := map[rotator.PeerID][]rotator.CarriedKey{
		def: {{Ref: ref("192.0.2.2/32", 20, 21)}},
		red: {want[red][1], want[red][0]},
	}
	if err := r.save(bare); err != nil || writes != 0 {
		t.Fatalf("an unchanged save: %v, %d writes; want none", err, writes)
	}
	_, got, err = openCarried(path, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if n := normCarried(want, nil); !maps.EqualFunc(normCarried(got, nil), n, slices.Equal) {
		t.Fatalf("read back %v, want %v", got, n)
	}
	if _, err := os.Stat(path + ".bak"); err != nil {
		t.Errorf("no backup: %v", err)
	}

	// A record written under another fingerprint key.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), checkValue(), strings.Repeat("0", len(checkValue())), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, got, err = openCarried(path, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	for id, ks := range got {
		for _, k := range ks {
			if k.FP != (tcpao.Fingerprint{}) {
				t.Errorf("peer %s key %s: fingerprint kept from a record under another fingerprint key", id, k.Ref)
			}
		}
	}
	if len(got[red]) != 2 || len(got[def]) != 1 {
		t.Errorf("references lost with the fingerprints: %v", got)
	}
}

// TestCarriedTodaysRecord: a carried-keys record as aokeyd writes it
// today (each peer in peer.Key's text form, a VRF twin beside its
// default-VRF namesake) reads, each peer's keys to that peer.
func TestCarriedTodaysRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "carried-keys.json")
	rec := `{
  "version": 1,
  "check": "` + checkValue() + `",
  "peers": [
    {"peer": "192.0.2.2", "keys": [{"prefix": "192.0.2.2/32", "send_id": 20, "recv_id": 21, "fingerprint": "01000000000000000000000000000001"}]},
    {"peer": "192.0.2.2 vrf red", "keys": [{"prefix": "192.0.2.0/30", "ifindex": 7, "send_id": 30, "recv_id": 31}]}
  ]
}
`
	if err := os.WriteFile(path, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	_, got, err := openCarried(path, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	def := rotator.PeerID{Addr: netip.MustParseAddr("192.0.2.2")}
	red := rotator.PeerID{Addr: netip.MustParseAddr("192.0.2.2"), VRF: "red"}
	var fp tcpao.Fingerprint
	fp[0], fp[15] = 1, 1
	want := map[rotator.PeerID][]rotator.CarriedKey{
		def: {{Ref: tcpao.KeyRef{Peer: netip.MustParsePrefix("192.0.2.2/32"), SendID: 20, RecvID: 21}, FP: fp}},
		red: {{Ref: tcpao.KeyRef{Peer: netip.MustParsePrefix("192.0.2.0/30"), IfIndex: 7, SendID: 30, RecvID: 31}}},
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
