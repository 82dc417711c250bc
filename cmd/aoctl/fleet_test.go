package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
	"github.com/hashicorp/vault/api"
)

// fleetVault is the test Vault in memory; client makes a client for token
// (the operator's own).
func fleetVault(t *testing.T) (*vaulttest.Server, func(token string) *api.Client) {
	t.Helper()
	srv, err := vaulttest.New(vaulttest.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, func(token string) *api.Client {
		c, err := api.NewClient(srv.ClientConfig())
		if err != nil {
			t.Fatal(err)
		}
		c.SetToken(token)
		return c
	}
}

func runFleet(t *testing.T, c *api.Client, now func() time.Time, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, now: now,
		getenv: func(k string) string {
			if k == "USER" {
				return "alice"
			}
			return ""
		},
		vault: func() (*api.Client, error) { return c, nil }}
	code := a.run(context.Background(), args)
	return result{code, out.String(), errb.String()}
}

func fkey(name string, send, recv uint8, cur, rnext bool) fleet.Key {
	return fleet.Key{Chain: "core", Name: name, SendID: send, RecvID: recv, Alg: "hmac(sha256)", IncludeTCPOptions: true,
		Current: cur, RNext: rnext, State: "installed"}
}

func fpeer(addr string, keys ...fleet.Key) fleet.Peer {
	p := fleet.Peer{ID: peer.KeyOf(netip.MustParseAddr(addr), ""), Session: "established", Chain: "core", Keys: keys, CurrentSince: testNow.Add(-time.Hour),
		Roll: fleet.Roll{State: "steady"}}
	for _, k := range keys {
		if k.Current {
			p.Current = k.Ref()
		}
		if k.RNext {
			p.RNext = k.Ref()
		}
	}
	return p
}

func fdoc(id, addr string, peers ...fleet.Peer) fleet.Document {
	return fleet.Document{Schema: fleet.Schema, RouterID: id, Addresses: []netip.Addr{netip.MustParseAddr(addr)}, PublishedAt: testNow.Add(-10 * time.Second),
		Refresh: fleet.Duration(30 * time.Second), SwitchTimeout: fleet.Duration(5 * time.Minute), Peers: peers}
}

// A fleet of four: r1-r2 agree; r2 lags on r3 (r3 announces k2, which r2
// does not hold; r2's copy of k1 excludes TCP options); r1's link to a
// BIRD end (10.0.9.9) is one-ended; r4 stopped reporting.
func fleetDocs() []fleet.Document {
	r1 := fdoc("r1", "10.0.0.1", fpeer("10.0.0.2", fkey("k1", 1, 2, true, true)), fpeer("10.0.9.9", fkey("k1", 1, 2, true, true)))
	r1.Addresses = append(r1.Addresses, netip.MustParseAddr("10.0.9.1"))
	r2 := fdoc("r2", "10.0.0.2", fpeer("10.0.0.1", fkey("k1", 2, 1, true, true)), fpeer("10.0.1.3", fkey("k1", 2, 1, true, true)))
	r2.Peers[1].Keys[0].IncludeTCPOptions = false
	r2.Addresses = append(r2.Addresses, netip.MustParseAddr("10.0.1.2"))
	r3 := fdoc("r3", "10.0.1.3", fpeer("10.0.1.2", fkey("k1", 1, 2, true, false), fkey("k2", 3, 4, false, true)), fpeer("10.0.2.4", fkey("k1", 1, 2, true, true)))
	r3.Addresses = append(r3.Addresses, netip.MustParseAddr("10.0.2.3"))
	r4 := fdoc("r4", "10.0.2.4", fpeer("10.0.2.3", fkey("k1", 2, 1, true, true)))
	r4.PublishedAt = testNow.Add(-20 * time.Minute)
	return []fleet.Document{r1, r2, r3, r4}
}

func TestFleetStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, client := fleetVault(t)
		root := client("root")
		st := fleet.Store{V: fleet.Client{C: root}, Mount: "secret", Prefix: "aokeyd/fleet"}
		for _, d := range fleetDocs() {
			if err := st.PutStatus(context.Background(), d); err != nil {
				t.Fatal(err)
			}
		}
		now := func() time.Time { return testNow }
		r := runFleet(t, root, now, "fleet", "status")
		if r.code != exitError || r.stderr != "" {
			t.Errorf("exit %d, stderr %q; want 1 (flagged links)", r.code, r.stderr)
		}
		golden(t, "fleet-status.golden", r.stdout)
		r = runFleet(t, root, now, "fleet", "status", "--json")
		golden(t, "fleet-status.json.golden", r.stdout)

		// Only the agreeing pair: nothing flagged, exit 0.
		_, c2 := fleetVault(t)
		c := c2("root")
		st2 := fleet.Store{V: fleet.Client{C: c}, Mount: "secret", Prefix: "aokeyd/fleet"}
		d := fleetDocs()
		d[0].Peers, d[1].Peers = d[0].Peers[:1], d[1].Peers[:1]
		for _, x := range d[:2] {
			if err := st2.PutStatus(context.Background(), x); err != nil {
				t.Fatal(err)
			}
		}
		if r := runFleet(t, c, now, "fleet", "status"); r.code != exitOK || !strings.Contains(r.stdout, "1 links, 0 flagged") {
			t.Errorf("agreeing fleet: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// fakeRouter publishes like aokeyd: one established peer holding core/k1
// until a fleet revocation takes it off.
type fakeRouter struct {
	mu      sync.Mutex
	revoked bool
	addr    string
}

func (f *fakeRouter) status(context.Context) (control.StatusReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	keys := []control.Key{{Chain: "core", Name: "k2", SendID: 3, RecvID: 4, Current: f.revoked, State: control.KeyInstalled}}
	if !f.revoked {
		keys = append(keys, control.Key{Chain: "core", Name: "k1", SendID: 1, RecvID: 2, Current: true, RNext: true, State: control.KeyInstalled})
	}
	return control.StatusReport{Peers: []control.PeerStatus{{Peer: f.addr, SessionState: "established", Keys: keys}}}, nil
}

func (f *fakeRouter) revoke(_ context.Context, chain, key string) (control.RevokeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked = true
	return control.RevokeResult{Chain: chain, Key: key, Sockets: []control.RevokeSocket{{Socket: "peer " + f.addr, Action: control.ActionForcedReplaced}}}, nil
}

// aoctl fleet revoke records who, why and when with check-and-set, then
// reports each router's seen and clean times from their documents.
func TestFleetRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, client := fleetVault(t)
		root := client(srv.RootToken())
		st := fleet.Store{V: fleet.Client{C: root}, Mount: "secret", Prefix: "aokeyd/fleet"}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		for i, id := range []string{"r1", "r2", "r3"} {
			fr := &fakeRouter{addr: "10.0.0." + string(rune('1'+i))}
			p := fleet.NewPublisher(fleet.Options{Store: st, RouterID: id, Refresh: time.Duration(i+1) * time.Second,
				Status: fr.status, Revoke: fr.revoke})
			wg.Go(func() { _ = p.Run(ctx) })
		}
		time.Sleep(100 * time.Millisecond)
		op := client(srv.IssueToken(vaulttest.TokenOptions{DisplayName: "alice"}))
		r := runFleet(t, op, time.Now, "fleet", "revoke", "core/k1", "--reason", "leaked in ticket 4711")
		if r.code != exitOK {
			t.Errorf("exit %d: %s%s", r.code, r.stdout, r.stderr)
		}
		golden(t, "fleet-revoke.golden", r.stdout)
		l, ver, err := st.Revocations(ctx)
		if err != nil || ver != 1 || len(l.Revocations) != 1 {
			t.Fatalf("record %+v v%d: %v", l, ver, err)
		}
		if e := l.Revocations[0]; e.By != "vault:token-alice as user:alice" || e.Reason != "leaked in ticket 4711" || e.At.IsZero() {
			t.Errorf("recorded %+v", e)
		}
		r = runFleet(t, op, time.Now, "fleet", "revoke", "core/k1", "--reason", "again", "--json", "--wait", "0s")
		if r.code != exitOK || !strings.Contains(r.stdout, `"already": true`) || !strings.Contains(r.stdout, `"all_clean": true`) {
			t.Errorf("second revoke: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		// Durations in seconds, as numbers, as every duration of --json.
		var rep struct {
			Routers []struct {
				CleanAfter json.Number `json:"clean_after"`
			} `json:"routers"`
			CleanAfter json.Number `json:"clean_after"`
			Refresh    json.Number `json:"refresh"`
		}
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		dec.UseNumber()
		if err := dec.Decode(&rep); err != nil || rep.Refresh != "3" || rep.CleanAfter == "" || len(rep.Routers) != 3 ||
			rep.Routers[2].CleanAfter != "2.9" || strings.Contains(r.stdout, "_ms") {
			t.Errorf("durations not in seconds (%v): %+v\n%s", err, rep, r.stdout)
		}
		// --wait 0: recorded, not waited for; that is success (a script
		// revoking and then watching the fleet itself, as the chaos run
		// does, must not read it as a failed revoke).
		r = runFleet(t, op, time.Now, "fleet", "revoke", "core/k2", "--reason", "rotated out", "--json", "--wait", "0")
		if r.code != exitOK || !strings.Contains(r.stdout, `"version": 2`) || !strings.Contains(r.stdout, `"all_clean": false`) {
			t.Errorf("revoke without waiting: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if r := runFleet(t, op, time.Now, "fleet", "revoke", "core/k1"); r.code != exitUsage || !strings.Contains(r.stderr, "--reason is required") {
			t.Errorf("no reason: exit %d %s", r.code, r.stderr)
		}
		cancel()
		wg.Wait()
	})
}

// fleet revoke prints each router as it becomes clean, while it waits for
// the others: r1 (1s refresh) long before r3 (3s).
func TestFleetRevokePrintsEachRouterAsItIsClean(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, client := fleetVault(t)
		root := client(srv.RootToken())
		st := fleet.Store{V: fleet.Client{C: root}, Mount: "secret", Prefix: "aokeyd/fleet"}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		for i, id := range []string{"r1", "r2", "r3"} {
			fr := &fakeRouter{addr: "10.0.0." + string(rune('1'+i))}
			p := fleet.NewPublisher(fleet.Options{Store: st, RouterID: id, Refresh: time.Duration(i+1) * time.Second,
				Status: fr.status, Revoke: fr.revoke})
			wg.Go(func() { _ = p.Run(ctx) })
		}
		time.Sleep(100 * time.Millisecond)
		op := client(srv.IssueToken(vaulttest.TokenOptions{DisplayName: "alice"}))
		var out lockedBuffer
		a := &app{stdout: &out, stderr: &out, now: time.Now, getenv: func(string) string { return "" },
			vault: func() (*api.Client, error) { return op, nil }}
		done := make(chan int)
		go func() {
			done <- a.run(context.Background(), []string{"fleet", "revoke", "core/k1", "--reason", "leaked"})
		}()
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if s := out.String(); !strings.Contains(s, "  r1 clean at ") || strings.Contains(s, "r3") {
			t.Errorf("1.5s in: want r1 clean and nothing of r3 yet:\n%s", s)
		}
		if code := <-done; code != exitOK {
			t.Errorf("exit %d:\n%s", code, out.String())
		}
		if s := out.String(); strings.Index(s, "  r3 clean at ") > strings.Index(s, "ROUTER") {
			t.Errorf("the table before the last router's line:\n%s", s)
		}
	})
}

// TestFleetStatusVRFTwins: two routers peering over the same addresses
// in VRFs red and blue are two links in aoctl fleet status, each named
// with its VRF and joining the ends of its own VRF (none flagged), each
// end's peer shown with its VRF.
func TestFleetStatusVRFTwins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, client := fleetVault(t)
		root := client("root")
		st := fleet.Store{V: fleet.Client{C: root}, Mount: "secret", Prefix: "aokeyd/fleet"}
		twin := func(addr, vrf, local string, k fleet.Key) fleet.Peer {
			k.Chain = vrf
			p := fpeer(addr, k)
			p.ID.VRF, p.Local, p.Chain, p.Current, p.RNext = vrf, netip.MustParseAddr(local), vrf, k.Ref(), k.Ref()
			return p
		}
		r1 := fdoc("r1", "10.0.0.1", twin("10.0.0.2", "red", "10.0.0.1", fkey("k1", 1, 101, true, true)),
			twin("10.0.0.2", "blue", "10.0.0.1", fkey("k61", 61, 161, true, true)))
		r2 := fdoc("r2", "10.0.0.2", twin("10.0.0.1", "red", "10.0.0.2", fkey("k1", 101, 1, true, true)),
			twin("10.0.0.1", "blue", "10.0.0.2", fkey("k61", 161, 61, true, true)))
		for _, d := range []fleet.Document{r1, r2} {
			if err := st.PutStatus(context.Background(), d); err != nil {
				t.Fatal(err)
			}
		}
		r := runFleet(t, root, func() time.Time { return testNow }, "fleet", "status")
		if r.code != exitOK || r.stderr != "" || !strings.Contains(r.stdout, "2 links, 0 flagged") {
			t.Fatalf("exit %d, want 0 and two links, none flagged:\n%s%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"\nr1 vrf blue <-> r2 vrf blue\n", "\nr1 vrf red <-> r2 vrf red\n", " 10.0.0.2 vrf red ", " 10.0.0.1 vrf blue "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("no %q in\n%s", want, r.stdout)
			}
		}
	})
}
