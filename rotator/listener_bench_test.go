package rotator

import (
	"fmt"
	"net/netip"
	"syscall"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// listKernel is a listener kernel with O(1) operations and the real
// kernel's listing order (newest first), so that a benchmark on it measures
// SyncListener's own user-space work (Observe, plan, batches, optmem check,
// Apply) and not a model's list walks. It checks exact-match deletes and
// duplicate adds, nothing else.
type listKernel struct {
	keys  []tcpao.KeyInfo // oldest first; a deleted key has an invalid Peer
	index map[tcpao.KeyRef]int
	live  int
}

func newListKernel(n int) *listKernel {
	return &listKernel{index: make(map[tcpao.KeyRef]int, 2*n)}
}

func (l *listKernel) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	if _, dup := l.index[k.KeyRef]; dup {
		return syscall.EEXIST
	}
	l.index[k.KeyRef] = len(l.keys)
	l.keys = append(l.keys, tcpao.KeyInfo{KeyRef: k.KeyRef, Algorithm: k.Algorithm, MACLen: tcpao.DefaultMACLen,
		Fingerprint: k.Secret.Fingerprint()})
	l.live++
	return nil
}

func (l *listKernel) DelKey(d tcpao.DelKey) error {
	i, ok := l.index[d.KeyRef]
	if !ok {
		return syscall.ENOENT
	}
	if !d.Async {
		return syscall.EINVAL
	}
	delete(l.index, d.KeyRef)
	l.keys[i].Peer = netip.Prefix{}
	l.live--
	return nil
}

func (l *listKernel) Info() (tcpao.Info, error) {
	if len(l.keys) == 0 {
		return tcpao.Info{}, syscall.ENOENT
	}
	return tcpao.Info{}, nil
}

func (l *listKernel) SetInfo(tcpao.InfoChange) error { return nil }

func (l *listKernel) Keys(tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	out := make([]tcpao.KeyInfo, 0, l.live)
	live := l.keys[:0]
	for i := len(l.keys) - 1; i >= 0; i-- {
		if l.keys[i].Peer.IsValid() {
			out = append(out, l.keys[i])
		}
	}
	// Compact: the listing is newest first, the store oldest first.
	for i := len(out) - 1; i >= 0; i-- {
		live = append(live, out[i])
	}
	l.keys = live
	clear(l.index)
	for i := range l.keys {
		l.index[l.keys[i].KeyRef] = i
	}
	return out, nil
}

// listenerKeys is n peers with one key each, IDs id/id.
func listenerKeys(n int, id uint8) Desired {
	d := Desired{Socket: "bench", Kind: Listening, Keys: make([]DesiredKey, n)}
	for i := range d.Keys {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		b := make([]byte, 20)
		copy(b, fmt.Sprintf("k%d-%d", i, id))
		d.Keys[i] = DesiredKey{Key: tcpao.Key{KeyRef: tcpao.KeyRef{Peer: p, SendID: id, RecvID: id},
			Algorithm: tcpao.HMACSHA1, Secret: tcpao.NewSecret(b)}}
	}
	return d
}

func benchOpts() ListenerOptions {
	return ListenerOptions{OptMemMax: func() (int, error) { return 1 << 30, nil }}
}

// BenchmarkSyncListener installs N peers' keys on an empty listener
// (install) and rotates all of them to new IDs (rotate: IDs 1 to 2 and back,
// one full rotation per iteration), on the in-memory kernel of tcpaotest
// (mem, whose list walks model the kernel's) and on listKernel (user, O(1)
// operations: SyncListener's own work).
func BenchmarkSyncListener(b *testing.B) {
	kernels := []struct {
		name string
		max  int // the in-memory kernel walks its list: quadratic
		new  func(b *testing.B, n int) tcpao.Socket
	}{
		{"mem", 1024, func(b *testing.B, n int) tcpao.Socket {
			s, err := tcpaotest.NewNet(tcpaotest.WithOptMemMax(1 << 30)).Socket(netip.MustParseAddr("127.0.0.1"))
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Listen(); err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"user", 16384, func(b *testing.B, n int) tcpao.Socket { return newListKernel(n) }},
	}
	for _, k := range kernels {
		for _, n := range []int{1024, 16384} {
			if n > k.max {
				continue
			}
			d1, d2 := listenerKeys(n, 1), listenerKeys(n, 2)
			b.Run(fmt.Sprintf("install/%s/%d", k.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					s := k.new(b, n)
					b.StartTimer()
					if _, err := SyncListener(s, d1, benchOpts()); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("rotate/%s/%d", k.name, n), func(b *testing.B) {
				s := k.new(b, n)
				if _, err := SyncListener(s, d1, benchOpts()); err != nil {
					b.Fatal(err)
				}
				ds := [2]Desired{d2, d1}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					sp, err := SyncListener(s, ds[i%2], benchOpts())
					if err != nil {
						b.Fatal(err)
					}
					if len(sp.Ops) != 2*n {
						b.Fatalf("rotation of %d peers ran %d ops", n, len(sp.Ops))
					}
					i++
				}
			})
		}
	}
}
