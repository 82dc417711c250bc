package policy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
	"gopkg.in/yaml.v3"
)

// MaxFileSize bounds the size of a policy file.
const MaxFileSize = 4 << 20

// Load reads and parses the policy file at path.
func Load(path string, opts ...Option) (*Policy, error) {
	unreadable := func(err error) error {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", pe.Op, pe.Err) // the path is the problem's file
		}
		return &Problem{Pos: Pos{File: path}, Err: fmt.Errorf("%w: %w", ErrUnreadable, err)}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, unreadable(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, unreadable(err)
	}
	return Parse(path, data, opts...)
}

// Option configures Parse and Load.
type Option func(*options)

type options struct {
	seed []byte
}

// WithJitterSeed sets the seed of every rotation schedule's per-peer jitter
// (see Schedule.Offset). Routers that must agree on a plan use the same
// seed. Default: empty.
func WithJitterSeed(seed []byte) Option {
	return func(o *options) { o.seed = append([]byte(nil), seed...) }
}

// Parse parses and checks a policy. file names the policy in problems. On
// failure the error is a Problems listing everything found, each with its
// line.
func Parse(file string, data []byte, opts ...Option) (*Policy, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	b := &builder{file: file, seed: o.seed}
	if len(data) > MaxFileSize {
		b.problem(Pos{File: file}, "", fmt.Errorf("%w: file is larger than %d bytes", ErrSyntax, MaxFileSize))
		return nil, b.probs
	}
	if !b.decode(data) {
		return nil, b.probs
	}
	p := b.build()
	if len(b.probs) > 0 {
		return nil, b.probs
	}
	return p, nil
}

type builder struct {
	file  string
	seed  []byte
	root  *yaml.Node // while building; the Policy keeps text
	text  []byte
	raw   rawFile
	probs Problems
}

func (b *builder) problem(pos Pos, field string, err error) {
	b.probs = append(b.probs, &Problem{Pos: pos, Field: field, Err: err})
}

// add records a problem at the YAML path field.
func (b *builder) add(field string, err error) {
	b.problem(b.pos(field), field, err)
}

func (b *builder) addf(field string, sentinel error, format string, args ...any) {
	b.add(field, fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...)))
}

func (b *builder) pos(field string) Pos { return posOf(b.root, b.file, field) }

// decode reads data twice: into a node tree (for positions) and strictly
// into rawFile (unknown fields are errors).
func (b *builder) decode(data []byte) bool {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	switch err := dec.Decode(&root); {
	case errors.Is(err, io.EOF):
		b.problem(Pos{File: b.file}, "", fmt.Errorf("%w: empty policy", ErrSyntax))
		return false
	case err != nil:
		b.yamlErr(err)
		return false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			b.yamlErr(err)
			return false
		}
		b.problem(Pos{File: b.file, Line: line}, "", fmt.Errorf("%w: more than one YAML document", ErrSyntax))
		return false
	}
	b.root, b.text = &root, bytes.Clone(data)
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&b.raw); err != nil {
		b.yamlErr(err)
		return false
	}
	return true
}

// rawTypes renders the policy's Go types in yaml.v3's messages by the
// names the operator knows.
var rawTypes = strings.NewReplacer(
	"policy.rawFile", "policy", "policy.rawDefault", "defaults", "policy.rawSafety", "safety",
	"policy.rawChain", "key chain", "policy.rawKey", "key", "policy.rawRotation", "rotation",
	"policy.rawPeer", "peer", "policy.duration", "duration", "policy.timestamp", "time",
	"policy.lifetime", "lifetime",
)

// yamlErr records yaml.v3's messages as problems with lines.
func (b *builder) yamlErr(err error) {
	b.probs = append(b.probs, keystore.YAMLErrors(b.file, err, keystore.YAMLSchema{Types: rawTypes, Target: rawFile{}, Root: b.root, HideKeyMaterial: true})...)
}

// posOf is the position in file of the node at the YAML path field (see
// find); only the file when root is nil.
func posOf(root *yaml.Node, file, field string) Pos {
	n := find(root, field)
	if n == nil {
		return Pos{File: file}
	}
	return Pos{File: file, Line: n.Line, Column: n.Column}
}

// find follows a path such as "peers[2].key_chain" from the document root
// and returns the deepest node it reaches (keystore.FindNode: the key
// file's errors are placed the same way).
func find(root *yaml.Node, path string) *yaml.Node { return keystore.FindNode(root, path) }

func child(n *yaml.Node, key string) *yaml.Node { return keystore.ChildNode(n, key) }

func (b *builder) build() *Policy {
	r := &b.raw
	p := &Policy{file: b.file, text: b.text, seed: b.seed, byName: map[string]*KeyChain{}}
	if r.Version != nil && *r.Version != 1 {
		b.addf("version", ErrInvalid, "version %d is not supported (want 1)", *r.Version)
	}
	tol := DefaultAcceptTolerance
	if r.Defaults.AcceptTolerance != nil {
		tol = timeDur(*r.Defaults.AcceptTolerance)
	}
	aoRequired := DefaultAORequired
	if r.Defaults.AORequired != nil {
		aoRequired = *r.Defaults.AORequired
	}
	p.safety = b.safety(DefaultSafety(), &r.Safety, "safety")

	for i := range r.KeyChains {
		c := b.chain(&r.KeyChains[i], fmt.Sprintf("key_chains[%d]", i), tol)
		if c.Name == "" {
			continue
		}
		if prev, dup := p.byName[c.Name]; dup {
			b.addf(c.Field+".name", ErrDuplicate, "key chain %s already defined at line %d", keystore.Shown(c.Name), prev.Pos.Line)
			continue
		}
		p.byName[c.Name] = c
		p.chains = append(p.chains, c)
	}

	for i := range r.Peers {
		rp := &r.Peers[i]
		field := fmt.Sprintf("peers[%d]", i)
		bd := &Binding{VRF: rp.VRF, KeyChain: rp.KeyChain, AORequired: aoRequired, Pos: b.pos(field), Field: field}
		ok := true
		if rp.NeighborInterface != nil {
			ok = b.linkBinding(rp, bd, field)
		} else if pfx, err := parseNeighbor(rp.Neighbor); err != nil {
			b.add(field+".neighbor", err)
			if errors.Is(err, ErrMissingField) {
				b.probs[len(b.probs)-1].Hint = "name the peer by neighbor (an address or prefix) or neighbor_interface (an interface, \"*\" or a list)"
			}
			ok = false
		} else {
			bd.Neighbor = pfx
		}
		if err := checkVRF(rp.VRF); err != nil {
			b.add(field+".vrf", err)
		}
		chain, known := p.byName[rp.KeyChain]
		switch {
		case rp.KeyChain == "":
			b.add(field+".key_chain", ErrMissingField)
		case !known:
			b.addf(field+".key_chain", ErrUnknownChain, "%s is not defined under key_chains", shown(rp.KeyChain))
			b.probs[len(b.probs)-1].Hint = "name one of the chains key_chains defines: " + nameList(slices.Collect(maps.Keys(p.byName)))
		}
		bd.IncludeTCPOptions = r.Defaults.IncludeTCPOptions
		if rp.IncludeTCPOptions != nil {
			bd.IncludeTCPOptions = rp.IncludeTCPOptions
		}
		if rp.AORequired != nil {
			bd.AORequired = *rp.AORequired
		}
		bd.Safety = p.safety
		if rp.Safety != nil {
			bd.Safety = b.safety(p.safety, rp.Safety, field+".safety")
		}
		if known && chain.Rotation != nil && bd.Safety.SwitchTimeout > chain.Rotation.Grace {
			b.addf(field+".key_chain", ErrInvalid,
				"switch_timeout %s is longer than the grace %s of key chain %q: the old key would expire while waiting for the peer to switch",
				FormatDuration(bd.Safety.SwitchTimeout), FormatDuration(chain.Rotation.Grace), chain.Name)
		}
		if !ok {
			continue
		}
		if bd.IsLink() {
			if o := p.linkOverlap(bd); o != nil {
				b.addf(field+".neighbor_interface", ErrOverlap, "%s overlaps %s of %s (line %d) in %s",
					bd.linkString(), o.linkString(), o.Field, o.Pos.Line, vrfName(bd.VRF))
				continue
			}
			p.links = append(p.links, bd)
			continue
		}
		if o := p.firstOverlap(bd); o != nil {
			b.addf(field+".neighbor", ErrOverlap, "%s overlaps %s of %s (line %d) in %s",
				bd.Neighbor, o.Neighbor, o.Field, o.Pos.Line, vrfName(bd.VRF))
			continue
		}
		p.bindings = append(p.bindings, bd)
		p.index.add(len(p.bindings)-1, bd)
	}
	slices.SortStableFunc(b.probs, func(x, y *Problem) int { return cmp.Or(x.Line-y.Line, x.Column-y.Column) })
	return p
}

// firstOverlap returns the first binding in file order that is in bd's VRF
// and overlaps bd's neighbor prefix, nil when there is none. A host prefix
// overlaps exactly the bindings that contain its address, which the index
// finds; a wider prefix is compared with every binding.
func (p *Policy) firstOverlap(bd *Binding) *Binding {
	if bd.Neighbor.IsSingleIP() {
		if i, ok := p.index.lookup(bd.Neighbor.Addr(), bd.VRF); ok {
			return p.bindings[i]
		}
		return nil
	}
	for _, o := range p.bindings {
		if o.VRF == bd.VRF && o.Neighbor.Overlaps(bd.Neighbor) {
			return o
		}
	}
	return nil
}

func (b *builder) safety(base Safety, r *rawSafety, field string) Safety {
	s := base
	if r.SwitchTimeout != nil {
		s.SwitchTimeout = timeDur(*r.SwitchTimeout)
		if s.SwitchTimeout <= 0 {
			b.addf(field+".switch_timeout", ErrInvalid, "must be positive")
		}
	}
	if r.RetryAfter != nil {
		s.RetryAfter = timeDur(*r.RetryAfter)
		if s.RetryAfter <= 0 {
			b.addf(field+".retry_after", ErrInvalid, "must be positive")
		}
	}
	if r.OnSwitchTimeout != nil {
		switch a := SwitchTimeoutAction(*r.OnSwitchTimeout); a {
		case SwitchRetry, SwitchAlert:
			s.OnSwitchTimeout = a
		default:
			b.addf(field+".on_switch_timeout", ErrInvalid, "%s (want retry or alert)", keystore.Shown(*r.OnSwitchTimeout))
		}
	}
	if r.OnRevokeOnlyKey != nil {
		switch a := RevokeAction(*r.OnRevokeOnlyKey); a {
		case RevokeReset, RevokeKeep:
			s.OnRevokeOnlyKey = a
		default:
			b.addf(field+".on_revoke_only_key", ErrInvalid, "%s (want reset or keep)", keystore.Shown(*r.OnRevokeOnlyKey))
		}
	}
	if r.OnKeyExpiry != nil {
		switch a := ExpiryAction(*r.OnKeyExpiry); a {
		case ExpiryKeep, ExpiryRemove:
			s.OnKeyExpiry = a
		default:
			b.addf(field+".on_key_expiry", ErrInvalid, "%s (want keep or remove)", keystore.Shown(*r.OnKeyExpiry))
		}
	}
	return s
}

func (b *builder) chain(r *rawChain, field string, tol time.Duration) *KeyChain {
	c := &KeyChain{Name: r.Name, SourceChain: r.SourceChain, AcceptTolerance: tol, Pos: b.pos(field), Field: field}
	if r.Name == "" {
		b.add(field+".name", ErrMissingField)
	}
	if c.SourceChain == "" {
		c.SourceChain = r.Name
	}
	if r.AcceptTolerance != nil {
		c.AcceptTolerance = timeDur(*r.AcceptTolerance)
	}
	if r.Keys != nil {
		c.Keys = make([]KeyRef, 0, len(r.Keys))
		seen := map[string]int{}
		for j, rk := range r.Keys {
			kf := fmt.Sprintf("%s.keys[%d]", field, j)
			k := KeyRef{Name: rk.Name, Pos: b.pos(kf), Field: kf}
			if rk.Name == "" {
				b.add(kf+".name", ErrMissingField)
				continue
			}
			if line, dup := seen[rk.Name]; dup {
				b.addf(kf+".name", ErrDuplicate, "key %s already listed at line %d", keystore.Shown(rk.Name), line)
				continue
			}
			seen[rk.Name] = k.Pos.Line
			if rk.Lifetime != nil {
				if rk.SendLifetime != nil || rk.AcceptLifetime != nil {
					b.addf(kf+".lifetime", ErrInvalid, "lifetime sets both send and accept lifetimes; drop send_lifetime and accept_lifetime or lifetime")
				}
				l := keystore.Lifetime(*rk.Lifetime)
				k.SendLifetime, k.AcceptLifetime = &l, &l
			}
			if rk.SendLifetime != nil {
				l := keystore.Lifetime(*rk.SendLifetime)
				k.SendLifetime = &l
			}
			if rk.AcceptLifetime != nil {
				l := keystore.Lifetime(*rk.AcceptLifetime)
				k.AcceptLifetime = &l
			}
			c.Keys = append(c.Keys, k)
		}
	}
	if r.Rotation != nil {
		c.Rotation = b.rotation(r.Rotation, field+".rotation")
	}
	return c
}

func (b *builder) rotation(r *rawRotation, field string) *Rotation {
	rot := &Rotation{Start: time.Unix(0, 0).UTC(), Algorithm: DefaultRotationAlgorithm}
	if r.Start != nil {
		rot.Start = timeOf(*r.Start)
	}
	req := func(d *duration, name string) time.Duration {
		if d == nil {
			b.add(field+"."+name, ErrMissingField)
			return 0
		}
		return timeDur(*d)
	}
	rot.Interval = req(r.Interval, "interval")
	rot.Lead = req(r.Lead, "lead")
	rot.Grace = req(r.Grace, "grace")
	if r.Jitter != nil {
		rot.Jitter = timeDur(*r.Jitter)
	}
	if r.Interval != nil && rot.Interval <= 0 {
		b.addf(field+".interval", ErrInvalid, "must be positive")
	}
	if rot.Interval > 0 {
		for _, x := range []struct {
			name string
			d    time.Duration
			set  bool
		}{{"lead", rot.Lead, r.Lead != nil}, {"grace", rot.Grace, r.Grace != nil}, {"jitter", rot.Jitter, r.Jitter != nil}} {
			if x.set && x.d >= rot.Interval {
				b.addf(field+"."+x.name, ErrInvalid, "%s %s must be shorter than the interval %s",
					x.name, FormatDuration(x.d), FormatDuration(rot.Interval))
			}
		}
	}
	if r.Algorithm != nil {
		a, err := tcpao.ParseAlgorithm(*r.Algorithm)
		if err != nil {
			b.addf(field+".algorithm", ErrAlgorithm, "%s (want one of %s)", keystore.Shown(*r.Algorithm), algorithmList())
		} else {
			rot.Algorithm = a
		}
	}
	rot.KeyLength = DefaultRotationKeyLength
	if rot.Algorithm == tcpao.CMACAES128 {
		rot.KeyLength = 16
	}
	if r.KeyLength != nil {
		rot.KeyLength = *r.KeyLength
		if err := checkKeyLength(rot.Algorithm, rot.KeyLength); err != nil {
			b.add(field+".key_length", err)
		}
	}
	if r.MACLength != nil {
		if err := checkMACLength(rot.Algorithm, *r.MACLength); err != nil {
			b.add(field+".mac_length", err)
		} else {
			rot.MACLength = uint8(*r.MACLength)
		}
	}
	return rot
}

func algorithmList() string {
	s := make([]string, len(tcpao.Algorithms))
	for i, a := range tcpao.Algorithms {
		s[i] = string(a)
	}
	return strings.Join(s, ", ")
}

func checkKeyLength(a tcpao.Algorithm, n int) error {
	if n < 1 || n > tcpao.MaxKeyLen {
		return fmt.Errorf("%w: %d bytes (want 1..%d)", ErrKeyLength, n, tcpao.MaxKeyLen)
	}
	if a == tcpao.CMACAES128 && n != 16 {
		return fmt.Errorf("%w: cmac(aes128) needs 16 bytes, have %d", ErrKeyLength, n)
	}
	return nil
}

// digestSize is the MAC output of each algorithm in bytes.
func digestSize(a tcpao.Algorithm) int {
	switch a {
	case tcpao.HMACSHA1:
		return 20
	case tcpao.HMACSHA256:
		return 32
	}
	return 16
}

// checkMACLength checks an explicit MAC length (0 is not explicit).
func checkMACLength(a tcpao.Algorithm, n int) error {
	limit := min(MaxMACLength, digestSize(a))
	if n < 1 || n > limit {
		return fmt.Errorf("%w: %d bytes (want 1..%d for %s)", ErrMACLength, n, limit, a)
	}
	return nil
}

func parseNeighbor(s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, ErrMissingField
	}
	var pfx netip.Prefix
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%w: neighbor %s is not an address or prefix", ErrInvalid, keystore.Shown(s))
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("%w: neighbor %s has host bits set (did you mean %s?)", ErrInvalid, keystore.Shown(s), p.Masked())
		}
		pfx = p
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			pfx = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%w: neighbor %s is not an address or prefix", ErrInvalid, keystore.Shown(s))
		}
		if a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%w: neighbor %s: zones are not supported, use vrf", ErrInvalid, keystore.Shown(s))
		}
		a = a.Unmap()
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	return pfx, nil
}

func vrfName(v string) string {
	if v == "" {
		return "the default VRF"
	}
	return fmt.Sprintf("VRF %q", v)
}

// checkVRF accepts "" or a Linux interface name (IFNAMSIZ-1 = 15 bytes).
func checkVRF(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 15 || v == "." || v == ".." || strings.ContainsAny(v, "/: \t\n\x00") {
		return fmt.Errorf("%w: vrf %s is not a valid device name", ErrInvalid, keystore.Shown(v))
	}
	return nil
}

const rfc3339 = time.RFC3339

func timeOf(t timestamp) time.Time     { return time.Time(t) }
func timeDur(d duration) time.Duration { return time.Duration(d) }
