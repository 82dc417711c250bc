package peerconfig

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/tcpao"
)

const birdDoc = "BIRD 2.17 User's Guide (doc/bird.sgml), BGP options `authentication ao` and `keys { key { send id; recv id; secret; algorithm; preferred; deprecated; }; }`; example: https://routing.denog.de/guides/control_plane_protection/tcp-authentication-option"

// birdKey is one entry of BIRD's key list at an instant.
type birdKey struct {
	k                     Key
	preferred, deprecated bool
}

// birdKeys are the keys BIRD holds at t: the ones installed then, the one
// sent with preferred, the accept-only ones deprecated (BIRD accepts them
// but sends with none of them).
func (r *renderer) birdKeys(t time.Time, usable []bool) []birdKey {
	p := r.l.preferred(t, usable)
	var out []birdKey
	for i, k := range r.l.Keys {
		in, s := r.l.installed(k, t)
		if !in || !usable[i] {
			continue
		}
		out = append(out, birdKey{k: k, preferred: i == p, deprecated: !s})
	}
	return out
}

// bird renders the `authentication ao` block of the far end's `protocol
// bgp` for the instant o.At, and, since BIRD has no time-based lifetimes,
// what the operator changes at each later lifetime boundary.
func (r *renderer) bird() {
	r.header("#", birdDoc)
	if r.l.HasMD5 && !r.o.Migrate {
		r.placeholderNote("#", "BIRD")
		r.printf("# TCP-MD5 (RFC 2385): the key chain's md5 password (aoctl migrate moves the link to TCP-AO). Inside `protocol bgp` for neighbor %s:\n", r.birdNeighbor())
		// Not `password "<...>"`, a quoted text BIRD takes as the
		// password: notRendered (bird below says why BIRD refuses it).
		pw := "<md5 password: " + r.l.MD5Source + ">"
		if r.o.WithSecrets {
			pw = strconv.Quote(string(r.l.MD5.Bytes()))
		}
		r.printf("\tauthentication md5;\n\t%s;\n", r.notRendered("password "+pw))
		return
	}
	if r.o.Migrate {
		r.printf("# MIGRATION from TCP-MD5 at %s: in one `birdc configure`, remove the neighbor's `password` line and add the\n", fmtTime(r.o.At))
		r.printf("# lines below; BIRD restarts the session once, with TCP-AO (aokeyd's side takes either kind meanwhile).\n")
	}
	usable := make([]bool, len(r.l.Keys))
	for i, k := range r.l.Keys {
		switch {
		case !k.IncludeTCPOptions && !r.o.FarEnd.ExcludesTCPOptions:
			r.refuse(k.Name, "BIRD has no setting to exclude TCP options from the MAC (include-tcp-options false); its keys always include them, so this key would never verify")
		case k.MACLen != tcpao.DefaultMACLen && !r.o.FarEnd.SetsMACLength:
			r.refuse(k.Name, "BIRD has no MAC length setting and uses the kernel's %d-byte default; this key's MAC is %d bytes", tcpao.DefaultMACLen, k.MACLen)
		default:
			usable[i] = true
		}
	}
	for _, f := range r.refused {
		r.printf("# REFUSED key %s: %s\n", f.Key, f.Reason)
	}
	r.placeholderNote("#", "BIRD")
	at := r.o.At
	r.printf("# BIRD has no time-based key lifetimes: these are the keys for %s\n", fmtTime(at))
	r.printf("# (RFC 8177 send-lifetime -> preferred; accept-only -> deprecated). Inside `protocol bgp` for neighbor %s:\n", r.birdNeighbor())
	if r.l.VRF != "" {
		r.printf("\tvrf %s;\n", strconv.Quote(r.l.VRF))
	}
	r.printf("\tauthentication ao;\n\tkeys {\n")
	cur := r.birdKeys(at, usable)
	for _, b := range cur {
		// In the key block the placeholder stands where a statement
		// starts: SECRET is no BIRD keyword but an undefined symbol, and
		// BIRD's parser stops there ("syntax error, unexpected
		// CF_SYM_UNDEFINED"; TestPlaceholderRefused has BIRD 2.17 and
		// 3.1 read it).
		r.printf("\t\tkey { send id %d; recv id %d; %s; algorithm %s;", b.k.SendID, b.k.RecvID,
			r.notRendered("secret "+r.secret(b.k, func(s []byte) string { return "hex:" + hex.EncodeToString(s) })), bird.Algorithm(b.k.Algorithm))
		if b.preferred {
			r.printf(" preferred;")
		}
		if b.deprecated {
			r.printf(" deprecated;")
		}
		r.printf(" };\n")
	}
	r.printf("\t};\n")
	switch {
	case len(cur) == 0:
		r.refuse("", "no key is installed at %s: BIRD would run the session without TCP-AO keys", fmtTime(at))
		r.printf("# REFUSED: no key is installed at %s\n", fmtTime(at))
	case !slices.ContainsFunc(cur, func(b birdKey) bool { return !b.deprecated }):
		// BIRD needs a key it may send with ("No usable TCP-AO key"), and
		// aokeyd has none either at this instant: marking an accept-only
		// key preferred would have BIRD send with a key aokeyd's policy
		// says is past (or before) its send lifetime. The chain needs a
		// key whose send lifetime covers the instant.
		r.refuse("", "every key installed at %s is accept-only (deprecated), and BIRD refuses a key list without a key to send with (\"No usable TCP-AO key\"): give a key a send lifetime that covers this instant in aokeyd's key source, or render for another time with --at", fmtTime(at))
		r.printf("# REFUSED: every key is deprecated at %s; BIRD refuses such a key list\n", fmtTime(at))
	}
	bs := r.l.boundaries(at)
	if len(bs) == 0 {
		r.printf("# No later lifetime boundary: this key list stays right.\n")
		return
	}
	r.printf("# At each lifetime boundary, change the key list and run `birdc configure`\n")
	r.printf("# (or render it again: aoctl peer-config %s --for bird --at TIME):\n", r.l.Peer)
	for _, t := range bs {
		next := r.birdKeys(t, usable)
		steps := birdSteps(cur, next)
		if len(steps) == 0 {
			continue
		}
		r.printf("#   %s: %s\n", fmtTime(t), strings.Join(steps, "; "))
		cur = next
	}
}

// birdSteps says what changes from key list a to b.
func birdSteps(a, b []birdKey) []string {
	find := func(l []birdKey, name string) (birdKey, bool) {
		for _, x := range l {
			if x.k.Name == name {
				return x, true
			}
		}
		return birdKey{}, false
	}
	var steps []string
	for _, y := range b {
		x, ok := find(a, y.k.Name)
		switch {
		case !ok:
			s := fmt.Sprintf("add key %s (send id %d, recv id %d)", y.k.Name, y.k.SendID, y.k.RecvID)
			if y.deprecated {
				s += " deprecated"
			}
			steps = append(steps, s)
		case y.deprecated && !x.deprecated:
			steps = append(steps, "mark "+y.k.Name+" deprecated")
		case !y.deprecated && x.deprecated:
			steps = append(steps, "un-deprecate "+y.k.Name)
		}
		if y.preferred && (!ok || !x.preferred) {
			steps = append(steps, "make "+y.k.Name+" preferred")
		}
	}
	for _, x := range a {
		if _, ok := find(b, x.k.Name); !ok {
			steps = append(steps, "remove key "+x.k.Name)
		}
	}
	return steps
}

// birdNeighbor is aokeyd's router as the far end's `neighbor` names it:
// on an unnumbered link its link-local address on the far end's
// interface, `fe80::a % "eth1"` (BIRD's form for a link-local neighbor).
func (r *renderer) birdNeighbor() string {
	if r.l.Unnumbered {
		return r.local() + " % " + strconv.Quote(r.iface())
	}
	return r.local()
}
