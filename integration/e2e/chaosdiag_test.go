package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/tcpao"
)

// dumpLink is what a stranded link's two ends hold, for the failure
// report: each aokeyd end's listener and sockets towards the peer (key
// IDs, a fingerprint prefix, Current/RNext, counters; never a key byte)
// and aokeyd's status of the peer.
func (f *chaosFleet) dumpLink(n int) string {
	l := f.link(n)
	var b strings.Builder
	for _, pair := range [][2]string{{l.a, l.b}, {l.b, l.a}} {
		r, far := f.rs[pair[0]], f.rs[pair[1]]
		if r.kind == birdNative || r.kind == birdPlain {
			// BIRD's own view: the protocol's state and last error (a
			// protocol BIRD disabled stays down) and its log's tail.
			r.mu.Lock()
			br := r.br
			r.mu.Unlock()
			if br != nil {
				out, err := br.Birdc("show", "protocols", "all", "peer_a")
				fmt.Fprintf(&b, "  %s BIRD: show protocols all peer_a (%v):\n%s\n  %s bird.log (tail):\n%s\n",
					r.name, err, indent(out), r.name, indent(lab.Tail(filepath.Join(br.Dir, "bird.log"), 3000)))
			}
		}
		if !r.managed() {
			continue
		}
		p := far.addrs[slices.Index(far.links, n)]
		pid := r.speakerPID()
		fmt.Fprintf(&b, "  %s (speaker pid %d), peer %s:\n", r.name, pid, p)
		show := func(what string, refs []sockets.Ref) {
			for _, ref := range refs {
				_ = sockets.System{}.With(ref, func(fd int) error {
					ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{})
					var parts []string
					for _, k := range ks {
						if !k.Peer.Contains(p) {
							continue
						}
						parts = append(parts, fmt.Sprintf("%s=%d/%d@%s fp%s cur=%v rnext=%v good=%d bad=%d", f.keyName(r, k.SendID, k.RecvID),
							k.SendID, k.RecvID, k.Peer, hex.EncodeToString(k.Fingerprint[:3]), k.IsCurrent, k.IsRNext, k.PktGood, k.PktBad))
					}
					fmt.Fprintf(&b, "    %s %s <-> %s: %s %v\n", what, ref.Local, ref.Remote, strings.Join(parts, "; "), err)
					return nil
				})
			}
		}
		if pid != 0 {
			lis, _ := sockets.System{}.Listeners(pid, 179)
			show("listener", lis)
			conns, _ := sockets.System{}.Connections(pid, p)
			show("socket", conns)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := r.ctl.Status(ctx, p.String())
		cancel()
		js, _ := json.Marshal(st.Peers)
		fmt.Fprintf(&b, "    status: %s %v\n", js, err)
	}
	return b.String()
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}
