package daemon

import (
	"net/netip"
	"slices"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// neighborhood is what the listeners hold for each neighbor, as a
// migration's covering prefix must regard it (migrate.Covering), by VRF:
// read once for a migrate request, and added to as each of its
// migrations starts, so that the members of a peering LAN migrated
// together each regard the prefixes taken before them.
type neighborhood struct {
	mg    *migrations
	snap  *keystore.Snapshot
	pol   *policy.Policy
	now   time.Time
	byVRF map[string][]lanEntry
}

// lanEntry is one migrate.Neighbor and whose it is (zero: a binding of a
// prefix of peers).
type lanEntry struct {
	peer peer.Key
	n    migrate.Neighbor
}

func (mg *migrations) neighborhood(snap *keystore.Snapshot, pol *policy.Policy, now time.Time) *neighborhood {
	return &neighborhood{mg: mg, snap: snap, pol: pol, now: now, byVRF: map[string][]lanEntry{}}
}

// vrf reads the VRF's neighbors, once: each binding's password and
// TCP-AO keys where the listener holds them (a migration's prefix while
// it is active; the password until its migration is done), a binding
// whose keys cannot be computed or that has none as unsigned, and every
// neighbor the speaker has without a binding as unsigned.
func (nb *neighborhood) vrf(vrf string) []lanEntry {
	if es, ok := nb.byVRF[vrf]; ok {
		return es
	}
	var es []lanEntry
	for _, b := range nb.pol.Bindings() {
		if b.VRF != vrf {
			continue
		}
		var key peer.Key
		name := b.Neighbor.String()
		if b.Neighbor.IsSingleIP() {
			key = peer.KeyOf(b.Neighbor.Addr(), vrf)
			name = key.String()
		}
		entry := func(at netip.Prefix, kind migrate.Kind, ids []migrate.KeyIDs) {
			es = append(es, lanEntry{key, migrate.Neighbor{Name: name, Prefix: at, Kind: kind, IDs: ids}})
		}
		pk, err := nb.pol.Desired(nb.snap, b.Neighbor.Addr(), vrf, nb.now)
		if err != nil {
			entry(b.Neighbor, migrate.Unsigned, nil) // not known: never covered
			continue
		}
		r, ok := nb.mg.migrationOf(b.Neighbor.Addr(), vrf)
		active := ok && r.Step.Active() && b.Neighbor.IsSingleIP()
		if md5Peer(pk) && !(active && r.Step == migrate.Done) {
			entry(b.Neighbor, migrate.MD5, nil)
		}
		switch {
		case (!md5Peer(pk) || active) && len(pk.Keys) > 0:
			at := b.Neighbor
			if active {
				at = r.Prefix
			}
			entry(at, migrate.AO, nb.ids(b, pk))
		case !md5Peer(pk) && len(pk.Keys) == 0:
			entry(b.Neighbor, migrate.Unsigned, nil)
		}
	}
	for _, p := range nb.mg.table.peerList() {
		if p.info.VRF != vrf {
			continue
		}
		if _, err := nb.pol.BindingFor(p.info.Neighbor.Unmap(), vrf); err != nil {
			k := peer.KeyOf(p.info.Neighbor, vrf)
			es = append(es, lanEntry{k, migrate.Neighbor{Name: k.String(), Prefix: hostPrefix(k.Addr), Kind: migrate.Unsigned}})
		}
	}
	nb.byVRF[vrf] = es
	return es
}

// others are the VRF's neighbors but the peer.
func (nb *neighborhood) others(p peer.Key) []migrate.Neighbor {
	var out []migrate.Neighbor
	for _, e := range nb.vrf(p.VRF) {
		if e.peer != p {
			out = append(out, e.n)
		}
	}
	return out
}

// started adds the peer's TCP-AO keys at its covering prefix.
func (nb *neighborhood) started(p peer.Key, at netip.Prefix, ids []migrate.KeyIDs) {
	nb.byVRF[p.VRF] = append(nb.vrf(p.VRF), lanEntry{p, migrate.Neighbor{Name: p.String(), Prefix: at, Kind: migrate.AO, IDs: ids}})
}

// ids are the IDs of the binding's keys: those due now (pk) and every
// other its chain may install later (policy.IDsAhead), so that a
// covering prefix chosen today does not clash with a roll's key.
func (nb *neighborhood) ids(b policy.Binding, pk policy.PeerKeys) []migrate.KeyIDs {
	ids, _ := nb.pol.IDsAhead(nb.snap, b.Neighbor.Addr(), b.VRF, nb.now) // an error: pk's keys alone
	for _, k := range pk.Keys {
		if id := (migrate.KeyIDs{Send: k.MKT.SendID, Recv: k.MKT.RecvID}); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}
