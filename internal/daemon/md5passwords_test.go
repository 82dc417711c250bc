package daemon_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// md5Of is the listener's TCP-MD5 keys as "PREFIX=PASSWORD" (the password
// found by fingerprint among candidates, "?" when none matches).
func md5Of(t *testing.T, s *tcpaotest.Sock, candidates ...string) []string {
	t.Helper()
	ks, err := s.MD5Keys()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range ks {
		pw := "?"
		for _, c := range candidates {
			if tcpao.NewSecret([]byte(c)).Fingerprint() == k.Fingerprint {
				pw = c
			}
		}
		out = append(out, k.Peer.String()+"="+pw)
	}
	return out
}

// A chain's TCP-MD5 password is installed on the listener for the chain's
// peer, instead of the chain's TCP-AO keys; the peer's MD5 session is left
// alone; a changed password or one gone from the source leaves the
// installed one in place (a TCP-MD5 session has one password), with a
// warning; the password never reaches logs or status.
func TestMD5PasswordOnListener(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw1, pw2 = "md5-Password-one", "md5-Password-two"
		k0, _, _, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k0}})
		e.waitKeys("listener", e.lis, ids(k0))

		// The chain gains a password: the peer is a TCP-MD5 peer now.
		// Its TCP-AO key never carried a session: it goes, the password
		// comes.
		mkt := k0.mkt()
		e.src.setMD5(pw1, mkt)
		if err := e.d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := []string{"192.0.2.2/32=" + pw1}
		e.waitFor("the password on the listener", func() bool { return slices.Equal(md5Of(t, e.lis, pw1), want) })
		e.waitKeys("listener", e.lis, nil)

		// The peer connects with TCP-MD5; its session is not touched.
		c, err := e.net.Socket(peerAddr)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddMD5(tcpao.MD5Key{MD5Ref: tcpao.MD5Ref{Peer: netip.PrefixFrom(localAddr, 32)}, Secret: tcpao.NewSecret([]byte(pw1))}); err != nil {
			t.Fatal(err)
		}
		if e.acc, err = e.net.Connect(c, e.lis); err != nil {
			t.Fatalf("TCP-MD5 connection: %v", err)
		}
		e.client = c
		e.accC = e.disc.add(e.acc, netip.AddrPortFrom(localAddr, bgpPort), c.LocalAddr(), false)
		e.established()
		e.quiet(5 * time.Second)
		if _, err := e.acc.Info(); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("the TCP-MD5 session got TCP-AO: Info = %v", err)
		}
		st := e.peerStatus()
		if st.Auth != control.AuthMD5 || len(st.Keys) != 0 {
			t.Fatalf("status auth %q keys %+v, want %q and no TCP-AO keys", st.Auth, st.Keys, control.AuthMD5)
		}

		// A changed password is not applied: the installed one stays.
		e.src.setMD5(pw2, mkt)
		if err := e.d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.quiet(5 * time.Second)
		if got := md5Of(t, e.lis, pw1, pw2); !slices.Equal(got, want) {
			t.Fatalf("after a password change the listener has %v, want %v", got, want)
		}
		if st := e.peerStatus(); !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "changed in the key source: not applied") }) {
			t.Errorf("status warnings %q do not say the change waits", st.Warnings)
		}
		plan, err := e.d.Plan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(plan.Plan, func(l string) bool {
			return strings.Contains(l, "tcp-md5 keep 192.0.2.2/32 (edited-in-place): a changed TCP-MD5 password resets the session")
		}) {
			t.Errorf("aoctl plan %q does not say the password change waits for a reset", plan.Plan)
		}

		// Gone from the source: kept, never leaving the peer unsigned.
		e.src.setMD5("", mkt)
		if err := e.d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.quiet(5 * time.Second)
		if got := md5Of(t, e.lis, pw1); !slices.Equal(got, want) {
			t.Fatalf("after the password left the source the listener has %v, want %v", got, want)
		}
		for _, s := range []string{pw1, pw2} {
			if strings.Contains(e.logs.String(), s) {
				t.Fatalf("a password is in the logs")
			}
		}
		mkt.Zero()
	})
}

// A changed TCP-MD5 password is applied only by the operator's planned
// reset (aoctl replace CHAIN --md5): the listener takes it, the session
// is reset once to reconnect with it, and from then on the peer gets in
// with the new password only.
func TestMD5PasswordReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw1, pw2 = "md5-Password-one", "md5-Password-two"
		e, k0 := md5Env(t, pw1)
		mkt := k0.mkt()
		e.src.setMD5(pw2, mkt)
		mkt.Zero()
		if err := e.d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.quiet(5 * time.Second)
		if got := md5Of(t, e.lis, pw1, pw2); !slices.Equal(got, []string{"192.0.2.2/32=" + pw1}) || len(e.sp.Resets()) != 0 {
			t.Fatalf("before the replace: listener %v, resets %v", got, e.sp.Resets())
		}
		res, err := e.d.Replace(context.Background(), control.ReplaceRequest{Chain: chainName, MD5: true})
		if err != nil || res.Failed() {
			t.Fatalf("replace --md5: %+v %v", res, err)
		}
		if got := md5Of(t, e.lis, pw1, pw2); !slices.Equal(got, []string{"192.0.2.2/32=" + pw2}) {
			t.Fatalf("after the replace the listener has %v", got)
		}
		if r := e.sp.Resets(); len(r) != 1 {
			t.Fatalf("resets %v, want the peer's session once", r)
		}
		if !e.tryDial(md5Prep(pw2)) || e.tryDial(md5Prep(pw1)) {
			t.Fatal("after the replace the listener does not take exactly the new password")
		}
		e.quiet(time.Minute)
		if len(e.sp.Resets()) != 1 {
			t.Fatal("the session was reset again")
		}
	})
}

// A chain of TCP-MD5 peers without TCP-AO keys yet: the password goes on
// the listener, the peer shows as tcp-md5, and nothing says the chain is
// degraded or the peer has a key gap.
func TestMD5OnlyChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw = "md5-Password-one"
		e := newEnv(t, envOptions{})
		e.src.setMD5(pw)
		if err := e.d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the password on the listener", func() bool { return slices.Equal(md5Of(t, e.lis, pw), []string{"192.0.2.2/32=" + pw}) })
		e.dialMD5(pw)
		e.quiet(5 * time.Second)
		st := e.peerStatus()
		if st.Auth != control.AuthMD5 || len(st.Warnings) != 0 {
			t.Fatalf("status auth %q warnings %q", st.Auth, st.Warnings)
		}
	})
}

// AddMD5, DelMD5 and MD5Keys pass the socket's TCP-MD5 side through, as
// the daemon's own wrappers do.
func (c *countingSocket) AddMD5(k tcpao.MD5Key) error { c.wrote(); return tcpao.AddMD5(c.Socket, k) }
func (c *countingSocket) DelMD5(r tcpao.MD5Ref) error { c.wrote(); return tcpao.DelMD5(c.Socket, r) }

func (c *countingSocket) wrote() {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
}

func (c *countingSocket) MD5Keys() ([]tcpao.MD5Info, error) { return tcpao.ReadMD5(c.Socket) }

// The passwords aokeyd installed stay aokeyd's across a restart (the
// ownership record): a password changed in the source while aokeyd was
// down is held back as a change of aokeyd's own key (not taken for a
// speaker's), and aoctl replace --md5 applies it.
func TestMD5OwnershipSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const pw1, pw2 = "md5-Password-one", "md5-Password-two"
		e, k0 := md5Env(t, pw1)
		e.stop()
		mkt := k0.mkt()
		e.src.setMD5(pw2, mkt)
		mkt.Zero()
		e.start("")
		e.quiet(5 * time.Second)
		st := e.peerStatus()
		if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "changed in the key source: not applied") }) {
			t.Fatalf("after the restart the changed password is not held as aokeyd's own: warnings %q", st.Warnings)
		}
		res, err := e.d.Replace(context.Background(), control.ReplaceRequest{Chain: chainName, MD5: true})
		if err != nil || res.Failed() {
			t.Fatalf("replace --md5 after a restart: %+v %v", res, err)
		}
		if got := md5Of(t, e.lis, pw1, pw2); !slices.Equal(got, []string{"192.0.2.2/32=" + pw2}) {
			t.Fatalf("after the replace the listener has %v", got)
		}
	})
}
