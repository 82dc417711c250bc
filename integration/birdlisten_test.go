package integration

import (
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/bird"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// TestBIRDRestartWhileListenerHeld pins a fact of BIRD 2.17 that the chaos
// fleet ran into (link 7 stranded after the final `birdc restart peer_a`):
// a BGP protocol's restart closes BIRD's listening socket when no other
// protocol shares it and binds a new one. While another process holds a
// duplicate of the old one (pidfd_getfd, as aokeyd's BIRD driver and the
// chaos sampler do to read its keys), the old socket still listens, the
// bind fails with EADDRINUSE and BIRD disables the protocol for good ("No
// listening socket"): nothing brings it back but `birdc enable`. Released
// before the restart, the protocol comes back on its own.
func TestBIRDRestartWhileListenerHeld(t *testing.T) {
	kerneltest.Require(t)
	_, b := lab.Pair(t, netip.MustParsePrefix("10.255.9.1/30"), netip.MustParsePrefix("10.255.9.2/30"))
	br := bird.Start(t, b, bird.Config{
		RouterID: "10.255.9.2", LocalAddr: "10.255.9.2", LocalAS: 65002, Neighbor: "10.255.9.1", PeerAS: 65001, Passive: true,
		Keys: []bird.Key{{SendID: 1, RecvID: 2, Secret: []byte("bird-listener-held-key"), Algorithm: "hmac sha256", Preferred: true}},
	})
	listener := func() []sockets.Ref {
		b, err := os.ReadFile(br.PIDFile())
		if err != nil {
			return nil
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		refs, _ := sockets.System{}.Listeners(pid, 179)
		return refs
	}
	lab.Eventually(t, lab.ProcessStart, "BIRD's listener", func() (bool, string) { return len(listener()) == 1, "" })
	restartHeld := func(hold bool) bird.Status {
		t.Helper()
		restart := func(int) error {
			if _, err := br.Birdc("restart", "peer_a"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
			return nil
		}
		if hold {
			if err := (sockets.System{}).With(listener()[0], restart); err != nil {
				t.Fatal(err)
			}
		} else {
			_ = restart(-1)
		}
		time.Sleep(2 * time.Second)
		st, err := br.Protocol()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := restartHeld(false)
	if st.State != "up" && st.State != "start" || len(listener()) != 1 {
		t.Fatalf("restarted with the listener free: state %q error %q, %d listeners; want it back", st.State, st.LastError, len(listener()))
	}
	st = restartHeld(true)
	log := lab.Tail(filepath.Join(br.Dir, "bird.log"), 2000)
	t.Logf("restarted while the listener was held: state %q, last error %q, %d listeners; bird.log:\n%s", st.State, st.LastError, len(listener()), log)
	if st.State != "down" || !strings.Contains(st.LastError, "No listening socket") || len(listener()) != 0 {
		t.Fatalf("restarted while the listener was held: state %q error %q, %d listeners; want down, No listening socket, none", st.State, st.LastError, len(listener()))
	}
	if _, err := br.Birdc("enable", "peer_a"); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 20*time.Second, "the protocol back after birdc enable", func() (bool, string) {
		st, err := br.Protocol()
		return err == nil && st.State != "down" && len(listener()) == 1, st.State + " " + st.LastError
	})
}
