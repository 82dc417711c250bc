package policy

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

const desiredPolicy = `
defaults: {accept_tolerance: 5m}
key_chains:
  - name: core
  - name: listed
    source_chain: core
    keys:
      - name: k1
        send_lifetime: {start: 2026-11-01, end: 2026-11-11}
      - name: k2
peers:
  - {neighbor: 10.0.0.1, key_chain: core}
  - {neighbor: 10.0.0.2, key_chain: listed, include_tcp_options: true, ao_required: false}
  - {neighbor: 10.9.0.0/16, vrf: blue, key_chain: core}
`

func desiredSnapshot() *keystore.Snapshot {
	const d = Day
	bad := mkt("core", "bad", 4, 4, keystore.Always, keystore.Always)
	bad.Algorithm = "hmac(md5)"
	old := mkt("core", "old", 3, 3, keystore.Always, keystore.Always)
	old.Revoked = true
	red := mkt("core", "red", 5, 5, keystore.Always, keystore.Always)
	red.VRF = "red"
	sub := mkt("core", "sub", 6, 6, keystore.Always, keystore.Always)
	sub.Peers = []netip.Prefix{netip.MustParsePrefix("10.9.1.0/24")}
	return snapshot(chain("core",
		mkt("core", "k1", 1, 1, life(0, 11*d), life(-d, 11*d)),
		mkt("core", "k2", 2, 2, from(10*d), from(9*d)),
		old, bad, red, sub,
	))
}

func TestDesired(t *testing.T) {
	p := mustParse(t, desiredPolicy)
	snap := desiredSnapshot()
	const d, tol = Day, 5 * time.Minute
	never := time.Time{}
	tests := []struct {
		name    string
		peer    string
		vrf     string
		t       time.Duration
		keys    []string // "*" preferred, "+" other sendable
		next    time.Time
		revoked []string
		ignored int
		aoReq   bool
	}{
		{"before any key", "10.0.0.1", "", -2 * d, nil, at(-d - tol), []string{"old"}, 1, true},
		{"k1 accepted within tolerance", "10.0.0.1", "", -d - tol, []string{"k1"}, at(0), []string{"old"}, 1, true},
		{"k1 sent", "10.0.0.1", "", 0, []string{"k1*"}, at(9*d - tol), []string{"old"}, 1, true},
		{"k2 accepted early", "10.0.0.1", "", 9 * d, []string{"k1*", "k2"}, at(10 * d), []string{"old"}, 1, true},
		{"k2 preferred, k1 still sendable", "10.0.0.1", "", 10 * d, []string{"k1+", "k2*"}, at(11 * d), []string{"old"}, 1, true},
		{"k1 accepted after send end", "10.0.0.1", "", 11 * d, []string{"k1", "k2*"}, at(11*d + tol), []string{"old"}, 1, true},
		{"k1 gone", "10.0.0.1", "", 11*d + tol, []string{"k2*"}, never, []string{"old"}, 1, true},
		{"4in6 peer", "::ffff:10.0.0.1", "", 0, []string{"k1*"}, at(9*d - tol), []string{"old"}, 1, true},
		{"listed: policy send lifetime override", "10.0.0.2", "", 10*d - 1, []string{"k1*", "k2"}, at(10 * d), nil, 0, false},
		{"listed: override ends k1 sending", "10.0.0.2", "", 10 * d, []string{"k1", "k2*"}, at(11*d + tol), nil, 0, false},
		{"VRF and peer restricted MKTs apply", "10.9.1.1", "blue", 0, []string{"k1*", "sub+"}, at(9*d - tol), []string{"old"}, 1, true},
		{"peer outside MKT peers", "10.9.2.1", "blue", 0, []string{"k1*"}, at(9*d - tol), []string{"old"}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pk, err := p.Desired(snap, addr(tt.peer), tt.vrf, at(tt.t))
			if err != nil {
				t.Fatalf("Desired: %v", err)
			}
			if got := keyNames(pk); !slices.Equal(got, tt.keys) {
				t.Errorf("keys = %v, want %v", got, tt.keys)
			}
			if !pk.NextChange.Equal(tt.next) {
				t.Errorf("NextChange = %v, want %v", pk.NextChange, tt.next)
			}
			if !slices.Equal(pk.Revoked, tt.revoked) {
				t.Errorf("Revoked = %v, want %v", pk.Revoked, tt.revoked)
			}
			if len(pk.Ignored) != tt.ignored {
				t.Errorf("Ignored = %v, want %d", pk.Ignored, tt.ignored)
			}
			for _, e := range pk.Ignored {
				if !errors.Is(e, ErrAlgorithm) {
					t.Errorf("Ignored %v, want ErrAlgorithm", e)
				}
			}
			if pk.AORequired != tt.aoReq {
				t.Errorf("AORequired = %v, want %v", pk.AORequired, tt.aoReq)
			}
			k, ok := pk.PreferredKey()
			if ok != (pk.Preferred >= 0) || (ok && !k.Sendable) {
				t.Errorf("PreferredKey() = %v, %v with Preferred %d", k, ok, pk.Preferred)
			}
		})
	}
}

func TestDesiredIncludeTCPOptions(t *testing.T) {
	p := mustParse(t, desiredPolicy)
	snap := desiredSnapshot()
	snap.Chains["core"].Keys[0].IncludeTCPOptions = true
	tests := []struct {
		peer string
		want bool
	}{
		{"10.0.0.1", true}, // no binding setting: the MKT's own flag
		{"10.0.0.2", true}, // binding says true
		{"10.9.0.1", true}, // MKT's own
	}
	for _, tt := range tests {
		vrf := ""
		if tt.peer == "10.9.0.1" {
			vrf = "blue"
		}
		pk, err := p.Desired(snap, addr(tt.peer), vrf, t0)
		if err != nil || len(pk.Keys) == 0 {
			t.Fatalf("Desired(%s) = %v, %v", tt.peer, pk, err)
		}
		if got := pk.Keys[0].IncludeTCPOptions; got != tt.want {
			t.Errorf("%s: IncludeTCPOptions = %v, want %v", tt.peer, got, tt.want)
		}
	}
	// A binding that says false overrides an MKT that says true.
	p = mustParse(t, "key_chains: [{name: core}]\npeers: [{neighbor: 10.0.0.1, key_chain: core, include_tcp_options: false}]\n")
	pk, err := p.Desired(snap, addr("10.0.0.1"), "", t0)
	if err != nil {
		t.Fatal(err)
	}
	if pk.Keys[0].IncludeTCPOptions {
		t.Error("binding include_tcp_options: false did not override the MKT")
	}
	key := pk.Keys[0].TCPAOKey(netip.MustParsePrefix("10.0.0.1/32"), 7)
	if !key.ExcludeOptions || key.IfIndex != 7 || key.SendID != 1 || key.Algorithm != tcpao.HMACSHA256 {
		t.Errorf("TCPAOKey = %v", key)
	}
	if err := key.Validate(); err != nil {
		t.Errorf("TCPAOKey().Validate() = %v", err)
	}
	key.Secret.Zero()
	if snap.Chains["core"].Keys[0].Secret.Equal(key.Secret) {
		t.Error("zeroing the TCPAOKey secret zeroed the snapshot's secret")
	}
}

func TestDesiredPreferredTieBreak(t *testing.T) {
	p := mustParse(t, "key_chains: [{name: c}]\npeers: [{neighbor: 10.0.0.1, key_chain: c}]\n")
	tests := []struct {
		name string
		keys []keystore.MKT
		want string
	}{
		{"latest start wins", []keystore.MKT{
			mkt("c", "b", 1, 1, life(-2*Day, Day), keystore.Always),
			mkt("c", "a", 2, 2, life(-Day, Day), keystore.Always),
		}, "a"},
		{"unbounded start loses", []keystore.MKT{
			mkt("c", "z", 1, 1, keystore.Lifetime{End: at(Day)}, keystore.Always),
			mkt("c", "a", 2, 2, life(-Day, Day), keystore.Always),
		}, "a"},
		{"same start: later end wins", []keystore.MKT{
			mkt("c", "b", 1, 1, life(-Day, Day), keystore.Always),
			mkt("c", "a", 2, 2, life(-Day, 2*Day), keystore.Always),
		}, "a"},
		{"same start: no end wins", []keystore.MKT{
			mkt("c", "a", 1, 1, from(-Day), keystore.Always),
			mkt("c", "b", 2, 2, life(-Day, 2*Day), keystore.Always),
		}, "a"},
		{"same lifetimes: greater name wins", []keystore.MKT{
			mkt("c", "2026-12", 1, 1, from(-Day), keystore.Always),
			mkt("c", "2026-11", 2, 2, from(-Day), keystore.Always),
		}, "2026-12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, order := range [][]keystore.MKT{tt.keys, {tt.keys[1], tt.keys[0]}} {
				pk, err := p.Desired(snapshot(chain("c", order...)), addr("10.0.0.1"), "", t0)
				if err != nil {
					t.Fatal(err)
				}
				k, ok := pk.PreferredKey()
				if !ok || k.MKT.Name != tt.want {
					t.Errorf("preferred = %v (%v), want %s", k.MKT.Name, ok, tt.want)
				}
			}
		})
	}
}

func TestDesiredErrors(t *testing.T) {
	p := mustParse(t, desiredPolicy)
	dup := snapshot(chain("core",
		mkt("core", "a", 1, 1, life(0, 2*Day), life(0, 2*Day)),
		mkt("core", "b", 1, 2, from(Day), from(Day)),
		mkt("core", "c", 3, 2, from(5*Day), from(5*Day)),
	))
	tests := []struct {
		name string
		snap *keystore.Snapshot
		peer string
		vrf  string
		t    time.Duration
		want error
	}{
		{"no binding", desiredSnapshot(), "10.0.0.3", "", 0, ErrNoBinding},
		{"wrong vrf", desiredSnapshot(), "10.0.0.1", "blue", 0, ErrNoBinding},
		{"chain missing from snapshot", snapshot(chain("other")), "10.0.0.1", "", 0, ErrUnknownChain},
		{"nil snapshot", nil, "10.0.0.1", "", 0, ErrUnknownChain},
		{"same SendID at once", dup, "10.0.0.1", "", Day, ErrDuplicateID},
		{"same RecvID at once", dup, "10.0.0.1", "", 5 * Day, ErrDuplicateID},
		{"same SendID, not at once", dup, "10.0.0.1", "", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.Desired(tt.snap, addr(tt.peer), tt.vrf, at(tt.t))
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("Desired = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestDesiredConstantUntilNextChange: whatever instant is asked about, the
// answer stays the same until NextChange.
func TestDesiredConstantUntilNextChange(t *testing.T) {
	p := mustParse(t, desiredPolicy)
	snap := desiredSnapshot()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		peer := []string{"10.0.0.1", "10.0.0.2"}[rng.IntN(2)]
		tt := at(time.Duration(rng.Int64N(int64(16*Day))) - 3*Day)
		pk, err := p.Desired(snap, addr(peer), "", tt)
		if err != nil {
			t.Fatal(err)
		}
		later := tt.Add(time.Duration(rng.Int64N(int64(30 * Day))))
		if !pk.NextChange.IsZero() {
			if !pk.NextChange.After(tt) {
				t.Fatalf("%s at %v: NextChange %v is not after t", peer, tt, pk.NextChange)
			}
			later = tt.Add(time.Duration(rng.Int64N(int64(pk.NextChange.Sub(tt)))))
		}
		pk2, err := p.Desired(snap, addr(peer), "", later)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := keyNames(pk), keyNames(pk2); !slices.Equal(a, b) {
			t.Fatalf("%s: at %v keys %v, at %v (before NextChange %v) keys %v", peer, tt, a, later, pk.NextChange, b)
		}
	}
}
