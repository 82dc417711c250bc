package rotator

import (
	"net/netip"

	"github.com/aokeyd/aokeyd/tcpao"
)

// MD5Desired is the TCP-MD5 side of one listening socket's desired state
// (issue 34: TCP-MD5 passwords kept in the key source until each peer has
// moved to TCP-AO).
//
// The never-strand rule for TCP-MD5, which PlanMD5 alone applies: a
// TCP-MD5 connection has one password for its whole life, and its peer
// reconnects with the password the listener holds, so an installed MD5
// key of aokeyd's leaves the listener only when Retire names it (its
// peer's session was proved to run TCP-AO: the migration's clean-up) or
// Revoked does (an operator revoked the password), and its password is
// changed only when ApproveChange names it (an operator planned the
// reset). A key aokeyd did not install is never touched.
type MD5Desired struct {
	// Keys are the passwords to have installed, one per peer prefix.
	Keys []tcpao.MD5Key
	// Retire, Revoked and ApproveChange name installed keys that may
	// go, or take their new password (see above). A retired key goes only
	// where AOCovers says TCP-AO covers its peer: the listener never
	// holds neither kind for a peer that had one.
	Retire, Revoked, ApproveChange []tcpao.MD5Ref
	// AOCovers reports whether TCP-AO keys on the socket cover a
	// prefix's address: the kernel then refuses an MD5 key for it
	// (EKEYREJECTED), and aokeyd never moves a peer from TCP-AO back to
	// TCP-MD5 on its own.
	AOCovers func(netip.Addr) bool
	// Owns reports whether an installed key is aokeyd's. Nil: every
	// key whose password is a desired one.
	Owns func(tcpao.MD5Info) bool
}

// MD5Op is one TCP_MD5SIG_EXT call: an add (Key set, which replaces the
// password of an installed key at the same reference) or a delete.
type MD5Op struct {
	Del bool
	Key tcpao.MD5Key // an add's key; its Secret is the desired key's, not a copy
	Ref tcpao.MD5Ref
	Why Reason
}

// MD5Held is an MD5 key the planner left as it is, or did not add.
type MD5Held struct {
	Ref tcpao.MD5Ref
	Why Reason
}

// MD5Plan is PlanMD5's answer.
type MD5Plan struct {
	Ops  []MD5Op
	Held []MD5Held
}

// PlanMD5 plans one socket's TCP-MD5 keys: have is what the kernel holds
// (read back through sock_diag). Deletes come before adds, so that a
// retired key never shares the socket with its successor longer than the
// plan takes.
func PlanMD5(d MD5Desired, have []tcpao.MD5Info) MD5Plan {
	var p MD5Plan
	// named finds r in list and returns the list's reference, whose
	// ifindex a delete needs (sock_diag does not show it).
	named := func(list []tcpao.MD5Ref, r tcpao.MD5Ref) (tcpao.MD5Ref, bool) {
		for _, x := range list {
			if normMD5(x) == r {
				return x, true
			}
		}
		return r, false
	}
	want := make(map[tcpao.MD5Ref]int, len(d.Keys))
	for i, k := range d.Keys {
		want[normMD5(k.MD5Ref)] = i
	}
	owns := func(h tcpao.MD5Info) bool {
		if d.Owns != nil {
			return d.Owns(h)
		}
		i, ok := want[normMD5(h.MD5Ref)]
		return ok && d.Keys[i].Secret.Fingerprint() == h.Fingerprint
	}
	installed := make(map[tcpao.MD5Ref]tcpao.MD5Info, len(have))
	var adds []MD5Op
	for _, h := range have {
		r := normMD5(h.MD5Ref)
		installed[r] = h
		i, desired := want[r]
		switch {
		case !owns(h):
			if desired {
				p.Held = append(p.Held, MD5Held{r, ReasonForeignClash})
			} else {
				p.Held = append(p.Held, MD5Held{r, ReasonForeign})
			}
		case desired && d.Keys[i].Secret.Fingerprint() == h.Fingerprint:
			// As it should be.
		case desired:
			if _, ok := named(d.ApproveChange, r); ok {
				adds = append(adds, MD5Op{Key: d.Keys[i], Ref: d.Keys[i].MD5Ref, Why: ReasonReplace})
			} else {
				p.Held = append(p.Held, MD5Held{r, ReasonEdited})
			}
		default:
			if x, ok := named(d.Revoked, r); ok {
				p.Ops = append(p.Ops, MD5Op{Del: true, Ref: x, Why: ReasonRevoked})
				continue
			}
			if x, ok := named(d.Retire, r); ok {
				// Never leave the peer with neither kind: retired only
				// where TCP-AO covers it (rotator/model/migrate.pml found
				// a revoke of the TCP-AO key racing the clean-up).
				if d.AOCovers != nil && d.AOCovers(r.Peer.Addr()) {
					p.Ops = append(p.Ops, MD5Op{Del: true, Ref: x, Why: ReasonMigrated})
				} else {
					p.Held = append(p.Held, MD5Held{r, ReasonNoReplace})
				}
				continue
			}
			p.Held = append(p.Held, MD5Held{r, ReasonCarried})
		}
	}
	for _, k := range d.Keys {
		r := normMD5(k.MD5Ref)
		if _, ok := installed[r]; ok {
			continue
		}
		if d.AOCovers != nil && d.AOCovers(r.Peer.Addr()) {
			p.Held = append(p.Held, MD5Held{r, ReasonAOCovers})
			continue
		}
		adds = append(adds, MD5Op{Key: k, Ref: k.MD5Ref, Why: ReasonNew})
	}
	p.Ops = append(p.Ops, adds...)
	return p
}

// normMD5 is r as the planner compares it: an IPv4-mapped address
// unmapped, as the kernel keeps an IPv4 peer's key on an IPv6 socket, and
// no ifindex, which sock_diag does not show (two VRFs' keys for one
// prefix on one listener are one key to the planner).
func normMD5(r tcpao.MD5Ref) tcpao.MD5Ref {
	r.Peer = MD5Prefix(r.Peer)
	r.IfIndex = 0
	return r
}

// MD5Prefix is a TCP-MD5 key's peer prefix as the kernel keeps it: an
// IPv4-mapped address unmapped (its length already counts IPv4 bits, as
// tcpao spells an IPv4 peer on an IPv6 socket).
func MD5Prefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() {
		return netip.PrefixFrom(a.Unmap(), p.Bits())
	}
	return p
}

// ApplyMD5 runs a plan's operations on s in order; it stops at the first
// error and returns it with the operations done.
func ApplyMD5(s tcpao.Socket, ops []MD5Op) (int, error) {
	m, err := tcpao.MD5(s)
	if err != nil {
		return 0, err
	}
	for i, op := range ops {
		if op.Del {
			err = m.DelMD5(op.Ref)
		} else {
			k := op.Key
			k.MD5Ref = op.Ref
			err = m.AddMD5(k)
		}
		if err != nil {
			return i, err
		}
	}
	return len(ops), nil
}
