package frr

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	vaultapi "github.com/hashicorp/vault/api"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/keystore/vaulttest"
)

const labMD5 = "Md5-frr-lab-Password.3"

// fleetAokeyd starts an aokeyd for router name in the guest's root
// namespace (where the Vault server listens), its keys (chain core with
// the TCP-MD5 password and keys, IDs mirrored at B) in Vault under
// aokeyd/NAME, publishing to the fleet document secret/aokeyd/fleet.
func fleetAokeyd(t *testing.T, vc *vaultapi.Client, vaultURL, tokenFile, name, dir string, self, peer netip.Addr, keys []key, mirrored bool,
	speaker, connectguard string) *aokeyd {
	t.Helper()
	chain := map[string]any{"peers": []string{peer.String()}, "keys": mktEntries(keys, mirrored),
		"md5": map[string]string{"secret_b64": base64.StdEncoding.EncodeToString([]byte(labMD5))}}
	if _, err := vc.KVv2("secret").Put(context.Background(), "aokeyd/"+name+"/chains/core", chain); err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf("version: 1\nkey_chains:\n  - name: core\n%speers:\n  - neighbor: %s\n    key_chain: core\n", safetyPolicy, peer)
	cfg := fmt.Sprintf("key_source:\n  type: vault\n  refresh: 1s\n  vault:\n    address: %q\n    prefix: aokeyd/%s\n    auth:\n      method: token\n      token_file: %s\n"+
		"policy:\n  path: policy.yaml\n%scontrol:\n  socket: control.sock\nmetrics:\n  listen: \"off\"\nlog:\n  format: json\n  level: debug\n"+
		"fleet:\n  vault_path: secret/aokeyd/fleet\n  router_id: %s\n  addresses: [%q]\n", vaultURL, name, tokenFile, speaker, name, self.String())
	for n, data := range map[string]string{"policy.yaml": policy, "aokeyd.yaml": cfg} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return launchAokeyd(t, nil, dir, peer, connectguard)
}

// TestFRRGobgpdMigrate (issue 34): FRR (active, under aokeyd exec, with
// its aokeyd) and gobgpd (passive, with its own aokeyd) run TCP-MD5 with
// the password from each end's key source in Vault (neither speaker's
// config has one: FRR's connects carry it through the connect guard,
// gobgpd's listener through its aokeyd), then move to TCP-AO,
// coordinated through the fleet document: `aoctl migrate` at gobgpd's end
// only; FRR's aokeyd reads it from gobgpd's document and migrates with
// the same switch time, at which it resets the session once and FRR
// reconnects with TCP-AO. One re-establishment on
// each end, both migrations done, no MD5 key left on gobgpd's listener,
// the session on TCP-AO with verified segments, and no unsigned or
// wrongly signed SYN from FRR's address taken by gobgpd. It prints
// "migrate: far=aokeyd sessions=1 reconnects=R md5_left=0 ao_good=1
// unsigned_accepted=0".
func TestFRRGobgpdMigrate(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	lab.RequireNetns(t)
	na, nb := lab.Pair(t, netip.PrefixFrom(addrA, 30), netip.PrefixFrom(addrB, 30))
	dirA, dirB := t.TempDir(), t.TempDir()
	k1 := key{i: 1}
	v, err := vaulttest.New(vaulttest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	vcfg := vaultapi.DefaultConfig()
	vcfg.Address = v.URL()
	vc, err := vaultapi.NewClient(vcfg)
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(v.RootToken())
	tokenFile := filepath.Join(t.TempDir(), "vault-token")
	if err := os.WriteFile(tokenFile, []byte(v.RootToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	g := lab.StartGobgpd(t, nb, "gobgpd", lab.GobgpdConfig{
		AS: asB, RouterID: addrB, LocalAddrs: []netip.Addr{addrB},
		Neighbors: []lab.Neighbor{{Addr: addrA, AS: asA, Passive: true}},
		HoldTime:  3, Keepalive: 1,
	}, lab.GobgpdOptions{Dir: dirB})
	ab := fleetAokeyd(t, vc, v.URL(), tokenFile, "rb", dirB, addrB, addrA, []key{k1}, true, speakerGoBGP(g.API, g.PIDFile), "")
	cg := filepath.Join(dirA, "cg.sock")
	r := Start(t, na, dirA, frrConfig(false), wrapOptions(t, cg, dirA))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bgpd logs:\n%s", r.LogTail())
		}
	})
	aa := fleetAokeyd(t, vc, v.URL(), tokenFile, "ra", dirA, addrA, addrB, []key{k1}, false, speakerFRR(r), cg)
	r.WaitReady()

	lisMD5 := func() int { return len(lab.ListenerMD5(t, g.PID, 179)) }
	lab.Eventually(t, 90*time.Second, "FRR ↔ gobgpd established on TCP-MD5", func() (bool, string) {
		pa, erra := r.Peer(addrB)
		pb, errb := gobgpPeer(g, addrA)
		sa, _ := aa.status()
		sb, _ := ab.status()
		ok := erra == nil && errb == nil && pa.Established() && pb.Established() && sa.Auth == control.AuthMD5 && sb.Auth == control.AuthMD5
		return ok, fmt.Sprintf("FRR %s gobgpd %s (%v %v), auth A %q B %q", pa.State, pb.State, erra, errb, sa.Auth, sb.Auth)
	})
	if n := lisMD5(); n != 1 {
		t.Fatalf("gobgpd's listener holds %d TCP-MD5 keys, want aokeyd's one", n)
	}

	// The watch: each end's establishments, and SYN probes from FRR's
	// address to gobgpd.
	var mu sync.Mutex
	upsA, upsB := map[string]bool{}, map[string]bool{}
	prober := (&lab.Prober{NS: na, Pair: func(int) (netip.Addr, netip.Addr) { return addrA, addrB }, Tick: func() {
		pa, erra := r.Peer(addrB)
		pb, errb := gobgpPeer(g, addrA)
		mu.Lock()
		defer mu.Unlock()
		if erra == nil && pa.Established() {
			upsA[pa.Uptime.String()] = true
		}
		if errb == nil && pb.Established() {
			upsB[pb.Uptime.String()] = true
		}
	}}).Start()

	// One operator action, at gobgpd's end; FRR's end follows through
	// the fleet document and both switch at the same time.
	at := time.Now().Add(15 * time.Second)
	out, err := exec.Command(lab.MustBin(t, "aoctl"), "--socket", ab.ctl.Socket(), "migrate", ab.peer.String(),
		"--at", at.UTC().Format(time.RFC3339Nano), "--bound", "2m").CombinedOutput()
	if err != nil {
		t.Fatalf("aoctl migrate at gobgpd's end: %v\n%s", err, out)
	}
	t.Logf("aoctl migrate %s (gobgpd's end):\n%s", ab.peer, out)
	lab.Eventually(t, 12*time.Second, "FRR's end follows the migration from the fleet document", func() (bool, string) {
		sa, err := aa.status()
		if err != nil || sa.Migration == nil {
			return false, fmt.Sprint(err)
		}
		return sa.Migration.At.Equal(at.Truncate(0)) || sa.Migration.At.Sub(at).Abs() < time.Millisecond, fmt.Sprintf("A migration %+v", sa.Migration)
	})
	lab.Eventually(t, 150*time.Second, "both migrations done, the session on TCP-AO", func() (bool, string) {
		sa, erra := aa.status()
		sb, errb := ab.status()
		step := func(s control.PeerStatus) string {
			if s.Migration == nil {
				return ""
			}
			return s.Migration.Step
		}
		pa, _ := r.Peer(addrB)
		n := lisMD5()
		ok := erra == nil && errb == nil && step(sa) == "done" && step(sb) == "done" && n == 0 && pa.Established() &&
			hasSending(sa, k1.sendID()) && hasSending(sb, k1.recvID())
		return ok, fmt.Sprintf("A %q (%v), B %q (%v), gobgpd listener MD5 keys %d, FRR %s", step(sa), erra, step(sb), errb, n, pa.State)
	})
	time.Sleep(3 * time.Second)
	probes, taken := prober.Stop()
	sa, sb := aa.mustStatus(t), ab.mustStatus(t)
	mu.Lock()
	defer mu.Unlock()
	reA, reB := len(upsA)-1, len(upsB)-1
	if reA != 1 || reB != 1 || taken != 0 || probes < 100 || sa.Auth != control.AuthAO || sb.Auth != control.AuthAO {
		t.Fatalf("re-establishments FRR %d gobgpd %d (want 1 each); probes taken %d of %d; auth A %q B %q", reA, reB, taken, probes, sa.Auth, sb.Auth)
	}
	t.Logf("FRR %s ↔ gobgpd migrated: pkt_good A %d B %d; %d SYN probes from FRR's address, none taken", Version(), sa.Counters.PktGood, sb.Counters.PktGood, probes)
	fmt.Printf("migrate: far=aokeyd sessions=1 reconnects=%d md5_left=%d ao_good=1 unsigned_accepted=%d\n", max(reA, reB), lisMD5(), taken)
}
