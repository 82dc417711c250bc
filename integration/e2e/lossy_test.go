package e2e

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// lossyFault is one way a key source read can succeed and still lose keys.
type lossyFault struct {
	name string
	// newest: A's chain has an older key k1 and the newest k2, which both
	// ends send with; the fault hits k2. Otherwise k1 is the only key.
	newest bool
	vault  bool
	// apply puts the fault into the key source.
	apply func(l *testbed, keys []key)
	// warn are the words the status warning must carry.
	warn []string
}

// keyMaps are A's keys as chain document entries, to be broken.
func lossyKeyMaps(keys []key) []map[string]any {
	var ks []map[string]any
	if err := json.Unmarshal(lossyChainKeys(keys), &ks); err != nil {
		panic(err)
	}
	return ks
}

func lossyChainKeys(keys []key) json.RawMessage {
	var doc struct {
		Keys json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(chainDoc(keys), &doc); err != nil {
		panic(err)
	}
	return doc.Keys
}

// writeChains replaces A's key file with the given chains, each a list of
// key entries (valid or not) for B.
func (l *testbed) writeLossyChains(chains map[string][]map[string]any) {
	l.t.Helper()
	out := map[string]any{}
	for name, ks := range chains {
		if ks == nil {
			ks = []map[string]any{}
		}
		out[name] = map[string]any{"peers": []string{addrB.String()}, "keys": ks}
	}
	doc, err := json.Marshal(map[string]any{"chains": out})
	if err != nil {
		l.t.Fatal(err)
	}
	p := filepath.Join(l.dir, "keys.yaml")
	if err := os.WriteFile(p+".tmp", doc, 0o600); err != nil {
		l.t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		l.t.Fatal(err)
	}
}

func lossyFaults() []lossyFault {
	long := hex.EncodeToString([]byte(strings.Repeat("x", 81)))
	breakLast := func(f func(m map[string]any)) func(l *testbed, keys []key) {
		return func(l *testbed, keys []key) {
			ks := lossyKeyMaps(keys)
			f(ks[len(ks)-1])
			l.writeLossyChains(map[string][]map[string]any{"core": ks})
		}
	}
	tooLong := breakLast(func(m map[string]any) { m["secret_hex"] = long })
	return []lossyFault{
		{name: "only key 81-byte secret", apply: tooLong, warn: []string{"core/k1", ".secret_hex: ", "kept"}},
		{name: "only key hmac(md5)", apply: breakLast(func(m map[string]any) { m["algorithm"] = "hmac(md5)" }),
			warn: []string{"core/k1", ".algorithm: ", "kept"}},
		{name: "only key bad base64", apply: breakLast(func(m map[string]any) {
			delete(m, "secret_hex")
			m["secret_b64"] = "not*base64!"
		}), warn: []string{"core/k1", ".secret_b64: ", "kept"}},
		{name: "chain emptied", apply: func(l *testbed, _ []key) { l.writeLossyChains(map[string][]map[string]any{"core": nil}) },
			warn: []string{"core", "kept"}},
		{name: "chain renamed", apply: func(l *testbed, keys []key) {
			l.writeLossyChains(map[string][]map[string]any{"core-renamed": lossyKeyMaps(keys)})
		}, warn: []string{"core", "kept"}},
		{name: "newest key invalid", newest: true, apply: tooLong, warn: []string{"core/k2", ".secret_hex: ", "kept"}},
		{name: "vault only key 81-byte secret", vault: true, apply: func(l *testbed, keys []key) {
			// Written behind aokeyd's back (WriteChain refuses it), as
			// with the vault CLI.
			ks := lossyKeyMaps(keys)
			ks[len(ks)-1]["secret_hex"] = long
			doc := map[string]any{"peers": []string{addrB.String()}, "keys": ks}
			if _, err := l.vwrite.Client().KVv2("secret").Put(context.Background(), "aokeyd/chains/core", doc); err != nil {
				l.t.Fatal(err)
			}
		}, warn: []string{"core/k1", "keys[0].secret_hex: ", "kept"}},
		{name: "vault chain deleted", vault: true, apply: func(l *testbed, _ []key) {
			ctx := context.Background()
			if err := l.vwrite.Client().KVv2("secret").DeleteMetadata(ctx, "aokeyd/chains/core"); err != nil {
				l.t.Fatal(err)
			}
		}, warn: []string{"core", "kept"}},
	}
}

// metricsPage reads aokeyd's metrics.
func (l *testbed) lossyMetrics() (string, error) {
	if l.vault == nil {
		return l.a.Run("wget", "-qO-", l.metricsURL)
	}
	resp, err := http.Get(l.metricsURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestLossyKeySource: while gobgpd and BIRD are up, A's key source is
// read successfully but loses keys (the only key made invalid three ways,
// the chain emptied or renamed, the newest key made invalid; with Vault the
// only key made invalid, and the chain deleted while another remains).
// After a refresh, BIRD's session is restarted and must come back with
// TCP-AO through gobgpd's listener, which still has the key; status and
// the metrics show what is held back. An aokeyd restart with the source
// still bad is refused (aokeyd refuses to start on every problem aoctl
// validate refuses, issue 47 item 5: exit status 1, the problem in its
// log), and BIRD's session must come back all the same: the keys stay on
// the sockets while aokeyd is down.
//
// Faults that start from the same keys and source share one lab, one
// after another: before each fault but the first, the good keys are
// written back and aokeyd is restarted, so every fault starts from an
// aokeyd that has read the good keys (and nothing else) from its source,
// on an established session, as on a lab of its own.
func TestLossyKeySource(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	var mu sync.Mutex
	cases, reconnectOK, stranded := 0, 0, 0
	t.Run("faults", func(t *testing.T) {
		for _, g := range lossyGroups(lossyFaults()) {
			t.Run(g.name, func(t *testing.T) {
				t.Parallel()
				keys := lossyKeys(g.newest)
				l := newLabWith(t, keys, nil, labOptions{vault: g.vault})
				if g.vault { // another chain stays when core is deleted
					other := fmt.Sprintf(`{"peers": ["198.51.100.9"], "keys": [{"name": "o1", "send_id": 50, "recv_id": 51, "algorithm": "hmac(sha256)", "secret_b64": %q}]}`,
						base64.StdEncoding.EncodeToString(secretOf(50)))
					if _, err := l.vwrite.WriteChain(context.Background(), "other", []byte(other), -1); err != nil {
						t.Fatal(err)
					}
				}
				for i, f := range g.faults {
					t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
						defer l.use(t)()
						if i > 0 {
							l.writeKeys(keys)
							l.restartAokeyd()
						}
						ok := runLossy(t, l, keys, f)
						mu.Lock()
						defer mu.Unlock()
						cases++
						if ok {
							reconnectOK++
						} else {
							stranded++
						}
					})
				}
			})
		}
	})
	fmt.Printf("lossy-read: cases=%d reconnect_ok=%d stranded=%d\n", cases, reconnectOK, stranded)
	if stranded > 0 || cases == 0 {
		t.Fatalf("%d of %d lossy reads stranded the session", stranded, cases)
	}
}

// lossyGroup is the faults that share a lab: the same keys and source.
type lossyGroup struct {
	name          string
	newest, vault bool
	faults        []lossyFault
}

func lossyGroups(faults []lossyFault) []lossyGroup {
	var gs []lossyGroup
	for _, f := range faults {
		i := slices.IndexFunc(gs, func(g lossyGroup) bool { return g.newest == f.newest && g.vault == f.vault })
		if i < 0 {
			name := map[bool]string{false: "file", true: "vault"}[f.vault]
			if f.newest {
				name += "_two_keys"
			}
			gs = append(gs, lossyGroup{name: name, newest: f.newest, vault: f.vault})
			i = len(gs) - 1
		}
		gs[i].faults = append(gs[i].faults, f)
	}
	return gs
}

// lossyKeys is A's chain before a fault: k1 alone, or (newest) an older
// k1 and the newest k2, which both ends send with.
func lossyKeys(newest bool) []key {
	if !newest {
		return []key{{i: 1, birdPreferred: true}}
	}
	now := time.Now()
	return []key{{i: 1, sendStart: now.Add(-time.Hour)}, {i: 2, sendStart: now.Add(-time.Minute), birdPreferred: true}}
}

// use makes t the test the testbed's helpers fail (a subtest running on
// a shared testbed) until the returned function restores the previous one.
func (l *testbed) use(t *testing.T) (restore func()) {
	prev := l.t
	l.t = t
	return func() { l.t = prev }
}

// reconnectBIRD restarts BIRD's session (birdc restart) and waits until
// it is back with TCP-AO through gobgpd's listener: an error when it does
// not come back within a minute.
func (l *testbed) reconnectBIRD() error {
	l.t.Helper()
	before, err := l.bird.Protocol()
	if err != nil {
		l.t.Fatal(err)
	}
	if _, err := l.bird.Birdc("restart", "peer_a"); err != nil {
		l.t.Fatalf("birdc restart: %v", err)
	}
	return lab.Within(60*time.Second, "BIRD's restarted session up with TCP-AO", func() (bool, string) {
		st, err := l.bird.Protocol()
		if err != nil {
			return false, err.Error()
		}
		p := l.peerA()
		ok := st.BGPState == "Established" && st.Since != before.Since && st.CurrentKey >= 0 && st.PktGood > 0 && p.Established()
		return ok, fmt.Sprintf("BIRD %s since %s (was %s), current %d, pkt_good %d (%s); gobgpd %s",
			st.BGPState, st.Since, before.Since, st.CurrentKey, st.PktGood, st.LastError, p.State)
	})
}

// runLossy runs one fault on l, whose key source holds keys; false means
// the session was stranded (a reconnect failed or the listener lost a key).
// Other failures fail t.
func runLossy(t *testing.T, l *testbed, keys []key, f lossyFault) bool {
	newest := keys[len(keys)-1]
	l.waitEstablished(60 * time.Second)
	if err := lab.Within(30*time.Second, "A sending with "+newest.name(), func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		return slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == newest.sendID() && k.Current }), "A keys " + lab.KeyList(st.Keys)
	}); err != nil {
		t.Fatalf("setup: A does not send with %s: %v", newest.name(), err)
	}
	want := map[[2]uint8]bool{}
	for _, k := range keys {
		want[[2]uint8{k.sendID(), k.recvID()}] = true
	}
	f.apply(l, keys)
	t.Logf("%s: fault applied to the key source", f.name)

	stranded := false
	// reconnect checks that gobgpd's listener keeps the keys BIRD uses,
	// and that BIRD's restarted session comes back with TCP-AO.
	reconnect := func(when string) {
		t.Helper()
		listenerOK := func() (bool, string) {
			have := map[[2]uint8]bool{}
			for _, k := range l.listenerKeys() {
				have[[2]uint8{k.SendID, k.RecvID}] = true
			}
			for ids := range want {
				if !have[ids] {
					return false, fmt.Sprintf("listener keys %s lack %d/%d", listenerIDs(l.listenerKeys()), ids[0], ids[1])
				}
			}
			return true, ""
		}
		if ok, detail := listenerOK(); !ok {
			t.Errorf("%s: %s", when, detail)
			stranded = true
		}
		if err := l.reconnectBIRD(); err != nil {
			t.Errorf("%s: BIRD's restarted session did not come back with TCP-AO: %v", when, err)
			stranded = true
			return
		}
		st, _ := l.bird.Protocol()
		t.Logf("%s: BIRD reconnected with TCP-AO (current key %d, pkt_good %d)", when, st.CurrentKey, st.PktGood)
		if ok, detail := listenerOK(); !ok {
			t.Errorf("%s, after the reconnect: %s", when, detail)
			stranded = true
		}
	}
	check := func(when string) {
		t.Helper()
		// A refresh (1s) and a pass: the warning shows.
		if err := lab.Within(20*time.Second, "the warning in status", func() (bool, string) {
			rep, err := l.ctl.Status(context.Background(), "")
			if err != nil {
				return false, err.Error()
			}
			ws := slices.Clone(rep.Warnings)
			for _, p := range rep.Peers {
				ws = append(ws, p.Warnings...)
			}
			return slices.ContainsFunc(ws, func(w string) bool {
				for _, x := range f.warn {
					if !strings.Contains(w, x) {
						return false
					}
				}
				return true
			}), fmt.Sprintf("warnings %q, want one with %q", ws, f.warn)
		}); err != nil {
			t.Errorf("%s: aoctl status: %v", when, err)
		}
		if err := lab.Within(20*time.Second, "the keys_held_back series", func() (bool, string) {
			page, err := l.lossyMetrics()
			series := `last_good="true"`
			return err == nil && slices.ContainsFunc(strings.Split(page, "\n"), func(s string) bool {
				return strings.HasPrefix(s, "aokeyd_keys_held_back{") && strings.Contains(s, `chain="core"`) && strings.Contains(s, series)
			}), fmt.Sprintf("no aokeyd_keys_held_back{chain=\"core\",%s} series (%v)", series, err)
		}); err != nil {
			t.Errorf("%s: metrics: %v", when, err)
		}
		time.Sleep(2 * time.Second) // a few more passes
		reconnect(when)
	}
	check("after the lossy read")
	if err := l.restartRefused(); !strings.Contains(err.Error(), "refusing to start") {
		t.Errorf("%s: aokeyd restarted with the key source still bad: %v, want a refused start", f.name, err)
	}
	t.Logf("%s: aokeyd refused to start with the key source still bad", f.name)
	reconnect("while aokeyd is down after a refused start")
	return !stranded && !t.Failed()
}
