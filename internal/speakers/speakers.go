// Package speakers is the vocabulary a kind of BGP speaker is described
// in: what it can hold (Caps), and BGP's port. It depends on nothing of
// aokeyd but tcpao, so that every package that decides something by the
// speaker (policy's binding checks, aoctl peer-config's renderings, the
// BGP adapters, the connect guard) can read it.
//
// The registry of the kinds aokeyd drives, one entry each with its config
// section and that section's validation, is config's (config.SpeakerKinds):
// a section's validation places each problem at its YAML node with
// config's parser, so the entries live beside it. config imports this
// package; this package imports no part of aokeyd but tcpao.
package speakers

import (
	"fmt"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Port is BGP's port (RFC 4271): the port of a speaker's listener, and of
// the connects `aokeyd exec` keys. Every kind's default (config's registry
// entries), and the one place it is written.
const Port = 179

// Caps is what a kind of speaker can hold and do. The zero value is the
// most restrictive speaker: each field says that it can do more, so a
// capability that is not declared is one that is not there.
type Caps struct {
	// VRFs: it keys neighbors in VRFs other than the default one.
	VRFs bool
	// SeparatesVRFs: it tells one neighbor address in two VRFs apart (two
	// neighbors); without it two bindings of one address in two VRFs
	// cannot be served.
	SeparatesVRFs bool
	// PrefixBindings: a policy binding may name a prefix (its neighbors
	// are keyed together); without it each binding names one address.
	PrefixBindings bool
	// ExcludesTCPOptions: it can hold a key that leaves TCP options out
	// of the MAC (include_tcp_options: false, tcp_options: exclude).
	ExcludesTCPOptions bool
	// SetsMACLength: it can hold a MAC length other than the kernel's
	// default (tcpao.DefaultMACLen); without it the length is fixed.
	SetsMACLength bool
	// KeysOwnSockets: the speaker puts the keys on its sockets itself
	// (aokeyd writes its configuration and reads its sockets, never
	// writes them); it is then driven by an executor, not opened as a
	// bgp.Speaker whose sockets aokeyd keys.
	KeysOwnSockets bool
	// InterfaceNeighbours: it reports interface neighbours (BGP
	// unnumbered: FRR's `neighbor swp1 interface`) under their
	// interface, so a binding may name them (neighbor_interface).
	InterfaceNeighbours bool
	// Replace, Adopt and Migrate: aoctl replace (an edit of a key's
	// material in place), aoctl adopt (a key put on a socket by someone
	// else) and aoctl migrate (TCP-MD5 to TCP-AO) are carried out.
	Replace, Adopt, Migrate bool
}

// Kind names a kind of speaker and says what it can hold: what the
// checks of bindings and keys read of config's registry entry.
type Kind struct {
	// Name is speaker.type's value ("gobgp"), as problems name the kind.
	Name string
	// Title names the speaker program in problems ("gobgpd", "BIRD").
	Title string
	Caps  Caps
}

// KeyProblem says why k cannot hold a key with this MAC length (0: the
// kernel's default) and TCP-option coverage, or nil.
func (k Kind) KeyProblem(macLen uint8, includeTCPOptions bool) error {
	switch {
	case !includeTCPOptions && !k.Caps.ExcludesTCPOptions:
		return fmt.Errorf("%s has no setting to exclude TCP options from the MAC (tcp_options: exclude): its keys always include them", k.Title)
	case macLen != 0 && macLen != tcpao.DefaultMACLen && !k.Caps.SetsMACLength:
		return fmt.Errorf("%s has no MAC length setting and uses the kernel's %d-byte default; this key's MAC is %d bytes", k.Title, tcpao.DefaultMACLen, macLen)
	}
	return nil
}
