package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/peerconfig"
	"github.com/aokeyd/aokeyd/internal/speakers"
)

func (a *app) peerConfig() *cmd {
	var cfgPath, target, vrf, local, farIface, at string
	var migrate bool
	var withSecrets bool
	names := make([]string, len(peerconfig.Targets))
	for i, t := range peerconfig.Targets {
		names[i] = string(t)
	}
	fs := a.flagSet("peer-config", "PEER --for "+strings.Join(names, "|")+" [--config FILE] [--local ADDR] [--at TIME] [--with-secrets]", func(w io.Writer) {
		fmt.Fprint(w, `
Renders the far end's TCP-AO configuration for PEER's key chain, from the
same config, policy and key source aokeyd uses: send and receive IDs
swapped, algorithm names, include-TCP-options and lifetimes in the target's
form. What the target cannot express is refused with the reason on stderr
(exit status 4), and then nothing is printed on stdout: a configuration
with a key or setting left out is not one to apply. BIRD has no time-based
lifetimes: it gets the keys for --at and what to change at each later
boundary. Secrets are placeholders naming where the key source keeps them,
in a statement starting SECRET-NOT-RENDERED: that every target refuses (a
placeholder is never loaded, nor taken as the secret), unless
--with-secrets. --for yang prints RFC 9648 (ietf-tcp) / RFC 8177
(ietf-key-chain) JSON instance data. --json prints one object: the
rendering as text (config), or what the target refused (refused: key,
reason; then no config, exit status 4). PEER may be an interface
neighbour's interface (FRR's neighbor swp1 interface): its far end peers
over link-local addresses on its own interface (--far-interface), and is
rendered for bird (neighbor ADDR % "IFACE") and aokeyd (FRR) only.
`)
	})
	fs.StringVar(&cfgPath, "config", "/etc/aokeyd/aokeyd.yaml", "aokeyd config to read the chain from")
	fs.StringVar(&target, "for", "", "the far end: "+strings.Join(names, ", "))
	fs.StringVar(&vrf, "vrf", "", "PEER's VRF (default: the default VRF)")
	fs.StringVar(&local, "local", "", "this router's address as the far end sees it (default: a placeholder)")
	fs.StringVar(&farIface, "far-interface", "", "an interface neighbour's far end: its interface toward this router (default: a placeholder)")
	fs.StringVar(&at, "at", "", "render for this time (RFC 3339 or date; default now)")
	fs.BoolVar(&withSecrets, "with-secrets", false, "print the key bytes instead of placeholders")
	fs.BoolVar(&migrate, "migrate", false, "a TCP-MD5 link's move to TCP-AO at --at (aoctl migrate's switch time)")
	return a.cmd(fs, func(ctx context.Context) int {
		if fs.NArg() != 1 {
			return a.usageErr("peer-config", "name one PEER (the neighbor address, or an interface neighbour's interface)")
		}
		k, err := peerArg(fs.Arg(0), vrf)
		if err != nil {
			return a.usageErr("peer-config", "PEER %q: want the neighbor's address, or an interface neighbour's interface", fs.Arg(0))
		}
		if farIface != "" && !k.IsLink() {
			return a.usageErr("peer-config", "--far-interface: PEER %s is no interface neighbour", k.Name())
		}
		t, err := peerconfig.ParseTarget(target)
		if err != nil {
			return a.usageErr("peer-config", "--for: %v", err)
		}
		if local != "" {
			if _, err := netip.ParseAddr(local); err != nil {
				return a.usageErr("peer-config", "--local %q: want an address", local)
			}
		}
		now, err := a.instant(at)
		if err != nil {
			return a.usageErr("peer-config", "--at: %v", err)
		}
		if withSecrets {
			fmt.Fprintln(a.stderr, "aoctl peer-config: WARNING: --with-secrets: the output holds TCP-AO secrets; do not paste it into tickets or chat, and delete it once applied")
		}
		// Rendered aside: a refusal prints nothing on stdout, since half a
		// configuration (an empty key chain with TCP-AO switched on, a
		// key list missing a key aokeyd sends with) is not one to apply.
		var out bytes.Buffer
		defer func() { b := out.Bytes(); clear(b[:cap(b)]) }() // it may hold secrets
		o := peerconfig.Options{At: now, WithSecrets: withSecrets, Migrate: migrate, FarEnd: farEnd(t)}
		refused, err := renderPeerConfig(ctx, &out, cfgPath, k, local, farIface, t, o)
		if a.json && err == nil {
			return a.peerConfigJSON(peerConfigResult{Peer: k.Name(), VRF: vrf, For: string(t), At: now.UTC(),
				WithSecrets: withSecrets, Migrate: migrate}, out.Bytes(), refused)
		}
		if err == nil && len(refused) == 0 {
			if _, err := a.stdout.Write(out.Bytes()); err != nil {
				fmt.Fprintf(a.stderr, "aoctl peer-config: %v\n", err)
				return exitError
			}
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "aoctl peer-config: %v\n", err)
			var ve validationError
			if errors.As(err, &ve) {
				return exitInvalid
			}
			return exitError
		}
		for _, r := range refused {
			fmt.Fprintf(a.stderr, "aoctl peer-config: refused: %s\n", r)
		}
		if len(refused) > 0 {
			fmt.Fprintf(a.stderr, "aoctl peer-config: nothing printed: --for %s cannot take this chain as it is (fix what is refused above, or render for another --at)\n", t)
			return exitInvalid
		}
		return exitOK
	})
}

// farEnd is what a far end of target t can hold: its kind's capabilities
// when the registry (config.SpeakerKinds) has a kind by the target's
// name, else nothing (the targets that are no kind aokeyd drives decide
// by their own syntax).
func farEnd(t peerconfig.Target) speakers.Caps {
	if k, ok := config.SpeakerKindNamed(string(t)); ok {
		return k.Caps
	}
	return speakers.Caps{}
}

// peerArg is peer-config's PEER in vrf: the neighbor's address, or an
// interface neighbour's interface (peer.ParseArg's "swp1", "swp1
// interface").
func peerArg(s, vrf string) (peer.Key, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return peer.KeyOf(a, vrf), nil
	}
	k, err := peer.ParseArg(s)
	if err != nil || !k.IsLink() || k.VRF != "" {
		return peer.Key{}, fmt.Errorf("PEER %q is no neighbor", s)
	}
	k.VRF = vrf
	return k, nil
}

// renderPeerConfig loads the config, policy and key source as `aoctl plan
// --config` does and renders the chain of the peer k for target t; farIface
// is an interface neighbour's far end's interface ("" unknown).
func renderPeerConfig(ctx context.Context, w io.Writer, path string, k peer.Key, local, farIface string, t peerconfig.Target, o peerconfig.Options) ([]peerconfig.Refusal, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, validationError{err}
	}
	pol, err := cfg.LoadPolicy()
	if err != nil {
		return nil, validationError{err}
	}
	src, err := cfg.OpenKeySource(config.SourceOptions{Now: func() time.Time { return o.At }})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	snap, err := src.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("key source %s: %w", src.Name(), err)
	}
	defer snap.Zero()
	if k.IsLink() {
		return renderLinkPeerConfig(w, pol, snap, k, local, farIface, src.Name(), t, o)
	}
	peer, vrf := k.Addr, k.VRF
	b, keys, err := pol.ChainKeys(snap, peer, vrf)
	if err != nil {
		return nil, validationError{err}
	}
	pk, err := pol.Desired(snap, peer, vrf, o.At)
	if err != nil {
		return nil, validationError{err}
	}
	md5 := pk.MD5 != nil && !o.Migrate
	if o.Migrate && pk.MD5 == nil {
		return nil, validationError{fmt.Errorf("peer %s: chain %s holds no TCP-MD5 password: nothing to migrate", peer, b.KeyChain)}
	}
	if len(keys) == 0 && !md5 {
		return nil, validationError{fmt.Errorf("peer %s: chain %s has no usable key for it", peer, b.KeyChain)}
	}
	c, _ := pol.Chain(b.KeyChain)
	l := peerconfig.Mirror(peer.String(), local, b, c.AcceptTolerance, keys, src.Name())
	if pk.MD5 != nil {
		l.MD5, l.HasMD5, l.MD5Source = pk.MD5.Secret, true, pk.MD5.Source
	}
	return peerconfig.Render(w, t, l, o)
}

// peerConfigResult is `aoctl peer-config --json`: the rendering as the
// target reads it, or what the target refused (then no config, exit
// status 4, as without --json).
type peerConfigResult struct {
	Peer        string    `json:"peer"`
	VRF         string    `json:"vrf,omitempty"`
	For         string    `json:"for"`
	At          time.Time `json:"at"`
	WithSecrets bool      `json:"with_secrets"`
	Migrate     bool      `json:"migrate,omitempty"`
	// Config is the far end's configuration text ("" when refused).
	Config  string              `json:"config,omitempty"`
	Refused []peerConfigRefusal `json:"refused"`
}

// peerConfigRefusal is one thing the target cannot express.
type peerConfigRefusal struct {
	Key    string `json:"key,omitempty"` // "" for the whole chain
	Reason string `json:"reason"`
}

func (a *app) peerConfigJSON(res peerConfigResult, config []byte, refused []peerconfig.Refusal) int {
	res.Refused = []peerConfigRefusal{}
	for _, r := range refused {
		res.Refused = append(res.Refused, peerConfigRefusal{Key: r.Key, Reason: r.Reason})
	}
	if len(refused) > 0 {
		fmt.Fprintf(a.stderr, "aoctl peer-config: --for %s cannot take this chain as it is: see refused\n", res.For)
		return a.printJSONCode(res, exitInvalid)
	}
	res.Config = string(config)
	return a.printJSON(res)
}
