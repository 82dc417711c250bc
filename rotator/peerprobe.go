package rotator

import (
	"errors"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// A roll's two waits for the peer's next segment (await: the peer sending
// with the announced key; retire's awaitNewKey: the peer seen sending with
// it after the grace period) ask the kernel for one TCP keepalive probe
// (tcpao.PeerProber): the peer's kernel answers it at once, signed with
// the Current_key the probe's RNextKeyID just made it switch to. Without
// it each wait lasts until the peer's next BGP keepalive (a minute apart
// by default; 8 s at the route-server bench's 1,024 sessions, where the
// fleet's roll waited for the slowest of 1,024 peers, twice). Invariants:
//   - A probe changes no key and no Current_key or RNext_key: what a
//     wait decides is decided from the reads as before, only sooner.
//   - A probe is armed only while the machine waits (StateAnnounced; the
//     retire step's wait for the new key) and ended when the wait ends,
//     the machine leaves the state (enter) or probeHold after it was
//     armed, whichever comes first; a wait that goes on arms one again
//     probeEvery after the last. The socket's keepalive settings are put
//     back at each end; on a socket whose owner turned keepalive on, only
//     its idle time changes (tcpao.PeerProber).
//   - While a probe is armed the wait polls every Config.Poll (the
//     answer comes within a second of idle and a round trip), not at the
//     peer's segment spacing (segpace.go).
//   - A socket that cannot probe (not a PeerProber, or the call failed)
//     is waited on as before.

// probeHold is how long an armed probe stays armed: the kernel sends it
// once the connection has been idle a second, and the answer is a round
// trip later.
const probeHold = 3 * time.Second

// probeEvery is how soon a wait that goes on arms another probe after
// the last one (its answer did not end the wait: the peer lacks the key,
// or its kernel kept its Current_key).
const probeEvery = 10 * time.Second

// armedProbe is the machine's probe while it waits (nil otherwise).
type armedProbe struct {
	p  tcpao.PeerProbe // p.Armed while the socket's settings are the probe's
	at time.Time       // when the last one was armed (or tried)
}

// probeWait arms, ends and arms again the wait's probe, at a wait's poll.
func (m *machine) probeWait(now time.Time) {
	switch {
	case m.cfg.NoPeerProbe:
	case m.probe == nil:
		m.armProbe(now)
	case m.probe.p.Armed && now.Sub(m.probe.at) >= probeHold:
		m.endProbe()
	case !m.probe.p.Armed && now.Sub(m.probe.at) >= probeEvery:
		m.armProbe(now)
	}
}

// probing reports whether a probe is armed (its answer is due).
func (m *machine) probing() bool { return m.probe != nil && m.probe.p.Armed }

func (m *machine) armProbe(now time.Time) {
	if m.cfg.NoPeerProbe {
		return
	}
	p, err := tcpao.ArmPeerProbe(m.sock)
	if err != nil && !errors.Is(err, tcpao.ErrNoPeerProbe) {
		m.log.Debug("rotator: keepalive probe not armed; waiting for the peer's own segment", "peer", m.st.Peer, "err", err)
	}
	if m.probe == nil {
		m.probe = &armedProbe{}
	}
	m.probe.p, m.probe.at = p, now
	if err != nil {
		m.probe.p = tcpao.PeerProbe{}
	}
}

// endProbe puts the socket's keepalive settings back, if a probe is armed.
func (m *machine) endProbe() { m.endProbeOn(m.sock) }

// endProbeOn is endProbe through s: the machine's socket, or the one a
// borrow of its descriptor lends.
func (m *machine) endProbeOn(s tcpao.Socket) {
	if !m.probing() {
		return
	}
	if err := tcpao.EndPeerProbe(s, m.probe.p); err != nil {
		m.log.Warn("rotator: keepalive probe's settings not put back", "peer", m.st.Peer, "err", err)
	}
	m.probe.p = tcpao.PeerProbe{}
}

// dropProbe ends the wait's probe and forgets it: the wait is over.
func (m *machine) dropProbe() { m.dropProbeOn(m.sock) }

func (m *machine) dropProbeOn(s tcpao.Socket) {
	if m.probe != nil {
		m.endProbeOn(s)
		m.probe = nil
	}
}

// readDroppingProbe is dropProbe, then a read in full, in one borrow of
// the socket's descriptor: the retire step's once its wait for the new
// key is over (a pidfd_getfd, SO_COOKIE and close fewer a peer per roll).
// The order is dropProbe's and the read's. Where the borrow fails before
// it lends the socket, the probe is ended on the socket itself, as
// dropProbe would, and the borrow's error is the read's.
func (m *machine) readDroppingProbe(now time.Time) (Observed, error) {
	var obs Observed
	lent := false
	err := tcpao.Batch(m.sock, func(bs tcpao.Socket) error {
		lent = true
		m.dropProbeOn(bs)
		var err error
		obs, err = readIn(bs, ReadFull, m.knownKeys(ReadFull))
		return err
	})
	if !lent {
		m.dropProbe()
	}
	if err == nil {
		m.st.Counters = CountersOf(obs, now)
	}
	return obs, err
}

// stopProbe is dropProbe as the machine stops: its session may be gone
// already (the speaker reported it down), so a failure to put the
// settings back is no warning: there is no socket left to hold them.
func (m *machine) stopProbe() {
	if m.probing() {
		if err := tcpao.EndPeerProbe(m.sock, m.probe.p); err != nil {
			m.log.Debug("rotator: keepalive probe's settings not put back as the machine stopped", "peer", m.st.Peer, "err", err)
		}
	}
	m.probe = nil
}

// waitNext is when a wait for the peer's segment polls again after a poll
// at now that did not end it: every Poll while a probe is armed, else at
// the peer's segment spacing (segmentPace.next), never past deadline.
func (m *machine) waitNext(now, deadline time.Time) time.Time {
	m.probeWait(now)
	if m.probing() {
		return m.segs.nextAt(now, m.cfg.Poll, 0, deadline)
	}
	return m.segs.next(now, m.cfg.Poll, deadline)
}

// peerHoldsNewKey is await's proof that the peer holds the new key nk
// (read in obs): it sends with it (pkt_good rises), or its RNext named it
// and the kernel switched Current_key to it. A Current_key that this
// roll's own writes set is neither.
func (m *machine) peerHoldsNewKey(obs *Observed, nk *tcpao.KeyInfo) bool {
	cur, _ := curOf(obs)
	return cur == m.desired.WantCurrent && cur != m.ownCur || nk.PktGood > m.baseGood
}

// awaitOver reports whether await, stepping on obs at now, ends its wait
// (and so its probe): the new key vanished, the peer holds it, or the
// switch timed out.
func (m *machine) awaitOver(now time.Time, obs *Observed) bool {
	nk := findRecv(obs, m.desired.WantRNext.ID)
	return nk == nil || m.peerHoldsNewKey(obs, nk) || now.Sub(m.st.Since) >= m.cfg.SwitchTimeout
}

// readStep is the step's read (read). A machine waiting for the peer's
// switch (StateAnnounced) with a probe armed ends the probe in the read's
// borrow of the descriptor when the read ends the wait (awaitOver), after
// the read: await would end it next (enter), in a borrow of its own. The
// probe still ends with the wait, one borrow sooner.
func (m *machine) readStep(now time.Time, mode ReadMode) (Observed, error) {
	if m.st.State != StateAnnounced || !m.probing() {
		return m.read(now, mode)
	}
	var obs Observed
	err := tcpao.Batch(m.sock, func(bs tcpao.Socket) error {
		var err error
		if obs, err = readIn(bs, mode, m.knownKeys(mode)); err != nil {
			return err
		}
		if m.awaitOver(now, &obs) {
			m.dropProbeOn(bs)
		}
		return nil
	})
	if err == nil {
		m.st.Counters = CountersOf(obs, now)
	}
	return obs, err
}
