// Package gobgp implements bgp.Speaker for an unmodified gobgpd v3 through
// its gRPC API: ListPeer for the peer list (Peers), WatchEvent (peer events) for
// session state changes with the live ports of each connection, ResetPeer.
//
// The API is reached through the API interface, which declares only the
// RPCs called (api.GobgpApiClient implements it; tests use a fake). The
// watch stream can end at any time (gobgpd restart, network): Watch
// reconnects with exponential backoff and re-lists the peers, delivering an
// EventSync, so that consumers reconcile what they may have missed.
//
// ListPeer reports the configured ports of a neighbor (usually 0), not the
// live ones; only peer events carry the live local and remote ports.
// A neighbor's auth-password (TCP-MD5) is read only to set PeerInfo.MD5 and
// never kept.
package gobgp
