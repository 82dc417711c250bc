package main

import (
	"fmt"
	"io"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/peerconfig"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// renderLinkPeerConfig renders the far end of the interface neighbour k
// (issue 53): the chain its neighbor_interface binding names, the keys
// that apply to link-local addresses (policy.ChainKeysOnLink), for a far
// end that peers with this router on its interface farIface ("" unknown)
// the same way. A TCP-MD5 password is not rendered for it: interface
// neighbours run TCP-AO.
func renderLinkPeerConfig(w io.Writer, pol *policy.Policy, snap *keystore.Snapshot, k peer.Key, local, farIface, source string, t peerconfig.Target, o peerconfig.Options) ([]peerconfig.Refusal, error) {
	if o.Migrate {
		return nil, validationError{fmt.Errorf("peer %s: an interface neighbour has no TCP-MD5 link to migrate", k)}
	}
	b, keys, err := pol.ChainKeysOnLink(snap, k.Link.Name(), k.VRF)
	if err != nil {
		return nil, validationError{err}
	}
	if len(keys) == 0 {
		return nil, validationError{fmt.Errorf("peer %s: chain %s has no usable key for a link-local neighbour", k, b.KeyChain)}
	}
	c, _ := pol.Chain(b.KeyChain)
	l := peerconfig.Mirror(k.Name(), local, b, c.AcceptTolerance, keys, source)
	l.Unnumbered, l.Interface = true, farIface
	return peerconfig.Render(w, t, l, o)
}
