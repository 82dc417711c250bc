package fleet

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	peerkey "github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
)

// Options configure a Publisher.
type Options struct {
	Store    Store
	RouterID string
	// Addresses are the router's own addresses to publish besides the
	// local addresses of its sessions.
	Addresses []string
	// Refresh is how often to publish and read the revocation record.
	Refresh time.Duration
	// WakeGap is the least time between the starts of two rounds when
	// Wake asks for one (0: a quarter of Refresh): a change is published
	// within WakeGap of it, and a fleet-wide roll that changes every
	// session at once costs each router at most one extra round per
	// WakeGap, however many wakes it makes.
	WakeGap       time.Duration
	SwitchTimeout time.Duration
	// Status is the daemon's status report (control.Backend's Status).
	Status func(ctx context.Context) (control.StatusReport, error)
	// Revoke applies a fleet revocation to the router's sockets without
	// writing the key source (the record in Vault is the fleet's).
	// control.ErrNotFound: the router's key source has no such key.
	Revoke func(ctx context.Context, chain, key string) (control.RevokeResult, error)
	// Follow, when set, is told of each migration from TCP-MD5 to TCP-AO
	// that a far end (another router's document) runs for a link to this
	// router, so that this end migrates with it (the daemon's
	// FollowMigration). FollowWanted says whether any local peer could
	// follow (a TCP-MD5 peer without a migration); the fleet's documents
	// are read for it only then.
	Follow       func(ctx context.Context, m FarMigration)
	FollowWanted func() bool
	Now          func() time.Time
	After        func(time.Duration) <-chan time.Time
	Logger       *slog.Logger
	// Metrics counts failures; nil: none.
	Metrics Metrics
}

// Publisher publishes the router's Document every refresh and applies the
// fleet's revocations. Run is its goroutine; nothing else waits on it.
type Publisher struct {
	o    Options
	log  *slog.Logger
	wake chan struct{}

	mu      sync.Mutex
	since   map[peerkey.Key]sinceRec // peer -> its current key and since when
	applied map[string]*Applied      // chain/key -> how it was applied
	revVer  int                      // the record version last read
	revs    []Revocation
	last    Document
}

type sinceRec struct {
	key   string
	since time.Time
}

// NewPublisher builds a Publisher; Run starts it.
func NewPublisher(o Options) *Publisher {
	if o.Refresh <= 0 {
		o.Refresh = 30 * time.Second
	}
	if o.WakeGap <= 0 {
		o.WakeGap = o.Refresh / 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{o: o, log: log, wake: make(chan struct{}, 1),
		since: map[peerkey.Key]sinceRec{}, applied: map[string]*Applied{}}
}

// Wake asks for a round soon: at once when the last one started WakeGap
// ago or more, else WakeGap after it. It never blocks: a wake while one
// is pending is the same wake (the round reads the newest state anyway).
// The daemon calls it when a session's keys, Current_key, RNext_key or
// roll state change, so that the far end's view of a roll is published
// within WakeGap rather than at the next refresh.
func (p *Publisher) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run publishes every refresh, and after a Wake no sooner than WakeGap
// after the last round started, until ctx ends. Failures are logged and
// counted; Run returns only when ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	for {
		// A wake pending now is answered by this round: it reads the
		// newest state. Only a wake during or after it asks for another.
		select {
		case <-p.wake:
		default:
		}
		started := p.o.Now()
		p.Round(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-p.o.After(p.o.Refresh):
			continue
		case <-p.wake:
		}
		if wait := p.o.WakeGap - p.o.Now().Sub(started); wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-p.o.After(wait):
			}
		}
	}
}

// Round publishes the router's document and, beside it, reads the
// revocation record and applies what is new; when that changed what the
// document says of a revocation, it publishes again. Each step is
// bounded by one refresh interval.
//
// The two run side by side so that neither waits on the other: the
// document written for a wake (a roll's announce, which the far end's
// view waits for) does not wait for the record's read, and a new
// revocation is read as soon as a round starts, not after the status
// build and the write. One after the other, an announce made during a
// round waited for that round, then for the next one's record read,
// status and write: over the one-refresh target.
func (p *Publisher) Round(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(p.o.Refresh, 5*time.Second))
	defer cancel()
	// Each step's time, for the debug log: where a slow round (a far
	// end's view lagging) spends it.
	var revMS, applyMS, statusMS, publishMS, againMS int64
	defer func() {
		p.log.Debug("fleet: round", "revocations_ms", revMS, "apply_ms", applyMS,
			"status_ms", statusMS, "publish_ms", publishMS, "republish_ms", againMS)
	}()
	var changed bool
	var wg sync.WaitGroup
	wg.Go(func() {
		start := p.o.Now()
		if err := p.readRevocations(ctx); err != nil {
			p.fail(OpReadRevocations, err)
		}
		mid := p.o.Now()
		changed = p.applyRevocations(ctx)
		revMS, applyMS = mid.Sub(start).Milliseconds(), p.o.Now().Sub(mid).Milliseconds()
	})
	statusMS, publishMS = p.publish(ctx)
	wg.Wait()
	if p.o.Follow != nil && (p.o.FollowWanted == nil || p.o.FollowWanted()) {
		p.follow(ctx)
	}
	if changed {
		s, w := p.publish(ctx)
		againMS = s + w
	}
}

// publish builds the document and writes it, and says how long each took
// (ms).
func (p *Publisher) publish(ctx context.Context) (statusMS, writeMS int64) {
	start := p.o.Now()
	doc, err := p.document(ctx)
	mid := p.o.Now()
	statusMS = mid.Sub(start).Milliseconds()
	if err != nil {
		p.fail(OpStatus, err)
		return statusMS, 0
	}
	err = p.o.Store.PutStatus(ctx, doc)
	writeMS = p.o.Now().Sub(mid).Milliseconds()
	if err != nil {
		p.fail(OpPublish, err)
		return statusMS, writeMS
	}
	p.mu.Lock()
	p.last = doc
	p.mu.Unlock()
	if p.o.Metrics != nil {
		p.o.Metrics.FleetPublished(doc.PublishedAt)
	}
	return statusMS, writeMS
}

// Last is the last document published (for tests and aoctl's view).
func (p *Publisher) Last() Document {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

func (p *Publisher) fail(op Op, err error) {
	p.log.Warn("fleet: "+op.String()+" failed; aokeyd goes on", "path", p.o.Store.Where(), "err", err)
	if p.o.Metrics != nil {
		p.o.Metrics.FleetFailed(op.String())
	}
}

func (p *Publisher) readRevocations(ctx context.Context) error {
	ver, err := p.o.Store.RevocationsVersion(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	same := ver == p.revVer
	p.mu.Unlock()
	if same {
		return nil
	}
	l, ver, err := p.o.Store.Revocations(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.revVer, p.revs = ver, l.Revocations
	p.mu.Unlock()
	return nil
}

// applyRevocations applies each revocation not applied cleanly yet: the
// first time it is seen, and again each round until no socket holds the
// key (or, for a key this router's source lacks, until it has it and it
// is recorded). It reports whether what the document says of the
// revocations changed.
func (p *Publisher) applyRevocations(ctx context.Context) (changed bool) {
	p.mu.Lock()
	revs := slices.Clone(p.revs)
	p.mu.Unlock()
	for _, r := range revs {
		p.mu.Lock()
		a := p.applied[r.Ref()]
		if a == nil || !a.At.Equal(r.At) {
			a = &Applied{Chain: r.Chain, Key: r.Key, At: r.At, Seen: p.o.Now()}
			p.applied[r.Ref()] = a
			changed = true
			p.log.Warn("fleet revocation seen", "chain", r.Chain, "key", r.Key, "by", r.By, "reason", r.Reason)
		}
		done := !a.Clean.IsZero() && a.Error == "" && !a.NotInSource
		before := *a
		p.mu.Unlock()
		if done || p.o.Revoke == nil {
			continue
		}
		res, err := p.o.Revoke(ctx, r.Chain, r.Key)
		now := p.o.Now()
		p.mu.Lock()
		switch {
		case errors.Is(err, control.ErrNotFound):
			// Not in this router's key source: no socket can hold it.
			// Kept open so that it is applied if the key appears.
			if a.Clean.IsZero() {
				a.Clean = now
			}
			a.NotInSource, a.Error = true, ""
		case err != nil:
			a.Error = err.Error()
			p.fail(OpApplyRevocation, err)
		default:
			a.Sockets, a.Error = countHeld(res), ""
			if msg := socketsLeft(res); msg != "" {
				a.Error, a.Clean = msg, time.Time{}
			} else if a.Clean.IsZero() || a.NotInSource {
				a.Clean = now
			}
			a.NotInSource = false
		}
		changed = changed || *a != before
		p.mu.Unlock()
	}
	return changed
}

// countHeld is how many sockets held the key.
func countHeld(r control.RevokeResult) int {
	n := 0
	for _, s := range r.Sockets {
		if s.Action != control.ActionAbsent {
			n++
		}
	}
	return n
}

// socketsLeft says which sockets still hold the key ("" when none).
func socketsLeft(r control.RevokeResult) string {
	for _, s := range r.Sockets {
		if s.Error != "" {
			return s.Socket + ": " + s.Error
		}
		if s.Action == control.ActionKept {
			return s.Socket + ": kept (its only key, on_revoke_only_key keep)"
		}
	}
	return ""
}

func (p *Publisher) document(ctx context.Context) (Document, error) {
	rep, err := p.o.Status(ctx)
	if err != nil {
		return Document{}, err
	}
	now := p.o.Now()
	d := Document{Schema: Schema, RouterID: p.o.RouterID, PublishedAt: now,
		Refresh: Duration(p.o.Refresh), SwitchTimeout: Duration(p.o.SwitchTimeout),
		KeySource: KeySource{LastSync: rep.KeySource.LastSync, Stale: rep.KeySource.Stale},
		Warnings:  slices.Clone(rep.Warnings), Peers: []Peer{}}
	addrs := map[netip.Addr]bool{}
	for _, a := range p.o.Addresses {
		if x, err := netip.ParseAddr(a); err == nil { // config.Check refuses any other
			addrs[x.Unmap().WithZone("")] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	seenPeers := map[peerkey.Key]bool{}
	for _, ps := range rep.Peers {
		id, ok := keyOf(ps)
		if !ok {
			p.log.Warn("fleet: a peer whose address is none is not published", "peer", ps.Peer)
			continue
		}
		d.Peers = append(d.Peers, p.peer(id, ps, now, addrs))
		seenPeers[id] = true
	}
	for k := range p.since {
		if !seenPeers[k] {
			delete(p.since, k)
		}
	}
	for a := range addrs {
		d.Addresses = append(d.Addresses, a)
	}
	slices.SortFunc(d.Addresses, netip.Addr.Compare)
	for _, r := range p.revs {
		if a := p.applied[r.Ref()]; a != nil {
			d.Revocations = append(d.Revocations, *a)
		}
	}
	return d, nil
}

// keyOf is the identity of the peer a status reports (its address and
// VRF, as the daemon wrote them); false when it names no address.
func keyOf(ps control.PeerStatus) (peerkey.Key, bool) {
	if ps.Interface != "" {
		return peerkey.OnLink(ps.Interface, ps.VRF), true // an interface neighbour: its link, whatever it learned
	}
	a, err := netip.ParseAddr(ps.Peer)
	return peerkey.KeyOf(a, ps.VRF), err == nil
}

// peer converts one peer's status (p.mu held). Only names, IDs, settings
// and counters are copied: control.Key has no field for key material.
func (p *Publisher) peer(id peerkey.Key, ps control.PeerStatus, now time.Time, addrs map[netip.Addr]bool) Peer {
	out := Peer{ID: id, Session: ps.SessionState, Auth: ps.Auth, Migration: ps.Migration, Keys: []Key{},
		Roll:     Roll{State: ps.Rotation.State, Since: ps.Rotation.Since, PendingKey: ps.Rotation.PendingKey, LastAbort: ps.Rotation.LastAbortReason},
		Counters: Counters{PktGood: ps.Counters.PktGood, PktBad: ps.Counters.PktBad, PktKeyNotFound: ps.Counters.PktKeyNotFound},
		Warnings: slices.Clone(ps.Warnings)}
	if a, err := netip.ParseAddr(ps.Peer); err == nil && id.IsLink() {
		out.Neighbor = a.Unmap().WithZone("") // the address it learned
	}
	for _, s := range ps.Sockets {
		if s.Kind != control.KindEstablished {
			continue
		}
		if ap, err := netip.ParseAddrPort(s.Local); err == nil {
			out.Local = ap.Addr().Unmap().WithZone("")
			addrs[out.Local] = true
		}
	}
	if a, err := netip.ParseAddr(ps.Local); err == nil && !out.Local.IsValid() {
		// A session aokeyd does not key (TCP-MD5): the speaker's report.
		out.Local = a.Unmap().WithZone("")
		addrs[out.Local] = true
	}
	for _, k := range ps.Keys {
		fk := Key{Chain: k.Chain, Name: k.Name, SendID: k.SendID, RecvID: k.RecvID, Alg: k.Alg,
			IncludeTCPOptions: k.TCPOptions != control.TCPOptionsExclude,
			SendEnd:           k.SendLifetime.End, AcceptEnd: k.AcceptLifetime.End,
			Current: k.Current, RNext: k.RNext, State: k.State}
		if out.Chain == "" {
			out.Chain = k.Chain
		}
		if k.Current {
			out.Current = fk.Ref()
		}
		if k.RNext {
			out.RNext = fk.Ref()
		}
		out.Keys = append(out.Keys, fk)
	}
	if s, ok := p.since[id]; !ok || s.key != out.Current {
		p.since[id] = sinceRec{key: out.Current, since: now}
	}
	if out.Current != "" {
		out.CurrentSince = p.since[id].since
	}
	return out
}

// FarMigration is a far end's migration of a link to this router, as its
// document shows it: Peer is this router's peer on the link, the far
// end's address there in the VRF the far end names (VRF twins are named
// alike at both ends).
type FarMigration struct {
	Router string
	Peer   peerkey.Key
	Step   string
	At     time.Time
	Bound  time.Duration
}

// follow reads the fleet's documents and hands Follow every migration in
// progress (prepared or switching) that another router runs toward one
// of this router's addresses.
func (p *Publisher) follow(ctx context.Context) {
	docs, _, err := p.o.Store.Statuses(ctx)
	if err != nil {
		p.log.Debug("fleet: reading the documents for far-end migrations", "err", err)
		return
	}
	p.mu.Lock()
	mine := map[netip.Addr]bool{}
	for _, a := range p.last.Addresses {
		mine[a.Unmap().WithZone("")] = true
	}
	p.mu.Unlock()
	for _, d := range docs {
		if d.RouterID == p.o.RouterID {
			continue
		}
		for _, pe := range d.Peers {
			m := pe.Migration
			if m == nil || (m.Step != "prepared" && m.Step != "switching") || !mine[pe.Addr()] || !pe.Local.IsValid() {
				continue
			}
			p.o.Follow(ctx, FarMigration{Router: d.RouterID, Peer: peerkey.KeyOf(pe.Local, pe.ID.VRF), Step: m.Step, At: m.At, Bound: m.Deadline.Sub(m.At)})
		}
	}
}
