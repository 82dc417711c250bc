package lab

import (
	"cmp"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/frr"
	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

// NativeBird is an aokeyd driving a BIRD natively (speaker type bird):
// its directory (keys.yaml, the caller's to write, chain "core"), the
// directory of BIRD's include files, and its control client.
type NativeBird struct {
	Dir, KeysDir string
	Ctl          *control.Client
}

// StartNativeBird starts, in ns, an aokeyd that keys BIRD's neighbors
// (each bound to chain "core") through include files; BIRD's control
// socket and pid file are birdDir's bird.ctl and bird.pid. dir must hold
// keys.yaml already; birdBin is the bird executable for `bird -p` ("":
// bird). It returns once the first neighbor's file exists, so
// that BIRD can start.
func StartNativeBird(t *testing.T, ns *netns.NS, dir, birdDir, birdBin string, neighbors []string) *NativeBird {
	t.Helper()
	b := &NativeBird{Dir: dir, KeysDir: filepath.Join(dir, "bird-keys")}
	var peers strings.Builder
	for _, n := range neighbors {
		fmt.Fprintf(&peers, "  - neighbor: %s\n    key_chain: core\n", n)
	}
	policy := "version: 1\nkey_chains:\n  - name: core\npeers:\n" + peers.String()
	conf := fmt.Sprintf(`key_source:
  type: file
  refresh: 1s
  file:
    path: keys.yaml
policy:
  path: policy.yaml
speaker:
  type: bird
  bird:
    control_socket: %s
    keys_dir: %s
    pid_file: %s
    binary: %s
    poll_interval: 250ms
control:
  socket: control.sock
metrics:
  listen: "off"
log:
  format: json
  level: debug
`, filepath.Join(birdDir, "bird.ctl"), b.KeysDir, filepath.Join(birdDir, "bird.pid"), cmp.Or(birdBin, "bird"))
	for n, data := range map[string]string{"policy.yaml": policy, "aokeyd.yaml": conf} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			Dump(t, "the native BIRD driver's aokeyd.log (tail)", Tail(filepath.Join(dir, "aokeyd.log"), 30000))
		}
	})
	b.Ctl = control.NewClient(filepath.Join(dir, "control.sock"), 30*time.Second)
	StartAokeyd(t, ns, filepath.Join(dir, "aokeyd.log"), b.Ctl,
		"-config", filepath.Join(dir, "aokeyd.yaml"), "-state-dir", filepath.Join(dir, "state"))
	Eventually(t, ProcessStart, "aokeyd writes BIRD's key file", func() (bool, string) {
		_, err := os.Stat(b.File(neighbors[0]))
		return err == nil, fmt.Sprint(err)
	})
	return b
}

// File is neighbor's include file.
func (b *NativeBird) File(neighbor string) string {
	return filepath.Join(b.KeysDir, birdnative.FileName(netip.MustParseAddr(neighbor), ""))
}

// BirdKeys reads, from the kernel, the IDs ("send/recv") BIRD's listening
// sockets and its sessions with peer hold for peer (BIRD found by
// pidFile).
func BirdKeys(t testing.TB, pidFile string, peer netip.Addr) (listener, session []string) {
	t.Helper()
	pid, err := frr.FindPID(pidFile, "")
	if err != nil {
		t.Fatal(err)
	}
	read := func(refs []sockets.Ref) []string {
		var out []string
		for _, r := range refs {
			_ = sockets.System{}.With(r, func(fd int) error {
				ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
				for _, k := range ks {
					if k.Peer.Contains(peer) {
						out = append(out, fmt.Sprintf("%d/%d", k.SendID, k.RecvID))
					}
				}
				return err
			})
		}
		slices.Sort(out)
		return out
	}
	lis, _ := sockets.System{}.Listeners(pid, 179)
	conns, _ := sockets.System{}.Connections(pid, peer)
	return read(lis), read(conns)
}
