package fleet

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
)

// Schema is the Document and RevocationList format version.
const Schema = 1

// Document is one router's fleet status, published every refresh.
type Document struct {
	Schema   int    `json:"schema"`
	RouterID string `json:"router_id"`
	// Addresses are the router's own addresses (unmapped, without a
	// zone): the configured ones and the local addresses of its
	// established sessions, in whatever VRF. A link's candidate ends are
	// found by matching a peer's address against the other router's
	// addresses (Join).
	Addresses   []netip.Addr `json:"addresses"`
	PublishedAt time.Time    `json:"published_at"`
	// Refresh is the router's key source refresh interval: how often it
	// publishes and reads the revocation record.
	Refresh Duration `json:"refresh"`
	// SwitchTimeout is how long a roll may take at this router (the
	// policy's switch timeout).
	SwitchTimeout Duration  `json:"switch_timeout"`
	KeySource     KeySource `json:"key_source"`
	Peers         []Peer    `json:"peers"`
	// Revocations are the fleet revocations this router has applied.
	Revocations []Applied `json:"revocations,omitempty"`
	Warnings    []string  `json:"warnings,omitempty"`
}

// KeySource is the health of the router's key source.
type KeySource struct {
	LastSync time.Time `json:"last_sync,omitzero"`
	Stale    bool      `json:"stale"`
}

// Peer is one BGP neighbor of the router.
type Peer struct {
	// ID is the peer: its address and this router's VRF of it. In the
	// document it is the two fields every aokeyd has written, address and
	// vrf (MarshalJSON), so that routers of any version read each
	// other's documents during an upgrade.
	ID peerkey.Key `json:"-"`
	// Neighbor is the address an interface neighbour (ID a link, issue
	// 53) learned, invalid before one; unset for a peer by address (Addr).
	Neighbor netip.Addr `json:"-"`
	// Local is the local address of the established session (zero when
	// down).
	Local   netip.Addr `json:"local,omitzero"`
	Session string     `json:"session"`
	// Auth is how the peer's sessions authenticate (control.PeerStatus
	// Auth: none, tcp-md5, tcp-ao, migrating (STEP)); Migration the
	// peer's move from TCP-MD5 to TCP-AO, if any.
	Auth      string             `json:"auth,omitempty"`
	Migration *control.Migration `json:"migration,omitempty"`
	Chain     string             `json:"chain,omitempty"`
	Keys      []Key              `json:"keys"`
	// Current and RNext name the keys (chain/name, or "send=X recv=Y"
	// when the key source does not know them); "" when none.
	Current string `json:"current,omitempty"`
	RNext   string `json:"rnext,omitempty"`
	// CurrentSince is when this router first saw Current as the session's
	// Current_key.
	CurrentSince time.Time `json:"current_since,omitzero"`
	Roll         Roll      `json:"roll"`
	Counters     Counters  `json:"counters"`
	Warnings     []string  `json:"warnings,omitempty"`
}

// peerFields is Peer without its methods: the fields encoding/json
// writes besides the identity.
type peerFields Peer

// MarshalJSON writes the peer's identity as the fields address and vrf
// ("" omitted), then the other fields. A peer without an address is not
// written.
func (p Peer) MarshalJSON() ([]byte, error) {
	if !p.ID.IsValid() {
		return nil, fmt.Errorf("fleet: a peer without an address")
	}
	iface := ""
	if p.ID.IsLink() {
		iface = p.ID.Link.Name()
	}
	return json.Marshal(struct {
		Address   netip.Addr `json:"address"`
		Interface string     `json:"interface,omitempty"`
		VRF       string     `json:"vrf,omitempty"`
		peerFields
	}{p.Addr(), iface, p.ID.VRF, peerFields(p)})
}

// Addr is the address p's sessions peer with: its ID's, or the address an
// interface neighbour learned (invalid before one). The join pairs peers
// by it.
func (p Peer) Addr() netip.Addr {
	if p.ID.IsLink() {
		return p.Neighbor
	}
	return p.ID.Addr
}

// UnmarshalJSON reads MarshalJSON's form: an address (normalised as
// peer.KeyOf does) and a VRF.
func (p *Peer) UnmarshalJSON(b []byte) error {
	w := struct {
		Address   string `json:"address"`
		Interface string `json:"interface"`
		VRF       string `json:"vrf"`
		*peerFields
	}{peerFields: (*peerFields)(p)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p.Local = p.Local.Unmap().WithZone("")
	if w.Interface != "" {
		// An interface neighbour: its link is its identity, the address
		// what it learned ("" before one).
		if err := peerkey.CheckLinkName(w.Interface); err != nil {
			return fmt.Errorf("fleet: peer interface: %w", err)
		}
		p.ID, p.Neighbor = peerkey.OnLink(w.Interface, w.VRF), netip.Addr{}
		if w.Address != "" {
			a, err := netip.ParseAddr(w.Address)
			if err != nil {
				return fmt.Errorf("fleet: peer %s's address %q: %w", w.Interface, w.Address, err)
			}
			p.Neighbor = a.Unmap().WithZone("")
		}
		return nil
	}
	a, err := netip.ParseAddr(w.Address)
	if err != nil {
		return fmt.Errorf("fleet: peer address %q: %w", w.Address, err)
	}
	p.ID = peerkey.KeyOf(a, w.VRF)
	return nil
}

// Key is one MKT of a peer, by name and IDs only.
type Key struct {
	Chain  string `json:"chain,omitempty"`
	Name   string `json:"name,omitempty"`
	SendID uint8  `json:"send_id"`
	RecvID uint8  `json:"recv_id"`
	Alg    string `json:"alg"`
	// IncludeTCPOptions is the MAC's coverage of TCP options other than
	// TCP-AO (RFC 9648 include-tcp-options).
	IncludeTCPOptions bool      `json:"include_tcp_options"`
	SendEnd           time.Time `json:"send_end,omitzero"`
	AcceptEnd         time.Time `json:"accept_end,omitzero"`
	Current           bool      `json:"current"`
	RNext             bool      `json:"rnext"`
	// State is the aokeyd key state (installed, pending, retiring,
	// revoked).
	State string `json:"state"`
}

// Ref names k as chain/name, or by its IDs when unnamed.
func (k Key) Ref() string {
	if k.Name == "" {
		return idRef(k.SendID, k.RecvID)
	}
	return k.Chain + "/" + k.Name
}

// Roll is the peer's rotation state.
type Roll struct {
	State      string    `json:"state"`
	Since      time.Time `json:"since,omitzero"`
	PendingKey string    `json:"pending_key,omitempty"`
	LastAbort  string    `json:"last_abort_reason,omitempty"`
}

// Counters are the session's TCP-AO counters.
type Counters struct {
	PktGood        uint64 `json:"pkt_good"`
	PktBad         uint64 `json:"pkt_bad"`
	PktKeyNotFound uint64 `json:"pkt_key_not_found"`
}

// Revocation is one fleet revocation: a key to remove from every router.
type Revocation struct {
	Chain  string    `json:"chain"`
	Key    string    `json:"key"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Ref is chain/key.
func (r Revocation) Ref() string { return r.Chain + "/" + r.Key }

// RevocationList is the fleet's revocation record.
type RevocationList struct {
	Schema      int          `json:"schema"`
	Revocations []Revocation `json:"revocations"`
}

// Applied is a fleet revocation as one router applied it: when it read it
// (Seen) and when none of its sockets held the key any more (Clean, zero
// while some socket still does; Error says why).
type Applied struct {
	Chain string    `json:"chain"`
	Key   string    `json:"key"`
	At    time.Time `json:"at"` // the revocation's own time, to tell it apart
	Seen  time.Time `json:"seen"`
	Clean time.Time `json:"clean,omitzero"`
	// Sockets is how many sockets held the key when it was applied.
	Sockets int `json:"sockets"`
	// NotInSource: this router's key source has no such key, so no
	// socket of it can hold it; it is applied again if the key appears.
	NotInSource bool   `json:"not_in_source,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Ref is chain/key.
func (a Applied) Ref() string { return a.Chain + "/" + a.Key }
