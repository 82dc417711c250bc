package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/chainview"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// testDaemon is a stand-in for aokeyd over the in-memory TCP-AO kernel: it
// loads testdata's config, policy and keys, puts the desired keys on a
// listener at 192.0.2.1, lets each bound peer (a remote router holding the
// mirrored keys) connect and exchange signed segments, and answers the
// control API from what the in-memory kernel reports. It implements
// control.Backend the way the daemon does, in miniature.
type testDaemon struct {
	mu     sync.Mutex
	pol    *policy.Policy
	snap   *keystore.Snapshot
	src    string
	lis    *tcpaotest.Sock
	net    *tcpaotest.Net
	peers  []*testPeer
	revoke map[string]bool // chain/key revoked in the "source"
}

type testPeer struct {
	binding  policy.Binding
	remote   *tcpaotest.Sock
	accepted *tcpaotest.Sock
	passive  bool
	up       time.Time
	rot      control.Rotation
}

var testNow = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func newTestDaemon(t *testing.T) *testDaemon {
	t.Helper()
	cfg, err := config.Load("testdata/aokeyd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := cfg.LoadPolicy()
	if err != nil {
		t.Fatal(err)
	}
	src, err := cfg.OpenKeySource(config.SourceOptions{Now: func() time.Time { return testNow }})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	snap, err := src.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(snap.Zero)
	d := &testDaemon{pol: pol, snap: snap, src: src.Name(),
		net: tcpaotest.NewNet(), revoke: map[string]bool{}}
	d.lis = d.mustSock(t, "192.0.2.1")
	for _, b := range pol.Bindings() {
		pk, err := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, testNow)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range pk.Keys {
			key := k.TCPAOKey(b.Neighbor, 0)
			if err := d.lis.AddKey(key, tcpao.AddOptions{}); err != nil {
				t.Fatalf("listener AddKey %s: %v", key, err)
			}
			key.Secret.Zero()
		}
	}
	if err := d.lis.Listen(); err != nil {
		t.Fatal(err)
	}
	for i, b := range pol.Bindings() {
		pk, _ := pol.Desired(snap, b.Neighbor.Addr(), b.VRF, testNow)
		p := &testPeer{binding: b, passive: i == 0, up: testNow.Add(-time.Duration(i+1) * 90 * time.Minute),
			rot: control.Rotation{State: string(rotator.StateSteady), Since: testNow.Add(-time.Hour), NextAction: "watch", NextAt: testNow.Add(25 * time.Second)}}
		p.remote = d.mustSock(t, b.Neighbor.Addr().String())
		// The remote router holds the mirror image; the second peer adds its
		// keys newest first, so it starts out sending with the older key.
		keys := slices.Clone(pk.Keys)
		if i == 1 {
			slices.Reverse(keys)
		}
		for _, k := range keys {
			m := k.TCPAOKey(netip.PrefixFrom(netip.MustParseAddr("192.0.2.1"), 32), 0)
			m.SendID, m.RecvID = m.RecvID, m.SendID
			if err := p.remote.AddKey(m, tcpao.AddOptions{}); err != nil {
				t.Fatalf("remote AddKey: %v", err)
			}
			m.Secret.Zero()
		}
		if p.accepted, err = d.net.Connect(p.remote, d.lis); err != nil {
			t.Fatalf("connect %s: %v", b.Neighbor, err)
		}
		if err := d.net.Exchange(p.remote, p.accepted, 3+2*i); err != nil {
			t.Fatalf("exchange: %v", err)
		}
		d.peers = append(d.peers, p)
	}
	return d
}

func (d *testDaemon) mustSock(t *testing.T, addr string) *tcpaotest.Sock {
	t.Helper()
	s, err := d.net.Socket(netip.MustParseAddr(addr))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// keyName finds the MKT of the peer's chain with the given IDs.
func (d *testDaemon) keyName(p *testPeer, send, recv uint8) (control.Key, bool) {
	pk, err := d.pol.Desired(d.snap, p.binding.Neighbor.Addr(), "", testNow)
	if err != nil {
		return control.Key{}, false
	}
	for _, k := range pk.Keys {
		if k.MKT.SendID == send && k.MKT.RecvID == recv {
			st := control.KeyInstalled
			if d.revoke[pk.Chain+"/"+k.MKT.Name] {
				st = control.KeyRevoked
			}
			return control.Key{Chain: pk.Chain, Name: k.MKT.Name, SendID: send, RecvID: recv, Alg: string(k.MKT.Algorithm),
				MACLen: k.MKT.EffectiveMACLen(), State: st,
				SendLifetime:   control.Lifetime{Start: k.SendLifetime.Start, End: k.SendLifetime.End},
				AcceptLifetime: control.Lifetime{Start: k.AcceptLifetime.Start, End: k.AcceptLifetime.End}}, true
		}
	}
	return control.Key{}, false
}

// testRelease is the test daemon's kernel (uname -r): one with a known
// TCP-AO defect, so that status shows its warning.
const testRelease = "6.12.57"

func (d *testDaemon) Status(_ context.Context, peer string) (control.StatusReport, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	rep := control.StatusReport{
		GeneratedAt: testNow,
		KeySource:   control.KeySourceStatus{Name: d.src, LastSync: testNow.Add(-30 * time.Second), Age: control.Duration(30 * time.Second)},
		Optmem:      control.Optmem{Limit: d.net.OptMemMax(), Needed: tcpao.OptMemNeeded(4, tcpao.HMACSHA256)},
		Kernel:      &control.KernelStatus{Release: "Linux " + testRelease, Accepted: []string{"hmac(sha1)", "hmac(sha256)", "cmac(aes128)"}},
	}
	// The release's known defects from tcpao's table, as the daemon puts
	// them in status (the server warns of each).
	if _, ds, err := tcpao.KernelDefects(testRelease); err == nil {
		for _, df := range ds {
			rep.Kernel.Defects = append(rep.Kernel.Defects, control.KernelDefectOf(df))
		}
		if m := tcpao.Mitigations(ds); m != 0 {
			rep.Kernel.Mitigation = m.String()
		}
	}
	for i, p := range d.peers {
		name := peerName(p.binding)
		if peer != "" && peer != name {
			continue
		}
		obs, err := rotator.Observe(p.accepted, rotator.ReadFull)
		if err != nil {
			return rep, err
		}
		ps := control.PeerStatus{Peer: name, SessionState: "established", Auth: control.AuthAO, Uptime: control.Duration(testNow.Sub(p.up)),
			Passive: p.passive, Rotation: p.rot,
			Sockets: []control.Socket{
				{Kind: control.KindListen, Local: d.lis.LocalAddr().String(), Inode: 1000},
				{Kind: control.KindEstablished, Local: p.accepted.LocalAddr().String(), Remote: p.remote.LocalAddr().String(), Inode: uint64(2000 + i)},
			},
			Counters: control.Counters{PktGood: obs.Info.PktGood, PktBad: obs.Info.PktBad,
				PktKeyNotFound: obs.Info.PktKeyNotFound, PktAORequired: obs.Info.PktAORequired},
		}
		for _, ki := range obs.Keys {
			k, ok := d.keyName(p, ki.SendID, ki.RecvID)
			if !ok {
				k = control.Key{Name: fmt.Sprintf("unknown(%d/%d)", ki.SendID, ki.RecvID), SendID: ki.SendID, RecvID: ki.RecvID}
			}
			k.Current, k.RNext, k.PktGood, k.PktBad = ki.IsCurrent, ki.IsRNext, ki.PktGood, ki.PktBad
			k.TCPOptions = control.TCPOptions(ki.ExcludeOptions)
			if k.Name == p.rot.PendingKey {
				k.State = control.KeyPending
			}
			ps.Keys = append(ps.Keys, k)
		}
		slices.SortFunc(ps.Keys, func(a, b control.Key) int { return int(a.SendID) - int(b.SendID) })
		// What the speaker says of the neighbor, and the keys in use as
		// the daemon names them from the kernel's Current_key and
		// RNext_key.
		ps.PeerAS, ps.Flaps = 65002+uint32(i), uint32(1-i)
		if i == 0 {
			ps.Description, ps.LastDown, ps.LastDownReason = "core-2 lon1", p.up.Add(-time.Minute), "Hold timer expired"
		}
		for _, k := range ps.Keys {
			n := &control.KeyName{Chain: k.Chain, Name: k.Name, SendID: k.SendID, RecvID: k.RecvID}
			if k.Current {
				ps.Sending = n
			}
			if k.RNext {
				ps.PeerSending = n
			}
		}
		lobs, err := rotator.Observe(d.lis, rotator.ReadFull)
		if err != nil {
			return rep, err
		}
		l := &control.ListenerCounters{Keys: []control.ListenerKey{}, PktBad: lobs.Info.PktBad, PktKeyNotFound: lobs.Info.PktKeyNotFound,
			PktAORequired: lobs.Info.PktAORequired, PktDroppedICMP: lobs.Info.PktDroppedICMP}
		for _, ki := range lobs.Keys {
			if ki.Peer.Contains(p.binding.Neighbor.Addr()) {
				l.Keys = append(l.Keys, control.ListenerKey{Socket: "listen " + d.lis.LocalAddr().String(), Prefix: ki.Peer.String(),
					SendID: ki.SendID, RecvID: ki.RecvID, TCPOptions: control.TCPOptions(ki.ExcludeOptions), PktGood: ki.PktGood, PktBad: ki.PktBad})
			}
		}
		slices.SortFunc(l.Keys, func(a, b control.ListenerKey) int { return int(a.SendID) - int(b.SendID) })
		ps.Listener = l
		rep.Peers = append(rep.Peers, ps)
	}
	if peer != "" && len(rep.Peers) == 0 {
		return rep, fmt.Errorf("peer %s: %w", peer, control.ErrNotFound)
	}
	if peer == "" {
		rep.Chains = chainview.Chains(d.pol, d.snap, testNow)
	}
	return rep, nil
}

func (d *testDaemon) Plan(context.Context) (control.PlanReport, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var in []rotator.Input
	for _, p := range d.peers {
		pk, err := d.pol.Desired(d.snap, p.binding.Neighbor.Addr(), "", testNow)
		if err != nil {
			return control.PlanReport{}, err
		}
		obs, err := rotator.Observe(p.accepted, rotator.ReadFull)
		if err != nil {
			return control.PlanReport{}, err
		}
		des := desiredOf(p.binding, pk, d.snap, rotator.SocketID("peer "+peerName(p.binding)), rotator.Established)
		in = append(in, rotator.Input{Desired: des, Observed: obs})
	}
	rep := control.PlanReport{GeneratedAt: testNow, Observed: true}
	var lines []string
	for _, sp := range rotator.PlanAll(in) {
		if sp.Empty() && len(sp.Deferred) == 0 {
			lines = append(lines, fmt.Sprintf("%s %s ok", sp.Socket, sp.Kind))
		}
		for i, op := range sp.Ops {
			lines = append(lines, fmt.Sprintf("%s %s %d. %s", sp.Socket, sp.Kind, i+1, op.Line()))
		}
	}
	rep.Plan = lines
	rep.Upcoming = []control.Event{{Peer: "192.0.2.2", Chain: "core", At: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Action: "remove 2026-10"}}
	return rep, nil
}

func (d *testDaemon) Rotate(_ context.Context, req control.RotateRequest) (control.RotateResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var res control.RotateResult
	for _, p := range d.peers {
		if !req.All && req.Peer != peerName(p.binding) {
			continue
		}
		out := control.RotateOutcome{Peer: peerName(p.binding)}
		pk, err := d.pol.Desired(d.snap, p.binding.Neighbor.Addr(), "", testNow)
		pref, ok := pk.PreferredKey()
		info, ierr := p.accepted.Info()
		switch {
		case err != nil || !ok || ierr != nil:
			out.Error = fmt.Sprint("no preferred key: ", err, ierr)
		case info.HaveCurrent && info.CurrentKey == pref.MKT.SendID:
			out.State, out.Detail = p.rot.State, "already sending with "+pref.MKT.Name
		default:
			rn := pref.MKT.RecvID
			if err := p.accepted.SetInfo(tcpao.InfoChange{RNext: &rn}); err != nil {
				out.Error = err.Error()
				break
			}
			p.rot = control.Rotation{State: string(rotator.StateAnnounced), PendingKey: pref.MKT.Name, Since: testNow,
				NextAction: "switch when the peer sends with " + pref.MKT.Name + ", else abort", NextAt: testNow.Add(2 * time.Minute)}
			out.Started, out.State, out.NextAt = true, p.rot.State, p.rot.NextAt
		}
		res.Peers = append(res.Peers, out)
	}
	if len(res.Peers) == 0 {
		return res, fmt.Errorf("peer %s: %w", req.Peer, control.ErrNotFound)
	}
	return res, nil
}

func (d *testDaemon) Revoke(_ context.Context, req control.RevokeRequest) (control.RevokeResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.snap.Chains[req.Chain]
	if !ok {
		return control.RevokeResult{}, fmt.Errorf("chain %q: %w", req.Chain, control.ErrNotFound)
	}
	m, ok := ch.Key(req.Key)
	if !ok {
		return control.RevokeResult{}, fmt.Errorf("key %s/%s: %w", req.Chain, req.Key, control.ErrNotFound)
	}
	res := control.RevokeResult{Chain: req.Chain, Key: req.Key, SourceRevoked: true, Sockets: []control.RevokeSocket{}}
	d.revoke[req.Chain+"/"+req.Key] = true
	for _, p := range d.peers {
		name := peerName(p.binding)
		if req.Peer != "" && req.Peer != name {
			continue
		}
		ref := tcpao.KeyRef{Peer: p.binding.Neighbor, SendID: m.SendID, RecvID: m.RecvID}
		out := control.RevokeSocket{Socket: "listen " + d.lis.LocalAddr().String(), Peer: name, Action: control.ActionDeleted}
		if err := delListener(d.lis, ref); err != nil {
			out.Error = err.Error()
		}
		res.Sockets = append(res.Sockets, out)
		res.Sockets = append(res.Sockets, d.revokeEstablished(p, ref))
	}
	// A made-up duration, 1ms per socket touched and 1ms more, not a
	// measurement: aoctl only prints it, and the golden output stays fixed.
	res.Elapsed = control.Duration(time.Duration(len(res.Sockets)+1) * time.Millisecond)
	return res, nil
}

// Replace approves nothing on the in-memory kernel: aoctl only prints the
// outcome, one reset per session of the key's chain.
func (d *testDaemon) Replace(_ context.Context, req control.ReplaceRequest) (control.ReplaceResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.snap.Chains[req.Chain]
	if !ok {
		return control.ReplaceResult{}, fmt.Errorf("chain %q: %w", req.Chain, control.ErrNotFound)
	}
	if _, ok := ch.Key(req.Key); !ok {
		return control.ReplaceResult{}, fmt.Errorf("key %s/%s: %w", req.Chain, req.Key, control.ErrNotFound)
	}
	res := control.ReplaceResult{Chain: req.Chain, Key: req.Key, Sockets: []control.RevokeSocket{}}
	for _, p := range d.peers {
		res.Sockets = append(res.Sockets, control.RevokeSocket{Socket: "peer " + peerName(p.binding), Peer: peerName(p.binding), Action: control.ActionReset})
	}
	res.Elapsed = control.Duration(time.Duration(len(res.Sockets)+1) * time.Millisecond)
	return res, nil
}

// Adopt finds nothing to adopt of the peer's host prefix: the in-memory
// daemon installed every key. A wider prefix named has a foreign key on
// the listener (adopted), and the session a host key (left).
func (d *testDaemon) Adopt(_ context.Context, req control.AdoptRequest) (control.AdoptResult, error) {
	res := control.AdoptResult{Peer: req.Peer, VRF: req.VRF, Adopted: []control.AdoptedKey{}}
	if req.Prefix != "" {
		res.Adopted = append(res.Adopted, control.AdoptedKey{Socket: "listener 192.0.2.1:179", Prefix: req.Prefix, SendID: 90, RecvID: 91})
		res.Left = append(res.Left, control.AdoptedKey{Socket: "session", Prefix: req.Peer + "/32", SendID: 80, RecvID: 81})
	}
	return res, nil
}

func (d *testDaemon) Migrate(_ context.Context, req control.MigrateRequest) (control.MigrateResult, error) {
	return control.MigrateResult{Migrations: []control.Migration{{Peer: req.Peer, VRF: req.VRF, Step: "prepared", Prefix: "192.0.2.0/30",
		At: testNow, Deadline: testNow.Add(5 * time.Minute), Since: testNow}}}, nil
}

// delListener deletes ref from the listener (del_async).
func delListener(lis *tcpaotest.Sock, ref tcpao.KeyRef) error {
	return lis.DelKey(tcpao.DelKey{KeyRef: ref, Async: true})
}

// revokeEstablished deletes ref from the peer's session, naming another key
// as Current_key and RNext_key when ref is in use.
func (d *testDaemon) revokeEstablished(p *testPeer, ref tcpao.KeyRef) control.RevokeSocket {
	out := control.RevokeSocket{Socket: "peer " + peerName(p.binding), Peer: peerName(p.binding)}
	keys, err := p.accepted.Keys(tcpao.KeyFilter{})
	if err != nil {
		out.Error = err.Error()
		return out
	}
	var victim, other *tcpao.KeyInfo
	for i := range keys {
		if keys[i].SendID == ref.SendID && keys[i].RecvID == ref.RecvID {
			victim = &keys[i]
		} else if other == nil {
			other = &keys[i]
		}
	}
	if victim == nil {
		out.Action = control.ActionDeleted
		return out
	}
	del := tcpao.DelKey{KeyRef: victim.KeyRef}
	switch {
	case (victim.IsCurrent || victim.IsRNext) && other == nil:
		out.Action = control.ActionKept
		return out
	case victim.IsCurrent || victim.IsRNext:
		del.SetCurrent, del.Current, del.SetRNext, del.RNext = true, other.SendID, true, other.RecvID
		out.Action = control.ActionForcedReplaced
		if k, ok := d.keyName(p, other.SendID, other.RecvID); ok {
			out.Replacement = k.Chain + "/" + k.Name
		}
	default:
		out.Action = control.ActionDeleted
	}
	if err := p.accepted.DelKey(del); err != nil {
		out.Error = err.Error()
	}
	return out
}
