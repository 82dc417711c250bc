package keystore

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Lifetime is an RFC 8177-style key lifetime (send-lifetime or
// accept-lifetime). The zero value is "always". A zero Start means "since
// forever", a zero End "for ever".
type Lifetime struct {
	Start time.Time
	End   time.Time
}

// Always is the lifetime that contains every instant.
var Always = Lifetime{}

// IsAlways reports whether l has neither start nor end.
func (l Lifetime) IsAlways() bool { return l.Start.IsZero() && l.End.IsZero() }

// Contains reports whether t lies in [Start, End).
func (l Lifetime) Contains(t time.Time) bool {
	if !l.Start.IsZero() && t.Before(l.Start) {
		return false
	}
	if !l.End.IsZero() && !t.Before(l.End) {
		return false
	}
	return true
}

func (l Lifetime) String() string {
	if l.IsAlways() {
		return "always"
	}
	s, e := "-", "-"
	if !l.Start.IsZero() {
		s = l.Start.UTC().Format(time.RFC3339)
	}
	if !l.End.IsZero() {
		e = l.End.UTC().Format(time.RFC3339)
	}
	return s + ".." + e
}

// MKT is one Master Key Tuple (RFC 5925 section 3.1) as an operator thinks of
// it.
//
// Orientation: an MKT is written from the point of view of the router that
// loads it. SendID is the KeyID this router puts in the segments it sends;
// RecvID is the KeyID it expects in segments it receives. The peer router
// holds the mirror image: its SendID is our RecvID and its RecvID is our
// SendID. Secret, algorithm, MAC length and TCP-option coverage must be equal
// on both sides.
type MKT struct {
	// Name identifies the MKT within its chain (e.g. "2026-11").
	Name string
	// Chain is the key chain the MKT belongs to.
	Chain  string
	SendID uint8
	RecvID uint8
	// Algorithm is the MAC algorithm.
	Algorithm tcpao.Algorithm
	// Secret is the traffic key's master key; 1..80 bytes (16 for
	// cmac(aes128)). It redacts itself when printed.
	Secret tcpao.Secret
	// MACLen is the MAC length in bytes (default 12).
	MACLen uint8
	// Peers are the neighbor addresses or prefixes the MKT applies to.
	Peers []netip.Prefix
	// VRF is the name of the L3 master device, "" for the default VRF.
	VRF string
	// IncludeTCPOptions is RFC 5925's TCP option flag; false sets
	// TCP_AO_KEYF_EXCLUDE_OPT.
	IncludeTCPOptions bool
	SendLifetime      Lifetime
	AcceptLifetime    Lifetime
	// Revoked marks a compromised key: it is removed everywhere and never
	// installed again.
	Revoked bool
	// Source says where the MKT was read from, for error messages and
	// status ("vault:kv/aokeyd/chains/core#2026-11", "file:/etc/aokeyd/keys.yaml:12").
	Source string
}

// String never includes the secret.
func (m MKT) String() string {
	return fmt.Sprintf("%s/%s send=%d recv=%d alg=%s", m.Chain, m.Name, m.SendID, m.RecvID, m.Algorithm)
}

// LogValue never includes the secret.
func (m MKT) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("chain", m.Chain),
		slog.String("key", m.Name),
		slog.Int("send_id", int(m.SendID)),
		slog.Int("recv_id", int(m.RecvID)),
		slog.String("alg", string(m.Algorithm)),
	)
}

// Chain is a named list of MKTs read from one place in a source.
type Chain struct {
	Name string
	Keys []MKT
	// Version is the source's version of the chain (Vault KV v2 version,
	// or a content hash counter for files); it changes when the chain does.
	Version uint64
	// Rejected lists the MKTs of this chain that failed validation; the
	// valid ones in Keys still load.
	Rejected []error
}

// Snapshot is an immutable view of a key source at one instant. The rest of
// aokeyd only ever sees snapshots.
type Snapshot struct {
	Source string
	ReadAt time.Time
	Chains map[string]*Chain
}

// Source is where MKTs come from.
type Source interface {
	// Name describes the source for logs and status ("vault https://…/kv",
	// "file /etc/aokeyd/keys.yaml").
	Name() string
	// Read returns a new snapshot. On error the caller keeps its last good
	// snapshot: nothing is deleted because a source is unreachable.
	Read(ctx context.Context) (*Snapshot, error)
	// Revoke marks the named key of a chain as revoked in the source, so that
	// other routers reading the same source learn of it.
	Revoke(ctx context.Context, chain, key string) error
}
