package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/migrate"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TCP-MD5 passwords from the key source (issue 34). A binding whose chain
// holds an md5 password is a TCP-MD5 peer: aokeyd installs the password
// on the speaker's listening sockets (the speaker's own password line can
// go), installs none of the chain's TCP-AO keys for it there (the kernel
// refuses both kinds for one address), and leaves its sessions alone
// (an established TCP-MD5 connection never takes a TCP-AO key: EISCONN).
// rotator.PlanMD5 alone decides what happens to installed MD5 keys.

// md5Want is the listeners' TCP-MD5 desired state by address family, and
// the source's passwords by prefix (whose keys are aokeyd's even where no
// longer desired: a migrated peer's, retired).
type md5Want struct {
	v4, v6 rotator.MD5Desired
	known  map[netip.Prefix]tcpao.Fingerprint
}

// zero wipes the passwords' copies.
func (w md5Want) zero() {
	for _, d := range []rotator.MD5Desired{w.v4, w.v6} {
		for _, k := range d.Keys {
			k.Secret.Zero()
		}
	}
}

// md5Peer reports whether the peer's binding makes it a TCP-MD5 peer.
func md5Peer(pk policy.PeerKeys) bool { return pk.MD5 != nil }

func newMD5Want() md5Want { return md5Want{known: map[netip.Prefix]tcpao.Fingerprint{}} }

// addBinding adds binding b's part of the listeners' TCP-MD5 desired
// state, from its policy answer pk (err: none could be computed): its
// password (a copy), for the binding's neighbor address or prefix, or its
// retirement once its migration is done. listenerDesired calls it for
// each binding, beside the binding's TCP-AO keys.
func (rc *reconciler) addMD5Binding(w *md5Want, b policy.Binding, pk policy.PeerKeys, err error) {
	idx, ierr := ifIndex(b.VRF)
	if ierr != nil {
		return // listenerDesired says why
	}
	dst := &w.v6
	if b.Neighbor.Addr().Is4() {
		dst = &w.v4
	}
	if err == nil && pk.MD5 != nil {
		w.known[rotator.MD5Prefix(b.Neighbor)] = pk.MD5.Secret.Fingerprint()
	}
	if r, ok := rc.migrs.migrationOf(b.Neighbor.Addr(), b.VRF); ok && r.Step == migrate.Done && b.Neighbor.IsSingleIP() {
		// Its session ran TCP-AO: the password may leave.
		dst.Retire = append(dst.Retire, tcpao.MD5Ref{Peer: b.Neighbor, IfIndex: idx})
		return
	}
	if err != nil || !md5Peer(pk) {
		return
	}
	dst.Keys = append(dst.Keys, pk.MD5.Key(b.Neighbor, idx))
	fp, approved := rc.owns.approvedMD5(rotator.MD5Prefix(b.Neighbor))
	if approved && fp == pk.MD5.Secret.Fingerprint() {
		dst.ApproveChange = append(dst.ApproveChange, tcpao.MD5Ref{Peer: b.Neighbor, IfIndex: idx})
	}
}

// md5WantOf is one listening socket's TCP-MD5 desired state, chosen as
// listenerWantOf chooses its TCP-AO keys (family, dual-stack, VRF device).
// The slice is fresh; the keys share the cached passwords.
func md5WantOf(ref sockets.Ref, w md5Want, have4 bool) rotator.MD5Desired {
	var want rotator.MD5Desired
	switch {
	case ref.Local.Addr().Unmap().Is4():
		want.Keys, want.Retire = slices.Clone(w.v4.Keys), slices.Clone(w.v4.Retire)
	case have4:
		want.Keys, want.Retire = slices.Clone(w.v6.Keys), slices.Clone(w.v6.Retire)
	default:
		want.Keys = append(slices.Clone(w.v6.Keys), w.v4.Keys...)
		want.Retire = append(slices.Clone(w.v6.Retire), w.v4.Retire...)
	}
	want.Keys = slices.DeleteFunc(want.Keys, func(k tcpao.MD5Key) bool { return ref.BoundDev != 0 && k.IfIndex != ref.BoundDev })
	want.ApproveChange = append(slices.Clone(w.v4.ApproveChange), w.v6.ApproveChange...)
	return want
}

// planMD5 plans one listening socket's TCP-MD5 keys against what the
// kernel holds (read back through sock_diag): rotator.PlanMD5 with what
// this daemon knows of ownership and of the socket's TCP-AO keys.
func (rc *reconciler) planMD5(s tcpao.Socket, want rotator.MD5Desired, known map[netip.Prefix]tcpao.Fingerprint) (rotator.MD5Plan, error) {
	have, err := tcpao.ReadMD5(s)
	if err != nil {
		return rotator.MD5Plan{}, err
	}
	if len(want.Keys) == 0 && len(have) == 0 {
		return rotator.MD5Plan{}, nil
	}
	var ao []tcpao.KeyInfo
	if len(want.Keys) > 0 || len(want.Retire) > 0 {
		ao, _ = s.Keys(tcpao.KeyFilter{SkipFingerprint: true}) // ENOENT: no TCP-AO at all
	}
	want.AOCovers = func(a netip.Addr) bool {
		return slices.ContainsFunc(ao, func(k tcpao.KeyInfo) bool { return k.Peer.Contains(a) || k.Peer.Contains(a.Unmap()) })
	}
	want.Owns = func(k tcpao.MD5Info) bool {
		if rc.owns.ownsMD5(rotator.MD5Prefix(k.Peer), k.Fingerprint) {
			return true
		}
		if fp, ok := known[rotator.MD5Prefix(k.Peer)]; ok && fp == k.Fingerprint {
			return true
		}
		return slices.ContainsFunc(want.Keys, func(w tcpao.MD5Key) bool {
			return rotator.MD5Prefix(w.Peer) == rotator.MD5Prefix(k.Peer) && w.Secret.Fingerprint() == k.Fingerprint
		})
	}
	return rotator.PlanMD5(want, have), nil
}

// syncMD5 brings one listening socket's TCP-MD5 keys to want. It returns
// what it held, and an error when a password wanted could not be read or
// an operation failed (logged here).
func (rc *reconciler) syncMD5(h bgp.SocketHandle, want rotator.MD5Desired) ([]rotator.MD5Held, error) {
	s := rc.listenerSocket(h)
	p, err := rc.planMD5(s, want, rc.md5.known)
	if err != nil {
		if len(want.Keys) > 0 {
			rc.log.Error("listener's TCP-MD5 keys not readable; none installed", "socket", h.Ref().String(), "err", err)
			return nil, fmt.Errorf("TCP-MD5 keys not readable: %w", err)
		}
		return nil, nil
	}
	n, err := rotator.ApplyMD5(s, p.Ops)
	for _, op := range p.Ops[:n] {
		if !op.Del {
			rc.owns.recordMD5(rotator.MD5Prefix(op.Ref.Peer), op.Key.Secret.Fingerprint())
		}
	}
	if err != nil {
		rc.log.Error("listener TCP-MD5 sync failed", "socket", h.Ref().String(), "done", n, "of", len(p.Ops), "err", err)
		err = fmt.Errorf("TCP-MD5 sync: %w", err)
	} else if n > 0 {
		rc.log.Info("listener TCP-MD5 keys synchronised", "socket", h.Ref().String(), "ops", n)
	}
	for _, x := range p.Held {
		rc.log.Debug("listener TCP-MD5 key held", "socket", h.Ref().String(), "key", x.Ref.String(), "reason", x.Why.String())
	}
	return p.Held, err
}

// md5Warning says what a held TCP-MD5 key means for its peer and what to
// do, or "" when nothing is to be done.
func md5Warning(x rotator.MD5Held) string {
	switch x.Why {
	case rotator.ReasonEdited:
		return fmt.Sprintf("TCP-MD5 password for %s changed in the key source: not applied (a TCP-MD5 session has one password; "+
			"changing it resets the session), the installed one stays", x.Ref.Peer)
	case rotator.ReasonCarried:
		return fmt.Sprintf("TCP-MD5 key for %s left the key source: kept on the listener (removing it would let the peer connect unsigned); "+
			"move the peer to TCP-AO (aoctl migrate) or remove the neighbor", x.Ref.Peer)
	case rotator.ReasonForeignClash:
		return fmt.Sprintf("TCP-MD5 key for %s on the listener was not installed by aokeyd (the speaker's own password line?): "+
			"aokeyd does not replace it; remove the password from the speaker's configuration", x.Ref.Peer)
	case rotator.ReasonAOCovers:
		return fmt.Sprintf("TCP-MD5 password for %s not installed: TCP-AO keys on the listener cover the peer "+
			"(the kernel refuses both kinds for one address, and aokeyd never moves a peer from TCP-AO back to TCP-MD5)", x.Ref.Peer)
	}
	return ""
}

// md5Warnings are the status warnings of the TCP-MD5 keys the last
// listener sync held for peer.
func (rc *reconciler) md5Warnings(peer netip.Addr) []string {
	rc.mu.Lock()
	held := rc.md5Held
	rc.mu.Unlock()
	var out []string
	for _, x := range held {
		if w := md5Warning(x); w != "" && x.Ref.Peer.Contains(peer) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// md5PlanLines are the TCP-MD5 part of aoctl plan: each listener's
// planned MD5 operations and held keys against w (listenerDesired's), as
// the listener sync would plan them now.
func (rc *reconciler) md5PlanLines(ctx context.Context, w md5Want) []string {
	hs, err := rc.tracker.Listeners(ctx)
	if err != nil {
		return nil
	}
	have4 := slices.ContainsFunc(hs, func(h bgp.SocketHandle) bool { return h.Ref().Local.Addr().Unmap().Is4() })
	var out []string
	for _, h := range hs {
		sock := "listen " + h.Ref().Local.String()
		p, err := rc.planMD5(rc.o.SocketOf(h), md5WantOf(h.Ref(), w, have4), w.known)
		if err != nil {
			if errors.Is(err, tcpao.ErrNoMD5) {
				continue
			}
			out = append(out, fmt.Sprintf("%s: tcp-md5 keys not readable: %v", sock, err))
			continue
		}
		for _, op := range p.Ops {
			verb := "add"
			if op.Del {
				verb = "delete"
			}
			out = append(out, fmt.Sprintf("%s: tcp-md5 %s %s (%s)", sock, verb, strings.TrimPrefix(op.Ref.String(), "md5 "), op.Why))
		}
		for _, x := range p.Held {
			line := fmt.Sprintf("%s: tcp-md5 keep %s (%s)", sock, strings.TrimPrefix(x.Ref.String(), "md5 "), x.Why)
			if x.Why == rotator.ReasonEdited {
				line += ": a changed TCP-MD5 password resets the session; aokeyd never applies it on its own"
			}
			out = append(out, line)
		}
	}
	return out
}
