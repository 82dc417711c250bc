package rotator

import (
	"log/slog"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// BenchmarkFreshRunStep is one steady step (read in full, plan, nothing
// to do) on a goroutine of its own, as each run of a machine is, on a
// socket read the way the guest's sessions are: in a borrow reached
// through layers of wrappers (the daemon's, bgp's, tcpao's: layeredSock),
// each key fingerprinted with HMAC-SHA256 at the bottom. "grown" starts
// the goroutine as Controller.run does (growRunStack); "starting" leaves
// it on the runtime's starting stack, which the step grows where it is
// deepest.
func BenchmarkFreshRunStep(b *testing.B) {
	for _, bc := range []struct {
		name string
		grow bool
	}{{"grown", true}, {"starting", false}} {
		b.Run(bc.name, func(b *testing.B) {
			keys := []DesiredKey{dk(mkKey(peerA, 1, 1, "fresh-1")), dk(mkKey(peerA, 2, 2, "fresh-2")), dk(mkKey(peerA, 3, 3, "fresh-3"))}
			s := newEstablished(keys[0].Key)
			for _, k := range keys[1:] {
				if err := s.AddKey(k.Key, tcpao.AddOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			d := Desired{Socket: "peer", Kind: Established, Keys: keys, WantCurrent: ID(1), WantRNext: ID(1)}
			m := newMachine(pid("p"), layeredSock{s, 12}, d, testCfg(), nil, nil, slog.New(slog.DiscardHandler), t0)
			m.step(t0)
			if m.st.State != StateSteady {
				b.Fatalf("state %s, want steady", m.st.State)
			}
			done := make(chan struct{})
			b.ReportAllocs()
			for b.Loop() {
				go func() {
					if bc.grow {
						growRunStack()
					}
					m.step(t0)
					done <- struct{}{}
				}()
				<-done
			}
		})
	}
}

// layeredSock reaches its socket through depth nested borrows, and
// fingerprints the keys it reads with HMAC-SHA256 (tcpao.NewSecret), as
// a real kernel's answer is decoded.
type layeredSock struct {
	*testSock
	depth int
}

func (l layeredSock) BatchKeys(f func(tcpao.Socket) error) error {
	if l.depth == 0 {
		return f(l)
	}
	var frame [24]uint64 // a wrapper's frame: its locals and arguments
	frame[l.depth%24] = uint64(l.depth)
	return tcpao.Batch(layeredSock{l.testSock, l.depth - 1}, func(s tcpao.Socket) error {
		if frame[l.depth%24] != uint64(l.depth) {
			panic("frame")
		}
		return f(s)
	})
}

func (l layeredSock) Keys(f tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	ks, err := l.testSock.Keys(f)
	if !f.SkipFingerprint {
		for i := range ks {
			s := tcpao.NewSecret(ks[i].Fingerprint[:])
			ks[i].Fingerprint = s.Fingerprint()
			s.Zero()
		}
	}
	return ks, err
}
