package rotator

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// The spin random simulations of rotator/model/roll.pml (make
// model-traces) replayed against the real roll machine: two ends of one
// session on the in-memory kernel, each with its listener, driven event by
// event as the model's trace says. After every event the machines' states
// and the kernel's keys, Current_key and RNext_key must be the model's.
func TestModelTraceReplay(t *testing.T) {
	traces, err := readModelTraces(filepath.Join("testdata", "model-traces.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) < 200 {
		t.Fatalf("%d model traces, want a few hundred (make model-traces)", len(traces))
	}
	events, rolled := 0, 0
	for _, tr := range traces {
		r := newReplay(t, tr.seed)
		for _, ev := range tr.events {
			r.apply(ev)
			if got := r.state(); got != ev.after {
				t.Fatalf("trace %d line %d (%s %d): the machine and kernel are at\n\t%s\nthe model at\n\t%s\n(states: st0 st1, then keys/cur/rnext per end, listeners, phases, edits, listener A verified a SYN; keys A=1 B=2, A's IDs with edited material 4)\nthe machines' next actions: %q, %q",
					tr.seed, ev.line, ev.kind, ev.end, got, ev.after, r.end[0].m.st.NextAction, r.end[1].m.st.NextAction)
			}
			events++
		}
		if last := r.state(); last.cur == [2]int{modelB, modelB} {
			rolled++
		}
	}
	t.Logf("replayed %d traces, %d events; %d end with both ends sending with the new key", len(traces), events, rolled)
	if rolled == 0 {
		t.Fatal("no trace reaches the new key on both ends: the traces do not exercise a roll")
	}
}

// Model keys: A (the old key) and B, SendID = RecvID = the number; the
// model writes key sets as masks (A=1, B=2, which are also their IDs, and
// 4 for A's IDs with the edited material, A').
const (
	modelA       = 1
	modelB       = 2
	modelAEdited = 4
)

// modelKeys is the desired key set of a phase (see roll.pml) as a mask.
func modelKeys(phase int) int {
	switch phase {
	case 0:
		return modelA
	case 1:
		return modelA | modelB
	case 4:
		return 0
	}
	return modelB
}

// modelWant is the phase's wanted key (0: none).
func modelWant(phase int) uint8 {
	switch phase {
	case 0:
		return modelA
	case 4:
		return 0
	}
	return modelB
}

// gateSock is a session socket whose writes stop after allow of them: an
// aokeyd that dies after that many kernel writes of a step (allow < 0: no
// limit).
type gateSock struct {
	tcpao.Socket
	allow int
}

var errDied = errors.New("replay: aokeyd died before this write")

func (g *gateSock) write() error {
	if g.allow == 0 {
		return errDied
	}
	if g.allow > 0 {
		g.allow--
	}
	return nil
}

func (g *gateSock) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	if err := g.write(); err != nil {
		return err
	}
	return g.Socket.AddKey(k, o)
}

func (g *gateSock) DelKey(d tcpao.DelKey) error {
	if err := g.write(); err != nil {
		return err
	}
	return g.Socket.DelKey(d)
}

func (g *gateSock) SetInfo(c tcpao.InfoChange) error {
	if err := g.write(); err != nil {
		return err
	}
	return g.Socket.SetInfo(c)
}

type replayEnd struct {
	addr   netip.Addr
	ln     *tcpaotest.Sock
	sock   *tcpaotest.Sock
	gate   *gateSock
	m      *machine
	clk    time.Time
	phase  int
	edited bool               // the desired A has new material (phases 0 and 1)
	flight *tcpaotest.Segment // the segment in flight from this end
	// read: the end's machine read its session since aokeyd's last
	// restart (the model's rd): until then the listener sync runs under
	// the daemon's start-up gate (everything frozen).
	read bool
}

type replay struct {
	t    *testing.T
	seed int
	net  *tcpaotest.Net
	end  [2]*replayEnd
}

func replayCfg() Config {
	// Each step advances the end's clock by a millisecond; the model says
	// when the grace period is over (a "wait" is a step within it) and
	// when the switch times out (an event), so both are long here.
	return Config{SwitchTimeout: 10 * time.Hour, Grace: time.Hour, Poll: time.Nanosecond, Steady: time.Second,
		Backoff: time.Second, MaxBackoff: time.Second}
}

// modelKey is key id (A or B) on end i's sockets, for the other end's
// address.
func (r *replay) modelKey(i int, id uint8) tcpao.Key {
	peer := r.end[1-i].addr
	return mkKey(netip.PrefixFrom(peer, 32).String(), id, id, fmt.Sprintf("model-key-%d", id))
}

// editedA is A' on end i's sockets: A's IDs, new material.
func (r *replay) editedA(i int) tcpao.Key {
	k := r.modelKey(i, modelA)
	k.Secret = secret("model-key-1-edit")
	return k
}

// desired is end i's desired state in its phase: A is A' when its desired
// A is edited.
func (r *replay) desired(i, phase int) Desired {
	d := Desired{Socket: SocketID(fmt.Sprintf("end %d", i)), Kind: Established}
	if w := modelWant(phase); w != 0 {
		d.WantCurrent, d.WantRNext = ID(w), ID(w)
	}
	for _, id := range []uint8{modelA, modelB} {
		if modelKeys(phase)&int(id) == 0 {
			continue
		}
		k := r.modelKey(i, id)
		if id == modelA && r.end[i].edited {
			k = r.editedA(i)
		}
		d.Keys = append(d.Keys, dk(k))
	}
	if phase == 3 {
		d.Revoked = revokedOf(r.modelKey(i, modelA))
	}
	return d
}

func newReplay(t *testing.T, seed int) *replay {
	t.Helper()
	r := &replay{t: t, seed: seed, net: tcpaotest.NewNet()}
	for i := range r.end {
		r.end[i] = &replayEnd{addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), clk: t0, read: true}
	}
	for i, e := range r.end {
		var err error
		if e.ln, err = r.net.Socket(e.addr); err != nil {
			t.Fatal(err)
		}
		if err := e.ln.AddKey(r.modelKey(i, modelA), tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := e.ln.Listen(); err != nil {
			t.Fatal(err)
		}
	}
	r.connect(0)
	return r
}

func (r *replay) fail(format string, a ...any) {
	r.t.Helper()
	r.t.Fatalf("trace %d: %s", r.seed, fmt.Sprintf(format, a...))
}

// connect is a session through end 1-c's listener: c's socket carries its
// desired keys with the preferred one as Current_key and RNext_key (as
// connectguard sets them), the accepted socket the listener's keys. Both
// ends get a new machine.
func (r *replay) connect(c int) {
	r.t.Helper()
	e := r.end[c]
	want := modelWant(e.phase)
	if want == 0 || e.edited {
		// ConnectKeys: no desired key, or A' that no listener holds.
		r.fail("end %d opens a connection in phase %d (edited %v): the model's ends open none then", c, e.phase, e.edited)
	}
	cs, err := r.net.Socket(e.addr)
	if err != nil {
		r.fail("socket: %v", err)
	}
	for _, id := range []uint8{modelA, modelB} {
		if modelKeys(e.phase)&int(id) == 0 {
			continue
		}
		if err := cs.AddKey(r.modelKey(c, id), tcpao.AddOptions{SetCurrent: id == want, SetRNext: id == want}); err != nil {
			r.fail("connect: add key %d: %v", id, err)
		}
	}
	as, err := r.net.Connect(cs, r.end[1-c].ln)
	if err != nil {
		r.fail("reconnect through end %d's listener: %v", 1-c, err)
	}
	for i, s := range map[int]*tcpaotest.Sock{c: cs, 1 - c: as} {
		x := r.end[i]
		if x.sock != nil {
			_ = x.sock.Close()
		}
		x.sock, x.flight = s, nil
		r.restart(i)
	}
}

// restart is a new aokeyd (or a new session) at end i: a machine that
// knows nothing but the kernel's state.
func (r *replay) restart(i int) {
	e := r.end[i]
	e.gate = &gateSock{Socket: e.sock, allow: -1}
	e.m = newMachine(pid(fmt.Sprintf("end %d", i)), e.gate, r.desired(i, e.phase), replayCfg(), nil, nil,
		slog.New(slog.DiscardHandler), e.clk)
}

// syncListener is the daemon's listener sync of end i (its pass after a
// new desired state, or a periodic one): the end's desired keys and
// revocations, keeping the keys its session carries (the daemon's
// Controller.Carried, here read from the session socket as it is).
func (r *replay) syncListener(i int) {
	e := r.end[i]
	d := r.desired(i, e.phase)
	d.Kind, d.Socket, d.WantCurrent, d.WantRNext = Listening, "listener", OptID{}, OptID{}
	if !e.read {
		// The start-up gate (internal/daemon/carried.go holdAll).
		d.Frozen = []KeyRange{{Prefix: netip.MustParsePrefix("0.0.0.0/0"), AnyDevice: true}}
	}
	o, err := Observe(e.sock, ReadFull)
	if err != nil {
		r.fail("observe end %d: %v", i, err)
	}
	opt := ListenerOptions{Carried: CarriedKeys(o), OptMemMax: func() (int, error) { return 0, nil }}
	if _, err := SyncListener(e.ln, d, opt); err != nil {
		r.fail("sync listener %d: %v", i, err)
	}
}

func (r *replay) apply(ev modelEvent) {
	r.t.Helper()
	if ev.kind == "init" {
		return
	}
	i := ev.end
	if i < 0 || i > 1 {
		r.fail("line %d: end %d", ev.line, i)
	}
	e := r.end[i]
	switch ev.kind {
	case "step", "timeout", "wait":
		e.clk = e.clk.Add(time.Millisecond)
		switch {
		case ev.kind == "timeout":
			e.clk = e.clk.Add(replayCfg().SwitchTimeout)
		case ev.kind == "wait" && e.m.st.State != StateGrace:
			r.fail("line %d: the model waits in grace, the machine is %s", ev.line, e.m.st.State)
		case ev.kind == "step" && e.m.st.State == StateGrace:
			if over := e.m.st.Since.Add(replayCfg().Grace); e.clk.Before(over) {
				e.clk = over
			}
		}
		if e.m.st.State == StateBackoff && e.clk.Before(e.m.st.NextAt) {
			e.clk = e.m.st.NextAt
		}
		if ev.crashAfter > 0 {
			e.gate.allow = ev.crashAfter
		}
		if ev.kind == "step" {
			e.read = true // the model's rd: the step reads the session first
		}
		before := e.m.st.State
		e.m.step(e.clk)
		if ev.kind == "timeout" && before == StateAnnounced && e.m.st.LastAbortReason != AbortSwitchTimeout {
			r.fail("line %d: the model's switch timeout at end %d did not abort the roll by timeout (%q)", ev.line, i, e.m.st.LastAbort)
		}
		if ev.crashAfter > 0 {
			r.restart(i)
			e.read = false
		}
	case "crash", "lose-record": // the record is the daemon's, not the machine's
		r.restart(i)
		e.read = false
	case "send":
		if e.flight != nil {
			r.fail("line %d: end %d sends with a segment in flight", ev.line, i)
		}
		s, err := r.net.Sign(e.sock)
		if err != nil {
			r.fail("line %d: sign: %v", ev.line, err)
		}
		e.flight = s
	case "recv", "lose":
		if e.flight == nil {
			r.fail("line %d: no segment in flight from end %d", ev.line, i)
		}
		s := e.flight
		e.flight = nil
		if ev.kind == "recv" {
			if err := r.net.Deliver(s, r.end[1-i].sock); err != nil {
				r.fail("line %d: segment %d->%d: %v (the model delivered it)", ev.line, i, 1-i, err)
			}
		}
	case "deliver", "expire", "edit":
		// A new desired state: a phase (expire: A's lifetime ended), or
		// new material for A. The end's machine gets it and the daemon
		// syncs the end's listener in the same pass.
		if ev.kind == "edit" {
			e.edited = true
		} else {
			e.phase = ev.phase
			e.edited = e.edited && modelKeys(e.phase)&modelA != 0
		}
		e.m.setDesired(r.desired(i, e.phase), e.clk)
		r.syncListener(i)
	case "lsync":
		r.syncListener(i)
	case "reconnect":
		r.connect(i)
	default:
		r.fail("line %d: unknown event %q", ev.line, ev.kind)
	}
}

// state reads the machines and the kernel in the model's terms.
func (r *replay) state() modelState {
	r.t.Helper()
	var s modelState
	for i, e := range r.end {
		original := r.modelKey(i, modelA).Secret.Fingerprint()
		mask := func(ks []tcpao.KeyInfo) int {
			m := 0
			for _, k := range ks {
				if k.SendID != k.RecvID || k.SendID != modelA && k.SendID != modelB {
					r.fail("unexpected key %s", k.KeyRef)
				}
				if k.SendID == modelA && k.Fingerprint != original {
					m |= modelAEdited
					continue
				}
				m |= int(k.SendID)
			}
			return m
		}
		s.st[i] = e.m.st.State
		s.phase[i] = e.phase
		if e.edited {
			s.edited[i] = 1
		}
		o, err := Observe(e.sock, ReadFull)
		if err != nil {
			r.fail("observe end %d: %v", i, err)
		}
		s.keys[i] = mask(o.Keys)
		if o.Info.HaveCurrent {
			s.cur[i] = int(o.Info.CurrentKey)
		}
		if o.Info.HaveRNext {
			s.rnext[i] = int(o.Info.RNextKey)
		}
		lo, err := Observe(e.ln, ReadFull)
		if err != nil {
			r.fail("observe listener %d: %v", i, err)
		}
		s.ln[i] = mask(lo.Keys)
		for _, k := range lo.Keys {
			if k.SendID == modelA && k.Fingerprint == original && k.PktGood > 0 {
				s.lgood[i] = 1
			}
		}
	}
	return s
}
