package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/connectguard"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// held is a socket the speaker is about to listen on, held in its
// listen(2) by aokeyd exec's supervisor: bound to the BGP port, not
// listening, registered with the discoverer (which reaches it through
// Options.SocketOf by its inode) as what it is before the listen, no
// listener.
type held struct {
	sock *tcpaotest.Sock
	c    *countingSocket
	ref  sockets.Ref
}

func (e *env) held(port uint16) held {
	e.t.Helper()
	s, err := e.net.Socket(localAddr)
	if err != nil {
		e.t.Fatal(err)
	}
	c := &countingSocket{Socket: s}
	ref := e.disc.Add(c, netip.AddrPortFrom(localAddr, port), netip.AddrPort{}, false)
	return held{sock: s, c: c, ref: ref}
}

// ask is the supervisor's question for h (its duplicate unused: the test's
// sockets are reached by inode).
func (h held) ask() connectguard.ListenSocket {
	return connectguard.ListenSocket{PID: h.ref.PID, FD: h.ref.FD, Dup: -1, Local: h.ref.Local, Inode: h.ref.Inode}
}

// listen is the listen(2) the supervisor lets proceed: the socket listens,
// and the listener watch lists it from now on.
func (e *env) listen(h held) {
	e.t.Helper()
	if err := h.sock.Listen(); err != nil {
		e.t.Fatal(err)
	}
	e.disc.Listen(h.ref.Inode)
}

// The listen guard (aokeyd exec): a listener the speaker opens gets the
// listener's keys inside its listen(), before the kernel takes any SYN on
// it, through the listener sync itself; the listener watch then finds the
// new listener in sync and writes nothing; the peer's unsigned SYN is
// dropped from the first moment, and its signed one accepted.
func TestListenKeyedBeforeItListens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k1}})
		e.waitKeys("listener", e.lis, ids(k1))
		e.quiet(5 * time.Second)

		h := e.held(bgpPort)
		if err := e.d.ListenKeys(context.Background(), h.ask()); err != nil {
			t.Fatalf("ListenKeys: %v\nlogs:\n%s", err, e.logs.String())
		}
		if got := keyIDs(t, h.sock); !slices.Equal(got, ids(k1)) {
			t.Fatalf("keys on the socket when its listen proceeds: %v, want the listener's %v", got, ids(k1))
		}
		_, writes := h.c.calls()
		_, full := e.d.Passes()
		e.listen(h)
		e.quiet(5 * time.Second) // the watch sees the new listener and asks for a pass
		if _, now := e.d.Passes(); now == full {
			t.Fatal("no full pass after the new listener appeared: the watch did not sync it")
		}
		if _, w := h.c.calls(); w != writes {
			t.Errorf("the listener sync wrote %d times on the listener keyed in its listen(), want none", w-writes)
		}
		unsigned, err := e.net.Socket(peerAddr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.net.Connect(unsigned, h.sock); !errors.Is(err, tcpaotest.ErrTimeout) {
			t.Fatalf("an unsigned SYN from the peer: %v, want it dropped (%v)", err, tcpaotest.ErrTimeout)
		}
		signed, err := e.net.Socket(peerAddr)
		if err != nil {
			t.Fatal(err)
		}
		m := k1.mirror()
		defer m.Secret.Zero()
		if err := signed.AddKey(m, tcpao.AddOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.net.Connect(signed, h.sock); err != nil {
			t.Fatalf("the peer's signed SYN: %v", err)
		}
		if !strings.Contains(e.logs.String(), "keyed in its listen") {
			t.Errorf("the log does not say the listener was keyed in its listen():\n%s", e.logs.String())
		}
	})
}

// Before aokeyd has read keys the listen waits, rather than proceed
// unkeyed, and proceeds keyed once they are read. A listen that stops
// waiting (the supervisor's context ends) is not keyed later: aokeyd
// never touches the socket it was asked about.
func TestListenWaitsForKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k1}, sourceDown: errors.New("vault unreachable")})
		h := e.held(bgpPort)
		gone := e.held(bgpPort)
		done := make(chan error, 1)
		go func() { done <- e.d.ListenKeys(context.Background(), h.ask()) }()
		ctx, cancel := context.WithCancel(context.Background())
		withdrawn := make(chan error, 1)
		go func() { withdrawn <- e.d.ListenKeys(ctx, gone.ask()) }()
		e.quiet(10 * time.Second)
		select {
		case err := <-done:
			t.Fatalf("ListenKeys returned %v with no keys read", err)
		default:
		}
		if got := keyIDs(t, h.sock); got != nil {
			t.Fatalf("keys %v on the socket before any were read", got)
		}
		cancel()
		synctest.Wait()
		if err := <-withdrawn; !errors.Is(err, context.Canceled) {
			t.Fatalf("the listen that stopped waiting: %v, want %v", err, context.Canceled)
		}

		e.refreshWith(k1)
		e.waitFor("the listen answered", func() bool { return len(done) == 1 })
		if err := <-done; err != nil {
			t.Fatalf("ListenKeys: %v\nlogs:\n%s", err, e.logs.String())
		}
		if got := keyIDs(t, h.sock); !slices.Equal(got, ids(k1)) {
			t.Fatalf("keys %v, want %v", got, ids(k1))
		}
		if r, w := gone.c.calls(); r+w != 0 {
			t.Errorf("the withdrawn socket was read %d and written %d times", r, w)
		}
	})
}

// Fail closed: a socket the sync cannot key, or one for which a binding's
// keys could not be computed (they would be missing on it, and the peer's
// unsigned SYN taken), fails the listen; a listen on another port than
// the speaker's is none of aokeyd's; one held when aokeyd stops fails.
func TestListenRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, _ := testKeys()
		pol := fmt.Sprintf(basePolicy, "keep") + `  - neighbor: 192.0.2.3
    key_chain: edge
`
		pol = strings.Replace(pol, "  - name: core\n", "  - name: core\n  - name: edge\n", 1)
		e := newEnv(t, envOptions{keys: []testKey{k1}, policy: pol})
		e.waitKeys("listener", e.lis, ids(k1))

		// A binding's keys not computed (its chain is not in the source).
		h := e.held(bgpPort)
		err := e.d.ListenKeys(context.Background(), h.ask())
		if err == nil || !strings.Contains(err.Error(), "192.0.2.3") {
			t.Fatalf("a binding's keys not computed: ListenKeys: %v, want an error naming the binding of 192.0.2.3", err)
		}
		if r, w := h.c.calls(); w != 0 {
			t.Errorf("the refused socket was written %d times (read %d)", w, r)
		}

		e.pol = parsePolicy(t, fmt.Sprintf(basePolicy, "keep"))
		e.d.SetPolicy(e.pol)
		e.quiet(5 * time.Second)

		// The keys cannot be installed.
		h = e.held(bgpPort)
		h.c.failWrites(errors.New("setsockopt(TCP_AO_ADD_KEY): cannot allocate memory"))
		err = e.d.ListenKeys(context.Background(), h.ask())
		if err == nil || !strings.Contains(err.Error(), "cannot allocate memory") {
			t.Fatalf("keys not installed: ListenKeys: %v, want the install's error", err)
		}

		// Another port.
		h = e.held(bgpPort + 1)
		if err := e.d.ListenKeys(context.Background(), h.ask()); err != nil {
			t.Fatalf("another port: ListenKeys: %v", err)
		}
		if r, w := h.c.calls(); r+w != 0 {
			t.Errorf("a listener on another port was read %d and written %d times", r, w)
		}

		// aokeyd stops.
		e.stop()
		h = e.held(bgpPort)
		if err := e.d.ListenKeys(context.Background(), h.ask()); err == nil {
			t.Fatal("ListenKeys answered nil with aokeyd stopped")
		}
	})
}

// A peer on TCP-MD5 has its password on the listener: the socket held in
// listen() gets it too, as the listener sync puts it on every listener.
func TestListenMD5Password(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw = "md5-Password-listen"
		k0, _, _, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k0}})
		e.src.setMD5(pw, k0.mkt())
		if err := e.d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := []string{"192.0.2.2/32=" + pw}
		e.waitFor("the password on the listener", func() bool { return slices.Equal(md5Of(t, e.lis, pw), want) })

		h := e.held(bgpPort)
		if err := e.d.ListenKeys(context.Background(), h.ask()); err != nil {
			t.Fatalf("ListenKeys: %v\nlogs:\n%s", err, e.logs.String())
		}
		if got := md5Of(t, h.sock, pw); !slices.Equal(got, want) {
			t.Fatalf("TCP-MD5 keys on the socket when its listen proceeds: %v, want %v", got, want)
		}
		if got := keyIDs(t, h.sock); got != nil {
			t.Errorf("TCP-AO keys %v on it: a TCP-MD5 peer's listener carries its password alone", got)
		}
	})
}

// gobgpd's pid is found by its listener (sockets.ListenerOwner): at its
// first listen() there is none, and the speaker's listeners cannot be
// listed. The held socket is keyed alone all the same.
func TestListenKeyedWhenListenersNotListed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, k1, _, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k1}})
		e.waitKeys("listener", e.lis, ids(k1))
		e.disc.FailListeners(errors.New("pid of fake-speaker: no listener on port 179"))
		h := e.held(bgpPort)
		if err := e.d.ListenKeys(context.Background(), h.ask()); err != nil {
			t.Fatalf("ListenKeys: %v\nlogs:\n%s", err, e.logs.String())
		}
		if got := keyIDs(t, h.sock); !slices.Equal(got, ids(k1)) {
			t.Fatalf("keys %v, want %v", got, ids(k1))
		}
	})
}
