package rotator

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// batchCounter is a socket whose calls cost one borrow of the descriptor
// each, unless they run inside BatchKeys (one borrow for the batch), like
// bgp's AOSocket over pidfd_getfd.
type batchCounter struct {
	*testSock
	borrows int
	inBatch bool
}

func (b *batchCounter) borrow() {
	if !b.inBatch {
		b.borrows++
	}
}

func (b *batchCounter) BatchKeys(f func(tcpao.Socket) error) error {
	b.borrows++
	b.inBatch = true
	defer func() { b.inBatch = false }()
	return f(b.testSock)
}

func (b *batchCounter) Info() (tcpao.Info, error) { b.borrow(); return b.testSock.Info() }
func (b *batchCounter) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	b.borrow()
	return b.testSock.Keys(f)
}

// TestObserveBorrowsOnce: reading a socket (TCP_AO_INFO and GET_KEYS) is
// one borrow of the speaker's descriptor, not one per socket option: every
// step of every peer's roll reads its socket, and on a real kernel each
// borrow is pidfd_open, pidfd_getfd, fstat, SO_COOKIE and two closes.
// It failed before Observe used BatchKeys (2 borrows).
func TestObserveBorrowsOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		sock *testSock
	}{
		{"established", newEstablished(mkKey("192.0.2.2/32", 1, 101, "a"))},
		{"listener", listenerWith(t, mkKey("192.0.2.0/24", 1, 101, "a"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &batchCounter{testSock: tc.sock}
			if _, err := Observe(b, ReadFull); err != nil {
				t.Fatal(err)
			}
			if b.borrows != 1 {
				t.Errorf("Observe borrowed the socket %d times, want 1", b.borrows)
			}
		})
	}
}

func listenerWith(t *testing.T, k tcpao.Key) *testSock {
	s := newListener()
	if err := s.AddKey(k, tcpao.AddOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// borrowLog is batchCounter with a record of what each borrow did: "a" an
// add, "d" a delete, "s" a set info, "r" a read (info, keys).
type borrowLog struct {
	*testSock
	borrows [][]string
	inBatch bool
}

func (b *borrowLog) note(what string) {
	if !b.inBatch {
		b.borrows = append(b.borrows, nil)
	}
	b.borrows[len(b.borrows)-1] = append(b.borrows[len(b.borrows)-1], what)
}

func (b *borrowLog) BatchKeys(f func(tcpao.Socket) error) error {
	b.borrows = append(b.borrows, nil)
	b.inBatch = true
	defer func() { b.inBatch = false }()
	return f(loggedIn{b})
}

// loggedIn is the Socket a batch hands out: its calls are noted in the
// batch's borrow.
type loggedIn struct{ b *borrowLog }

func (s loggedIn) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	s.b.note("a")
	return s.b.testSock.AddKey(k, o)
}
func (s loggedIn) DelKey(d tcpao.DelKey) error { s.b.note("d"); return s.b.testSock.DelKey(d) }
func (s loggedIn) SetInfo(c tcpao.InfoChange) error {
	s.b.note("s")
	return s.b.testSock.SetInfo(c)
}
func (s loggedIn) Info() (tcpao.Info, error) { s.b.note("r"); return s.b.testSock.Info() }
func (s loggedIn) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	s.b.note("r")
	return s.b.testSock.Keys(f)
}

func (b *borrowLog) AddKey(k tcpao.Key, o tcpao.AddOptions) error { return loggedIn{b}.AddKey(k, o) }
func (b *borrowLog) DelKey(d tcpao.DelKey) error                  { return loggedIn{b}.DelKey(d) }
func (b *borrowLog) SetInfo(c tcpao.InfoChange) error             { return loggedIn{b}.SetInfo(c) }
func (b *borrowLog) Info() (tcpao.Info, error)                    { return loggedIn{b}.Info() }
func (b *borrowLog) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	return loggedIn{b}.Keys(f)
}

// TestRollKeyWritesReadBackInTheirBorrow: a roll's install and retire steps
// read the socket back in the same borrow of the descriptor as their key
// writes (the machine reads it after each of them anyway), so a roll
// borrows the socket once per step, not twice. It failed before (the
// install's add and the retire's delete were borrows of their own, the read
// after each another).
func TestRollKeyWritesReadBackInTheirBorrow(t *testing.T) {
	lx := rollLogged(t)
	keyWrites := 0
	for i, bw := range lx.borrows {
		w := strings.Join(bw, "")
		if !strings.ContainsAny(w, "ad") {
			continue
		}
		keyWrites++
		// The install's read-back may be followed by its announce ("s").
		if after := w[strings.LastIndexAny(w, "ad")+1:]; after != "rr" && after != "rrs" {
			t.Errorf("borrow %d did %q: a key write not read back in its borrow", i, w)
		}
	}
	if keyWrites < 2 {
		t.Errorf("borrows %v: want the install's and the retire's key writes among them", lx.borrows)
	}
}

func (b *batchCounter) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	b.borrow()
	return b.testSock.AddKey(k, o)
}

func (b *batchCounter) DelKey(d tcpao.DelKey) error { b.borrow(); return b.testSock.DelKey(d) }

func (b *batchCounter) SetInfo(c tcpao.InfoChange) error {
	b.borrow()
	return b.testSock.SetInfo(c)
}

// TestInstallAnnouncesInItsBorrow: the step that starts a roll reads the
// socket, installs the new key, reads it back and announces it in two
// borrows of the descriptor, not three: at a fleet-wide key change every
// peer makes this step at once. It failed before the announce rode in the
// install's borrow (3).
func TestInstallAnnouncesInItsBorrow(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	s := &batchCounter{testSock: newEstablished(a)}
	g := &stepGuard{}
	m := newMachine(pid("p"), s, want(a), testCfg(), g, nil, slog.New(slog.DiscardHandler), t0)
	m.setDesired(want(b), t0)
	m.step(t0)
	if m.st.State != StateAnnounced {
		t.Fatalf("state %s (%s), want announced", m.st.State, m.st.LastAbort)
	}
	if rn, _ := s.testSock.Keys(tcpao.KeyFilter{RNext: true}); len(rn) != 1 || rn[0].RecvID != 2 {
		t.Fatalf("rnext after the step: %v, want key 2", rn)
	}
	if s.borrows != 2 {
		t.Errorf("the install step borrowed the socket %d times, want 2 (its read; install, read-back and announce)", s.borrows)
	}
	if m.writes != 2 {
		t.Errorf("%d writes counted, want 2 (the add and the announce)", m.writes)
	}
}

// The keepalive probe's calls, noted "p" (armed) and "e" (ended), in a
// borrow or as one of their own.
func (s loggedIn) ArmPeerProbe() (tcpao.PeerProbe, error) {
	s.b.note("p")
	return s.b.testSock.ArmPeerProbe()
}

func (s loggedIn) EndPeerProbe(p tcpao.PeerProbe) error {
	s.b.note("e")
	return s.b.testSock.EndPeerProbe(p)
}

func (b *borrowLog) ArmPeerProbe() (tcpao.PeerProbe, error) { return loggedIn{b}.ArmPeerProbe() }
func (b *borrowLog) EndPeerProbe(p tcpao.PeerProbe) error   { return loggedIn{b}.EndPeerProbe(p) }

// TestWaitsEndProbeInTheirReadBorrow: a roll's two waits for the peer's
// segment end their keepalive probe in a borrow of the descriptor they
// take anyway. Once the retire step's poll sees the peer send with the
// new key, the probe ends and the socket is read in full in one borrow
// ("err"); the await poll that sees the peer switch ends it after its
// read, in the read's borrow ("rre"). It failed before: a borrow "e" of
// its own after each ("rr", "e"; "e", "rr").
func TestWaitsEndProbeInTheirReadBorrow(t *testing.T) {
	lx := rollLogged(t)
	var ws []string
	for _, bw := range lx.borrows {
		ws = append(ws, strings.Join(bw, ""))
	}
	if !slices.Contains(ws, "p") {
		t.Fatalf("borrows %q: no keepalive probe armed in the roll's waits", ws)
	}
	if !slices.Contains(ws, "err") {
		t.Errorf("borrows %q: want the retire wait's probe ended in the borrow of the read after it (\"err\")", ws)
	}
	if !slices.Contains(ws, "rre") {
		t.Errorf("borrows %q: want the await's probe ended in the borrow of the read that ends the wait (\"rre\")", ws)
	}
	if slices.Contains(ws, "e") {
		t.Errorf("borrows %q: a probe ended in a borrow of its own", ws)
	}
}

// rollLogged runs one roll from alpha to bravo on a link whose near
// socket logs its borrows, and returns that log once the roll completed
// at both ends.
func rollLogged(t *testing.T) *borrowLog {
	t.Helper()
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	l := newLink(t, a, want(a), want(a), nil)
	lx := &borrowLog{testSock: l.x}
	l.mx.sock = lx
	l.mx.setDesired(want(b), l.now)
	l.my.setDesired(farDesired(want(b)), l.now)
	for range 2000 {
		l.tick()
		if l.mx.st.Rolls == 1 && l.my.st.Rolls == 1 {
			break
		}
	}
	if l.mx.st.Rolls != 1 {
		t.Fatalf("the roll did not complete: %+v\n%s", l.mx.st, dump(l.x))
	}
	return lx
}
