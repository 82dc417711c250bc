// Package desired computes one socket's desired TCP-AO state from the
// policy's answer: the keys, the key to send with and the revoked keys a
// forced delete may remove. It is the one computation the daemon and
// `aoctl plan` share, kept apart from the daemon so that the CLI links
// neither the daemon, the speaker adapters nor the metrics.
package desired

import (
	"bytes"
	"net/netip"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Socket converts the policy's answer for one socket into the rotator's
// input: pk's keys for peer (a host or a prefix) on L3 device ifindex,
// with pref (an index into pk.Keys, -1 for none) as the key to send with,
// and pk's revoked MKTs as the keys a forced delete may remove. The keys
// carry shared copies of their secrets (tcpao.Secret.Shared): one copy
// per key's material, whichever peers' desired states hold it (one per
// key per peer was 16,384 copies at 4,096 peers x 4 keys). Zero on them,
// which the holders of a desired state still call when they drop it,
// leaves them as they are; each is wiped once no desired state refers to
// it. aokeyd and `aoctl plan` share it so the two cannot drift.
func Socket(pk policy.PeerKeys, snap *keystore.Snapshot, peer netip.Prefix, ifindex, pref int, sock rotator.SocketID, kind rotator.Kind) rotator.Desired {
	out := rotator.Desired{Socket: sock, Kind: kind, AORequired: pk.AORequired}
	for i, k := range pk.Keys {
		out.Keys = append(out.Keys, rotator.DesiredKey{Key: k.SharedTCPAOKey(peer, ifindex), AcceptOnly: !k.Sendable && i != pref})
	}
	if pref >= 0 && pref < len(pk.Keys) {
		out.WantCurrent = rotator.ID(pk.Keys[pref].MKT.SendID)
		out.WantRNext = rotator.ID(pk.Keys[pref].MKT.RecvID)
	}
	out.Revoked = revokedRefs(snap, pk, peer, ifindex)
	return out
}

// revokedRefs are pk's revoked MKTs, and its expired ones (the policy's
// on_key_expiry: remove), looked up in the key source's chain, as kernel
// key references for peer on ifindex idx with their material's
// fingerprint. An expired key whose IDs a
// desired key has is not listed: the desired key is what those IDs name.
func revokedRefs(snap *keystore.Snapshot, pk policy.PeerKeys, peer netip.Prefix, idx int) []rotator.RevokedKey {
	c := snap.Chains[pk.SourceChain]
	if c == nil {
		return nil
	}
	var out []rotator.RevokedKey
	ref := func(name string, expired bool) {
		for _, m := range c.Keys {
			desiredIDs := slices.ContainsFunc(pk.Keys, func(k policy.ScheduledKey) bool { return k.MKT.SendID == m.SendID && k.MKT.RecvID == m.RecvID })
			if m.Name == name && !(expired && desiredIDs) {
				out = append(out, rotator.RevokedKey{KeyRef: tcpao.KeyRef{Peer: peer, IfIndex: idx, SendID: m.SendID, RecvID: m.RecvID},
					Fingerprint: m.Secret.Fingerprint()})
			}
		}
	}
	for _, name := range pk.Revoked {
		ref(name, false)
	}
	for _, name := range pk.Expired {
		ref(name, true)
	}
	return out
}

// PlanLines plans every input and renders the plan (rotator.Render) as
// lines, the form of control.PlanReport.Plan that aokeyd and `aoctl plan`
// both report.
func PlanLines(in []rotator.Input) ([]string, error) {
	var buf bytes.Buffer
	if err := rotator.Render(&buf, rotator.PlanAll(in)); err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// Namer names the key a plan line is about (chain and key in the key
// source), ok false when it cannot say which key that is.
type Namer func(sock rotator.SocketID, l rotator.PlanLine) (chain, key string, ok bool)

// PlanSteps plans every input as PlanLines does and returns the plan both
// as Render's lines (control.PlanReport.Plan, whose readers match them)
// and as steps (control.PlanReport.Steps), one per line: each step about
// a key carries its reference and, where name says, its chain and key,
// which its Text names after the verb ("1. add core/2026-10 send=10 ...").
// Neither holds key material.
func PlanSteps(in []rotator.Input, name Namer) ([]string, []control.PlanStep) {
	var lines []string
	var steps []control.PlanStep
	for _, l := range rotator.PlanLines(rotator.PlanAll(in)) {
		st := control.PlanStep{Socket: string(l.Socket), Kind: l.Kind.String(), Op: l.Verb, Text: l.Line()}
		st.Reason = l.Reason()
		if l.HasRef {
			st.KeyRef = &control.PlanKeyRef{SendID: l.Ref.SendID, RecvID: l.Ref.RecvID, Peer: l.Ref.Peer.String(), IfIndex: l.Ref.IfIndex}
			if name != nil {
				if c, k, ok := name(l.Socket, l); ok {
					st.Chain, st.Key = c, k
					st.Text = l.Head + " " + c + "/" + k + l.Tail
				}
			}
		}
		lines = append(lines, l.Line())
		steps = append(steps, st)
	}
	return lines, steps
}

// SnapshotNamer names a plan line's key by the one key of snap with its
// IDs whose peers (none: any) overlap the reference's peer (and, on a VRF's device, that
// is not of the default VRF only); a key another agent installed (kept,
// foreign) is never named, even when a key of snap has its IDs.
func SnapshotNamer(snap *keystore.Snapshot) Namer {
	return func(_ rotator.SocketID, l rotator.PlanLine) (string, string, bool) {
		if snap == nil || (l.Verb == "kept" && l.Why == rotator.ReasonForeign) {
			return "", "", false
		}
		var chain, key string
		n := 0
		for _, cn := range snap.ChainNames() {
			for _, m := range snap.Chains[cn].Keys {
				if m.SendID != l.Ref.SendID || m.RecvID != l.Ref.RecvID || (m.VRF != "" && l.Ref.IfIndex == 0) {
					continue
				}
				if len(m.Peers) == 0 || slices.ContainsFunc(m.Peers, func(p netip.Prefix) bool { return p.Overlaps(l.Ref.Peer) }) {
					chain, key = m.Chain, m.Name
					n++
				}
			}
		}
		return chain, key, n == 1
	}
}
