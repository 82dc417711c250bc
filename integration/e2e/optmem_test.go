package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestRaiseOptMem: with kernel.raise_optmem, aokeyd raises
// net.core.optmem_max in gobgpd's network namespace (A), which an operator
// left too low, to what the listener's keys need with headroom, logs it,
// and the session comes up. Once with aokeyd in A itself (a direct write)
// and once from the guest's root namespace (the Vault lab: setns into A).
func TestRaiseOptMem(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel() // its labs are its own namespaces, like every other scenario's
	for _, tc := range []struct {
		name  string
		vault bool
	}{
		{"aokeyd in the speaker's namespace", false},
		{"aokeyd in another namespace", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k1 := key{i: 1, birdPreferred: true}
			l := newLabWith(t, []key{k1}, nil, labOptions{vault: tc.vault})
			l.waitEstablished(60 * time.Second)
			const low = 4096
			l.a.MustRun(t, "sysctl", "-q", "-w", "net.core.optmem_max="+strconv.Itoa(low))
			own, err := tcpao.OptMemMax()
			if err != nil {
				t.Fatal(err)
			}

			cfgPath := filepath.Join(l.dir, "aokeyd.yaml")
			cfg, err := os.ReadFile(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			cfg = append(cfg, "kernel:\n  raise_optmem: true\n"...)
			if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
				t.Fatal(err)
			}
			l.restartAokeyd()

			var got int
			lab.Eventually(t, 30*time.Second, "optmem_max raised in A", func() (bool, string) {
				out, _ := l.a.Run("cat", tcpao.OptMemPath)
				got, _ = strconv.Atoi(strings.TrimSpace(out))
				return got > 64<<10, "optmem_max in A: " + strings.TrimSpace(out)
			})
			logs, _ := os.ReadFile(filepath.Join(l.dir, "aokeyd.log"))
			if !strings.Contains(string(logs), `"msg":"raised net.core.optmem_max in the speaker's network namespace"`) ||
				!strings.Contains(string(logs), `"from":4096,"to":`+strconv.Itoa(got)) {
				t.Errorf("no log line for the raise from %d to %d in aokeyd.log", low, got)
			}
			if tc.vault {
				if now, _ := tcpao.OptMemMax(); now != own {
					t.Errorf("aokeyd's own namespace changed from %d to %d", own, now)
				}
			}
			_, _ = l.bird.Birdc("restart", "peer_a")
			l.waitEstablished(60 * time.Second)
			t.Logf("net.core.optmem_max in gobgpd's namespace: %d -> %d", low, got)
		})
	}
}
