// Package peerconfig renders the far end's TCP-AO configuration for one
// peer's key chain: what the router on the other side of a BGP session
// aokeyd protects must hold so that both ends use the same keys. It is the
// mirror image of the MKTs aokeyd installs (Mirror): send and receive IDs
// swapped, algorithm, secret, MAC length and TCP-option coverage equal,
// the same lifetimes. Each target (BIRD, Junos, IOS-XR, EOS, GoBGP, a
// second aokeyd, RFC 9648 YANG instance data) spells that in its own
// vocabulary and form; what a target cannot express is refused with the
// reason (a Refusal) rather than rendered wrongly, since a mismatch in any
// of these fields silently drops the segments of the next connection.
//
// Secrets are rendered as a placeholder naming where the key source keeps
// them, written so that the far end refuses it (nobody deploys a
// placeholder by accident, or has it taken as the secret), unless
// Options.WithSecrets is set: one form on every target,
// "SECRET-NOT-RENDERED: ... <secret: SOURCE> ... (aoctl peer-config
// --with-secrets prints it)" (renderer.notRendered).
//
// Comments use the vocabulary of RFC 8177 (ietf-key-chain: send-lifetime,
// accept-lifetime, accept-tolerance) and RFC 9648 (ietf-tcp authentication:
// send-id, recv-id, include-tcp-options, accept-key-mismatch).
package peerconfig

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/speakers"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Target is a kind of far end.
type Target string

// Targets.
const (
	BIRD   Target = "bird"
	Junos  Target = "junos"
	IOSXR  Target = "iosxr"
	EOS    Target = "eos"
	GoBGP  Target = "gobgp"
	Aokeyd Target = "aokeyd"
	YANG   Target = "yang"
)

// Targets lists every target in the order `aoctl peer-config --help` shows.
var Targets = []Target{BIRD, Junos, IOSXR, EOS, GoBGP, Aokeyd, YANG}

// ParseTarget returns the target named s.
func ParseTarget(s string) (Target, error) {
	for _, t := range Targets {
		if string(t) == s {
			return t, nil
		}
	}
	names := make([]string, len(Targets))
	for i, t := range Targets {
		names[i] = string(t)
	}
	return "", fmt.Errorf("unknown target %q (want one of %s)", s, strings.Join(names, ", "))
}

// Key is one MKT as the far end holds it: SendID and RecvID are the far
// end's (aokeyd's RecvID and SendID).
type Key struct {
	Name              string
	SendID, RecvID    uint8
	Algorithm         tcpao.Algorithm
	MACLen            uint8 // effective (the default applied)
	IncludeTCPOptions bool
	Send, Accept      keystore.Lifetime
	// Secret is the key's bytes (shared with the caller's snapshot: never
	// zeroed here); Source says where the key source keeps it.
	Secret tcpao.Secret
	Source string
}

// Link is one peer's chain, seen from the far end.
type Link struct {
	// Peer is the neighbor aokeyd protects: the far end itself. Local is
	// aokeyd's router as the far end sees it ("" when not known: the
	// rendering then shows a placeholder).
	Peer, Local string
	VRF         string
	Chain       string
	// AcceptTolerance widens accept lifetimes on aokeyd's side (RFC 8177
	// accept-tolerance).
	AcceptTolerance time.Duration
	Keys            []Key
	// KeySource names aokeyd's key source ("file /etc/aokeyd/keys.yaml").
	KeySource string
	// Unnumbered: aokeyd peers with the far end as an interface
	// neighbour (issue 53: FRR's `neighbor swp1 interface`), over IPv6
	// link-local addresses learned at run time; the far end peers with
	// aokeyd's router on its Interface ("" when not known: the rendering
	// then shows a placeholder) the same way.
	Unnumbered bool
	Interface  string
	// MD5 is the chain's TCP-MD5 password when it holds one for the
	// peer (HasMD5): the link runs TCP-MD5 until it is migrated.
	MD5       tcpao.Secret
	HasMD5    bool
	MD5Source string
}

// Mirror turns the keys aokeyd holds for a peer (policy.ChainKeys) into
// the far end's: IDs swapped, everything else equal.
func Mirror(peer, local string, b policy.Binding, tol time.Duration, keys []policy.ScheduledKey, source string) Link {
	l := Link{Peer: peer, Local: local, VRF: b.VRF, Chain: b.KeyChain, AcceptTolerance: tol, KeySource: source}
	for _, k := range keys {
		l.Keys = append(l.Keys, Key{
			Name: k.MKT.Name, SendID: k.MKT.RecvID, RecvID: k.MKT.SendID,
			Algorithm: k.MKT.Algorithm, MACLen: k.MKT.EffectiveMACLen(), IncludeTCPOptions: k.IncludeTCPOptions,
			Send: k.SendLifetime, Accept: k.AcceptLifetime, Secret: k.MKT.Secret, Source: k.MKT.Source,
		})
	}
	return l
}

// MKT is k as the far end's MKT (for keystore.CheckMirror).
func (k Key) MKT(chain string) keystore.MKT {
	return keystore.MKT{Name: k.Name, Chain: chain, SendID: k.SendID, RecvID: k.RecvID, Algorithm: k.Algorithm,
		Secret: k.Secret, MACLen: k.MACLen, IncludeTCPOptions: k.IncludeTCPOptions,
		SendLifetime: k.Send, AcceptLifetime: k.Accept, Source: "peer-config"}
}

// Options control a rendering.
type Options struct {
	// At is the instant a target without time-based lifetimes (BIRD) is
	// rendered for; its later boundaries are listed as instructions.
	At time.Time
	// WithSecrets renders the key bytes instead of placeholders.
	WithSecrets bool
	// Migrate renders a TCP-MD5 link's move to TCP-AO at At (aoctl
	// migrate's switch time): the TCP-AO configuration that replaces the
	// password. Without it a TCP-MD5 link renders its password.
	Migrate bool
	// FarEnd is what the far end's speaker can hold when the target is a
	// kind of speaker aokeyd drives (aoctl peer-config passes its entry's
	// of config's registry): a BIRD far end refuses the keys it says BIRD
	// cannot hold. The zero value holds least, so a caller that passes
	// none gets every refusal.
	FarEnd speakers.Caps
}

// Refusal is one thing a target cannot express: the key (or "" for the
// whole chain) is left out or only partly rendered.
type Refusal struct {
	Target Target
	Key    string
	Reason string
}

func (r Refusal) String() string {
	if r.Key == "" {
		return fmt.Sprintf("%s: %s", r.Target, r.Reason)
	}
	return fmt.Sprintf("%s: key %s: %s", r.Target, r.Key, r.Reason)
}

// Render writes l's far end configuration for target t to w. The refusals
// say what it could not express (also written into the output as
// comments); an error means nothing usable was written. With any
// refusal what was written is a diagnostic, not a configuration to apply
// (aoctl peer-config prints none of it); a chain of which a target can
// take no key is refused as a whole and written as comments only, never
// as a neighbor with TCP-AO switched on and no key.
func Render(w io.Writer, t Target, l Link, o Options) ([]Refusal, error) {
	if o.At.IsZero() {
		o.At = time.Now()
	}
	r := &renderer{w: w, t: t, l: l, o: o}
	if l.HasMD5 && !o.Migrate && t != BIRD {
		r.refuse("", "the link runs TCP-MD5 (the chain's md5 password): its TCP-MD5 configuration is rendered for BIRD only; "+
			"render its move to TCP-AO with --migrate")
		return r.refused, nil
	}
	if l.Unnumbered && t != BIRD && t != Aokeyd {
		r.refuse("", "an interface neighbour's far end is rendered for aokeyd (FRR's neighbor IFACE interface) and bird (neighbor ADDR %% \"IFACE\") only")
		return r.refused, nil
	}
	switch t {
	case BIRD:
		r.bird()
	case Junos:
		r.junos()
	case IOSXR:
		r.iosxr()
	case EOS:
		r.eos()
	case GoBGP:
		r.gobgp()
	case Aokeyd:
		r.aokeyd()
	case YANG:
		r.yang()
	default:
		return nil, fmt.Errorf("peerconfig: unknown target %q", t)
	}
	return r.refused, r.err
}

// renderer is one rendering: the output, and what was refused.
type renderer struct {
	w       io.Writer
	t       Target
	l       Link
	o       Options
	refused []Refusal
	err     error
}

func (r *renderer) printf(format string, a ...any) {
	if r.err == nil {
		_, r.err = fmt.Fprintf(r.w, format, a...)
	}
}

// refuse records that key (or the chain, key "") cannot be expressed.
func (r *renderer) refuse(key, format string, a ...any) {
	r.refused = append(r.refused, Refusal{Target: r.t, Key: key, Reason: fmt.Sprintf(format, a...)})
}

// header writes the comment block every rendering starts with: what it is,
// the vendor document its syntax follows, and the ID orientation.
func (r *renderer) header(c, doc string) {
	l := r.l
	r.printf("%s Far end of aokeyd's TCP-AO chain %q for peer %s", c, l.Chain, l.Peer)
	if l.VRF != "" {
		r.printf(" (VRF %s)", l.VRF)
	}
	r.printf(", rendered by aoctl peer-config --for %s\n", r.t)
	r.printf("%s Syntax follows: %s\n", c, doc)
	r.printf("%s RFC 9648 ietf-tcp authentication: send-id/recv-id are the far end's (aokeyd's recv-id/send-id);\n", c)
	r.printf("%s secret, algorithm, MAC length and include-tcp-options equal on both ends; accept-key-mismatch false.\n", c)
	r.printf("%s RFC 8177 lifetimes as aokeyd holds them (UTC)", c)
	if l.AcceptTolerance > 0 {
		r.printf("; aokeyd's accept-tolerance %s", fmtDur(l.AcceptTolerance))
	}
	r.printf(".\n")
	if hint, ok := md5Removal[r.t]; ok && r.o.Migrate {
		r.printf("%s MIGRATION from TCP-MD5 at %s: in one change at that time, remove the neighbor's TCP-MD5 password\n", c, fmtTime(r.o.At))
		r.printf("%s (%s) and apply what follows; the session restarts once, with TCP-AO (aokeyd's side takes either kind meanwhile).\n", c, hint)
	}
	if r.t == BIRD || r.t == GoBGP || r.t == Aokeyd {
		// The far end is a Linux BGP speaker: its kernel does the MACs.
		for _, k := range l.Keys {
			if !slices.Contains(linux72Algorithms, k.Algorithm) {
				r.printf("%s WARNING: key %s uses %s, which Linux 7.2 and later refuse for TCP-AO (they accept %s only): a Linux far end stops installing it on its next kernel.\n",
					c, k.Name, k.Algorithm, strings.Join(algNames(linux72Algorithms), ", "))
			}
		}
	}
}

// md5Removal is how each far end drops its TCP-MD5 password, for a
// migration's rendering (BIRD's says it in its own lines).
var md5Removal = map[Target]string{
	Junos:  "delete ... neighbor ADDRESS authentication-key",
	IOSXR:  "under the neighbor: no password",
	EOS:    "no neighbor ADDRESS password",
	GoBGP:  "the neighbor's auth-password",
	Aokeyd: "the chain's md5 password, once aokeyd migrated: aoctl migrate",
}

// linux72Algorithms are the TCP-AO algorithms Linux 7.2 and later accept
// (TCP_AO_ADD_KEY answers ENOENT for any other). Every algorithm aokeyd
// offers is one of them (TestAokeydAlgorithmsOnLinux72), so the warning
// header writes for a Linux far end fires only if that ever changes.
var linux72Algorithms = []tcpao.Algorithm{tcpao.HMACSHA1, tcpao.HMACSHA256, tcpao.CMACAES128}

func algNames(as []tcpao.Algorithm) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}

// secret renders k's secret with enc, or, unless Options.WithSecrets,
// where the key source keeps it: "<secret: SOURCE>". That alone may still
// read as a secret to a target (IOS-XR's key-string takes the text that
// follows it); the statement holding it goes through notRendered.
func (r *renderer) secret(k Key, enc func([]byte) string) string {
	if r.o.WithSecrets {
		return enc(k.Secret.Bytes())
	}
	return "<secret: " + k.Source + ">"
}

// notRendered is stmt, a statement (or, in YAML and JSON, a value) that
// holds a secret, as written: itself with Options.WithSecrets, else a
// placeholder that the far end refuses, one form on every target:
// "SECRET-NOT-RENDERED: STMT (aoctl peer-config --with-secrets prints
// it)", STMT holding "<secret: SOURCE>" where the secret goes. In a CLI
// (Junos, IOS-XR, EOS, BIRD) the marker stands where the command word
// does, and no target has a command of that name; in YAML the value holds
// ": ", which YAML refuses in a plain scalar; in JSON it is a
// hexadecimal-string that is no hex string. Each target says next to its
// use why its parser refuses it. Never a quoted string or a value after
// the target's secret keyword: each target takes those as the secret.
func (r *renderer) notRendered(stmt string) string {
	if r.o.WithSecrets {
		return stmt
	}
	return secretNotRendered + " " + stmt + " (" + withSecretsHint + ")"
}

// secretNotRendered starts every placeholder (notRendered).
const (
	secretNotRendered = "SECRET-NOT-RENDERED:"
	withSecretsHint   = "aoctl peer-config --with-secrets prints it"
)

// placeholderNote is the comment line (comment leader c) a rendering with
// placeholders carries above them.
func (r *renderer) placeholderNote(c, target string) {
	if !r.o.WithSecrets {
		r.printf("%s A statement starting %s stands for one holding a secret that is not rendered: %s refuses it.\n", c, secretNotRendered, target)
	}
}

// local is the far end's neighbor (aokeyd's router), or a placeholder.
func (r *renderer) local() string {
	switch {
	case r.l.Local != "":
		return r.l.Local
	case r.l.Unnumbered:
		return "<aokeyd-router-link-local-address>"
	}
	return "<aokeyd-router-address>"
}

// iface is the far end's interface toward aokeyd's router on an
// unnumbered link, or a placeholder.
func (r *renderer) iface() string {
	if r.l.Interface != "" {
		return r.l.Interface
	}
	return "<far-end-interface>"
}

// printable reports whether b is a secret a CLI string can carry: printable
// ASCII without spaces or quotes.
func printable(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c > '~' || c == '"' || c == '\'' || c == '\\' {
			return false
		}
	}
	return len(b) > 0
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func fmtDur(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int64(d/time.Second))
	}
	return d.String()
}

// installed reports whether the far end holds k at t (send-valid, or
// accept-valid within aokeyd's tolerance), sendable whether it may send
// with it.
func (l Link) installed(k Key, t time.Time) (installed, sendable bool) {
	s := k.Send.Contains(t)
	return s || k.Accept.Widen(l.AcceptTolerance).Contains(t), s
}

// preferred is the index of the key the far end sends with at t among
// the usable ones (as aokeyd picks Current_key: the sendable key with the
// latest send start, then the later send end, then the greater name), -1
// for none.
func (l Link) preferred(t time.Time, usable []bool) int {
	best := -1
	for i, k := range l.Keys {
		if _, s := l.installed(k, t); !s || !usable[i] {
			continue
		}
		if best < 0 || later(k, l.Keys[best]) {
			best = i
		}
	}
	return best
}

func later(a, b Key) bool {
	if c := a.Send.Start.Compare(b.Send.Start); c != 0 {
		return c > 0
	}
	ae, be := a.Send.End, b.Send.End
	switch {
	case ae.IsZero() != be.IsZero():
		return ae.IsZero()
	case !ae.Equal(be):
		return ae.After(be)
	}
	return a.Name > b.Name
}

// boundaries are the instants after t at which some key's lifetimes (the
// accept ends widened by the tolerance) begin or end, sorted.
func (l Link) boundaries(t time.Time) []time.Time {
	var out []time.Time
	add := func(x time.Time) {
		if !x.IsZero() && x.After(t) && !slices.ContainsFunc(out, x.Equal) {
			out = append(out, x)
		}
	}
	for _, k := range l.Keys {
		add(k.Send.Start)
		add(k.Send.End)
		if !k.Accept.Start.IsZero() {
			add(k.Accept.Start.Add(-l.AcceptTolerance))
		}
		if !k.Accept.End.IsZero() {
			add(k.Accept.End.Add(l.AcceptTolerance))
		}
	}
	slices.SortFunc(out, time.Time.Compare)
	return out
}

// shared is the key whose setting decides one that a target has per
// neighbor, not per key: the usable key sent with at t, else the first
// usable key; -1 when none is usable.
func (l Link) shared(t time.Time, usable []bool) int {
	if p := l.preferred(t, usable); p >= 0 {
		return p
	}
	return slices.Index(usable, true)
}
