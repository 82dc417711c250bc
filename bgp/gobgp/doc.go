// Package gobgp implements bgp.Speaker for an unmodified gobgpd, v3 or v4,
// through its gRPC API: ListPeer for the peer list (Peers), WatchEvent
// (peer events) for session state changes with the live ports of each
// connection, ResetPeer.
//
// # API lines
//
// GoBGP v3 (service apipb.GobgpApi, module github.com/osrg/gobgp/v3) and
// v4 (service api.GoBgpService, module github.com/osrg/gobgp/v4; v4.8.0 is
// the one built and tested here) make the same calls under other names
// and enum values. Each line is a backend (v3, v4) behind the Speaker,
// which keeps the watch, re-list and backoff logic once; the neighbor's
// conversion is shared too (peerInfoOf, over the getters both lines'
// messages have). New takes a v3 client (the API interface, which
// declares only the RPCs called; tests use a fake), NewV4 a v4 one; Dial
// picks by Options.API, or detects it (APIAuto): v4's GetBgp answered is
// v4, Unimplemented is v3, decided at the first call that reaches gobgpd
// and again for each new watch stream (a restarted gobgpd may be another
// version).
//
// GoBGP 4.10 adds its own TCP-AO keychains (keys on its sockets, a
// keychain change restarting the peer). Not built here: no 4.10 module is
// served to this project's machines, and nothing of it is faked. It would
// not be a third backend of this package: a speaker that keys its own
// sockets is driven through its interface rather than by borrowing its
// sockets (see package bgp, "Speakers that key their own sockets"), so
// that adapter implements that seam and this package's Speaker (sessions,
// events, resets) stays as it is.
//
// The watch stream can end at any time (gobgpd restart, network): Watch
// reconnects with exponential backoff and re-lists the peers, delivering an
// EventSync, so that consumers reconcile what they may have missed.
//
// ListPeer reports the configured ports of a neighbor (usually 0), not the
// live ones; only peer events carry the live local and remote ports.
// A neighbor's auth-password (TCP-MD5) is read only to set PeerInfo.MD5 and
// never kept.
package gobgp
