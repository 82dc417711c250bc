package policy

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/golden"
	"github.com/aokeyd/aokeyd/tcpao"
)

func TestParseExample(t *testing.T) {
	p, err := Load("testdata/example.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := p.File(); got != "testdata/example.yaml" {
		t.Errorf("File() = %q", got)
	}
	chains := p.Chains()
	if len(chains) != 3 {
		t.Fatalf("Chains() = %d chains, want 3", len(chains))
	}
	core, ix, cust := chains[0], chains[1], chains[2]
	if core.Name != "core" || core.SourceChain != "core" || core.AcceptTolerance != 5*time.Minute || len(core.Keys) != 2 {
		t.Errorf("core = %+v", core)
	}
	if k := core.Keys[1]; k.Name != "2026-11" || k.SendLifetime == nil || !k.SendLifetime.Start.Equal(t0) || !k.SendLifetime.End.IsZero() {
		t.Errorf("core.keys[1] = %+v", k)
	}
	if k := core.Keys[0]; k.Pos.Line != 30 || k.Field != "key_chains[0].keys[0]" {
		t.Errorf("core.keys[0] at %v %q, want line 30", k.Pos, k.Field)
	}
	if ix.Keys != nil || ix.SourceChain != "ix" || ix.AcceptTolerance != 2*time.Minute {
		t.Errorf("ix = %+v", ix)
	}
	wantRot := Rotation{
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Interval: 30 * Day, Lead: 24 * time.Hour,
		Grace: 24 * time.Hour, Jitter: 6 * time.Hour, Algorithm: tcpao.HMACSHA256, KeyLength: 32, MACLength: 12,
	}
	if cust.Rotation == nil || *cust.Rotation != wantRot || cust.SourceChain != "customers-generated" {
		t.Errorf("customers rotation = %+v, want %+v", cust.Rotation, wantRot)
	}
	if _, ok := p.Schedule("customers"); !ok {
		t.Error("Schedule(customers) = false")
	}
	if _, ok := p.Schedule("core"); ok {
		t.Error("Schedule(core) = true for a chain without rotation")
	}

	bs := p.Bindings()
	if len(bs) != 4 {
		t.Fatalf("Bindings() = %d, want 4", len(bs))
	}
	no := false
	tests := []struct {
		b       Binding
		nb      string
		vrf     string
		chain   string
		aoReq   bool
		inc     *bool
		onRevok RevokeAction
		onSw    SwitchTimeoutAction
	}{
		{bs[0], "192.0.2.1/32", "", "core", true, nil, RevokeKeep, SwitchRetry},
		{bs[1], "2001:db8::1/128", "", "core", true, &no, RevokeKeep, SwitchRetry},
		{bs[2], "198.51.100.0/24", "vrf-ix", "ix", false, nil, RevokeKeep, SwitchRetry},
		{bs[3], "203.0.113.7/32", "", "customers", true, nil, RevokeReset, SwitchAlert},
	}
	for i, tt := range tests {
		b := tt.b
		if b.Neighbor.String() != tt.nb || b.VRF != tt.vrf || b.KeyChain != tt.chain || b.AORequired != tt.aoReq ||
			(b.IncludeTCPOptions == nil) != (tt.inc == nil) || (tt.inc != nil && *b.IncludeTCPOptions != *tt.inc) ||
			b.Safety.OnRevokeOnlyKey != tt.onRevok || b.Safety.OnSwitchTimeout != tt.onSw ||
			b.Safety.SwitchTimeout != 5*time.Minute || b.Safety.RetryAfter != time.Minute {
			t.Errorf("binding %d = %+v", i, b)
		}
	}
}

func TestDefaults(t *testing.T) {
	p := mustParse(t, "key_chains: [{name: a}]\npeers: [{neighbor: 10.0.0.1, key_chain: a}]\n")
	if got := p.Safety(); got != DefaultSafety() {
		t.Errorf("Safety() = %+v, want %+v", got, DefaultSafety())
	}
	b := p.Bindings()[0]
	if !b.AORequired || b.IncludeTCPOptions != nil || b.Safety != DefaultSafety() {
		t.Errorf("binding = %+v", b)
	}
	c, _ := p.Chain("a")
	if c.AcceptTolerance != 0 || c.SourceChain != "a" || c.Keys != nil || c.Rotation != nil {
		t.Errorf("chain = %+v", c)
	}
	p = mustParse(t, "key_chains: [{name: a, rotation: {interval: 1d, lead: 1h, grace: 1h, algorithm: aes-128-cmac}}]\n")
	c, _ = p.Chain("a")
	want := Rotation{Start: time.Unix(0, 0).UTC(), Interval: Day, Lead: time.Hour, Grace: time.Hour,
		Algorithm: tcpao.CMACAES128, KeyLength: 16}
	if *c.Rotation != want {
		t.Errorf("rotation = %+v, want %+v", *c.Rotation, want)
	}
}

type wantProblem struct {
	line  int
	field string // "" when the problem comes from the YAML decoder
	err   error
	text  string // a substring of the message
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []wantProblem
	}{
		{"empty", "", []wantProblem{{0, "", ErrSyntax, "empty policy"}}},
		{"not yaml", "peers: [\n", []wantProblem{{1, "", ErrSyntax, "did not find expected"}}},
		{"two documents", "version: 1\n---\nversion: 1\n", []wantProblem{{2, "", ErrSyntax, "more than one YAML document"}}},
		{"scalar document", "hello\n", []wantProblem{{1, "", ErrSyntax, "into policy"}}},
		{"unknown fields everywhere", `
frobnicate: 1
defaults: {accept_tolerance: 1m, colour: red}
key_chains:
  - name: a
    kes: []
    rotation: {interval: 1d, lead: 1h, grace: 1h, spin: 3}
peers:
  - neighbor: 10.0.0.1
    key_chain: a
    password: hunter2
`, []wantProblem{
			{2, "", ErrUnknownField, "unknown field (its name is not shown) in policy; allowed: version, defaults"},
			{3, "defaults", ErrUnknownField, "unknown field (its name is not shown) in defaults; allowed: accept_tolerance"},
			{6, "key_chains[0]", ErrUnknownField, "unknown field (its name is not shown) in key chain; allowed: name, source_chain"},
			{7, "key_chains[0].rotation", ErrUnknownField, "unknown field (its name is not shown) in rotation; allowed: start, interval"},
			{11, "peers[0]", ErrUnknownField, "unknown field (its name is not shown) in peer; allowed: neighbor, neighbor_interface, vrf"},
		}},
		{"duplicate mapping key", "version: 1\nversion: 1\n", []wantProblem{{2, "", ErrDuplicate, "already defined"}}},
		{"bad scalars", `
defaults:
  accept_tolerance: 5
  ao_required: maybe
key_chains:
  - name: a
    keys:
      - name: k
        send_lifetime: {start: 2026-13-01, end: soon}
        accept_lifetime: sometimes
      - name: l
        lifetime: {start: 2026-11-01, end: 2026-10-01, color: 1}
      - name: m
        lifetime: {start: 2026-11-01, end: 2026-12-01, duration: 1d}
      - name: n
        lifetime: {duration: 1d}
      - name: o
        lifetime: {always: true, start: 2026-11-01}
`, []wantProblem{
			{3, "", ErrSyntax, `duration "5": missing unit`},
			{4, "", ErrSyntax, "maybe"},
			{9, "", ErrSyntax, `time "2026-13-01"`},
			{9, "", ErrSyntax, `time "soon"`},
			{10, "", ErrSyntax, `want "always" or a mapping`},
			{12, "", ErrSyntax, "field color not found in lifetime"},
			{12, "", ErrSyntax, "is not after start"},
			{14, "", ErrSyntax, "end or duration, not both"},
			{16, "", ErrSyntax, "duration needs a start"},
			{18, "", ErrSyntax, "always excludes"},
		}},
		{"semantics", `version: 2
safety:
  switch_timeout: 0s
  on_switch_timeout: panic
  on_revoke_only_key: shrug
key_chains:
  - name: a
    keys:
      - name: k1
      - name: k1
      - {}
      - name: k2
        lifetime: always
        send_lifetime: always
  - name: a
  - source_chain: x
  - name: r
    rotation:
      interval: 1d
      lead: 1d
      jitter: 2d
      algorithm: md5
      key_length: 81
      mac_length: 17
  - name: r2
    rotation: {interval: 0s, lead: 0s, grace: 0s, algorithm: cmac(aes128), key_length: 32}
peers:
  - {neighbor: 10.0.0.1/8, key_chain: a}
  - {neighbor: 10.0.0.0/8, key_chain: nope}
  - {neighbor: 10.1.0.0/16, key_chain: a}
  - {neighbor: "fe80::1%eth0", key_chain: a}
  - {neighbor: bogus, key_chain: a}
  - {key_chain: a, vrf: this-name-is-far-too-long}
  - {neighbor: 192.0.2.1}
  - {neighbor: 192.0.2.2, key_chain: a, safety: {retry_after: 0s}}
`, []wantProblem{
			{1, "version", ErrInvalid, "version 2"},
			{3, "safety.switch_timeout", ErrInvalid, "positive"},
			{4, "safety.on_switch_timeout", ErrInvalid, `"panic"`},
			{5, "safety.on_revoke_only_key", ErrInvalid, `"shrug"`},
			{10, "key_chains[0].keys[1].name", ErrDuplicate, "already listed at line 9"},
			{11, "key_chains[0].keys[2].name", ErrMissingField, "keys[2].name: missing required field"},
			{13, "key_chains[0].keys[3].lifetime", ErrInvalid, "sets both"},
			{15, "key_chains[1].name", ErrDuplicate, "already defined at line 7"},
			{16, "key_chains[2].name", ErrMissingField, "key_chains[2].name: missing required field"},
			{19, "key_chains[3].rotation.grace", ErrMissingField, "rotation.grace: missing required field"},
			{20, "key_chains[3].rotation.lead", ErrInvalid, "shorter than the interval"},
			{21, "key_chains[3].rotation.jitter", ErrInvalid, "shorter than the interval"},
			{22, "key_chains[3].rotation.algorithm", ErrAlgorithm, `"md5"`},
			{23, "key_chains[3].rotation.key_length", ErrKeyLength, "81 bytes"},
			{24, "key_chains[3].rotation.mac_length", ErrMACLength, "17 bytes"},
			{26, "key_chains[4].rotation.interval", ErrInvalid, "positive"},
			{26, "key_chains[4].rotation.key_length", ErrKeyLength, "needs 16 bytes"},
			{28, "peers[0].neighbor", ErrInvalid, "host bits set (did you mean 10.0.0.0/8?)"},
			{29, "peers[1].key_chain", ErrUnknownChain, `"nope"`},
			{30, "peers[2].neighbor", ErrOverlap, "overlaps 10.0.0.0/8 of peers[1]"},
			{31, "peers[3].neighbor", ErrInvalid, "zones"},
			{32, "peers[4].neighbor", ErrInvalid, "not an address"},
			{33, "peers[5].neighbor", ErrMissingField, "neighbor: missing required field"},
			{33, "peers[5].vrf", ErrInvalid, "device name"},
			{34, "peers[6].key_chain", ErrMissingField, "key_chain: missing required field"},
			{35, "peers[7].safety.retry_after", ErrInvalid, "positive"},
		}},
		{"switch timeout longer than grace", `
key_chains:
  - name: r
    rotation: {interval: 30d, lead: 1d, grace: 2m}
peers:
  - {neighbor: 10.0.0.1, key_chain: r}
  - {neighbor: 10.0.0.2, key_chain: r, safety: {switch_timeout: 1m}}
`, []wantProblem{{6, "peers[0].key_chain", ErrInvalid, "switch_timeout 5m is longer than the grace 2m"}}},
		{"same prefix in two VRFs is fine, 4in6 overlaps v4", `
key_chains: [{name: a}]
peers:
  - {neighbor: 10.0.0.1, key_chain: a}
  - {neighbor: 10.0.0.1, vrf: blue, key_chain: a}
  - {neighbor: "::ffff:10.0.0.1", key_chain: a}
`, []wantProblem{{6, "peers[2].neighbor", ErrOverlap, "overlaps 10.0.0.1/32 of peers[0]"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte(tt.src))
			checkProblems(t, err, "bad.yaml", tt.want)
		})
	}
}

func checkProblems(t *testing.T, err error, file string, want []wantProblem) {
	t.Helper()
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %v (%T) is not Problems", err, err)
	}
	if len(ps) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(ps), len(want), err)
	}
	for i := range min(len(ps), len(want)) {
		p, w := ps[i], want[i]
		if p.File != file || p.Line != w.line || p.Field != w.field || !errors.Is(p, w.err) || !strings.Contains(p.Error(), w.text) {
			t.Errorf("problem %d = %q (file %q line %d field %q), want line %d field %q, %v, containing %q",
				i, p.Error(), p.File, p.Line, p.Field, w.line, w.field, w.err, w.text)
		}
		if !errors.Is(err, w.err) {
			t.Errorf("errors.Is(err, %v) = false", w.err)
		}
	}
}

// TestInvalidGolden renders the problems of each testdata/invalid/*.yaml and
// compares them with the .golden file next to it (-update rewrites them).
func TestInvalidGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/invalid/*.yaml: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			if err == nil {
				t.Fatal("Load succeeded on an invalid policy")
			}
			golden.Check(t, strings.TrimSuffix(f, ".yaml")+".golden", err.Error()+"\n")
		})
	}
}

// TestDocExample keeps the example in doc.go identical to
// testdata/example.yaml (which TestParseExample parses).
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "// A complete policy (policy/testdata/example.yaml):\n//\n")
	if !ok {
		t.Fatal("doc.go has no example section")
	}
	var b strings.Builder
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "//") {
			break
		}
		line = strings.TrimPrefix(strings.TrimPrefix(line, "//"), "\t")
		b.WriteString(line + "\n")
	}
	want, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("doc.go example differs from testdata/example.yaml:\n%s", b.String())
	}
}

func TestLoadErrors(t *testing.T) {
	if _, err := Load("testdata/does-not-exist.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
	big := make([]byte, MaxFileSize+1)
	_, err := Parse("big.yaml", big)
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Parse(big) = %v", err)
	}
}

func TestBindingFor(t *testing.T) {
	p := mustParse(t, `
key_chains: [{name: a}, {name: b}]
peers:
  - {neighbor: 10.0.0.1, key_chain: a}
  - {neighbor: 10.1.0.0/16, key_chain: b}
  - {neighbor: 10.0.0.1, vrf: blue, key_chain: b}
  - {neighbor: "2001:db8::/64", key_chain: a}
  - {neighbor: 0.0.0.0/0, vrf: red, key_chain: a}
  - {neighbor: "::ffff:192.0.2.0/120", key_chain: b}
`)
	tests := []struct {
		peer  string
		vrf   string
		want  string // neighbor of the binding, "" for none
		chain string
	}{
		{"10.0.0.1", "", "10.0.0.1/32", "a"},
		{"::ffff:10.0.0.1", "", "10.0.0.1/32", "a"},
		{"10.0.0.1", "blue", "10.0.0.1/32", "b"},
		{"10.0.0.2", "", "", ""},
		{"10.1.200.3", "", "10.1.0.0/16", "b"},
		{"10.1.200.3", "blue", "", ""},
		{"2001:db8::99", "", "2001:db8::/64", "a"},
		{"2001:db8:1::99", "", "", ""},
		{"2001:db8::99%eth0", "", "2001:db8::/64", "a"},
		{"198.51.100.7", "red", "0.0.0.0/0", "a"},
		{"::ffff:198.51.100.7", "red", "0.0.0.0/0", "a"},
		{"2001:db8::99", "red", "", ""},
		{"192.0.2.200", "", "192.0.2.0/24", "b"},
		{"::ffff:192.0.2.200", "", "192.0.2.0/24", "b"},
		{"192.0.3.1", "", "", ""},
	}
	if _, err := p.BindingFor(netip.Addr{}, ""); !errors.Is(err, ErrNoBinding) {
		t.Errorf("BindingFor(zero Addr) = %v; want ErrNoBinding", err)
	}
	for _, tt := range tests {
		b, err := p.BindingFor(addr(tt.peer), tt.vrf)
		if tt.want == "" {
			if !errors.Is(err, ErrNoBinding) {
				t.Errorf("BindingFor(%s, %q) = %v, %v; want ErrNoBinding", tt.peer, tt.vrf, b, err)
			}
			continue
		}
		if err != nil || b.Neighbor != netip.MustParsePrefix(tt.want) || b.KeyChain != tt.chain || b.VRF != tt.vrf {
			t.Errorf("BindingFor(%s, %q) = %+v, %v; want %s chain %s", tt.peer, tt.vrf, b, err, tt.want, tt.chain)
		}
	}
}
