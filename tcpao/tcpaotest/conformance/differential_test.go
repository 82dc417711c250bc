package conformance

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// skewStack is a MemStack whose sockets answer EINVAL where the model says
// EEXIST: a stand-in for a model that disagrees with the kernel.
type skewStack struct{ *MemStack }

type skewSock struct{ tcpao.Socket }

func (s skewSock) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	err := s.Socket.AddKey(k, o)
	if errors.Is(err, eEXIST) {
		return eINVAL
	}
	return err
}

func (s skewSock) AddMD5(k tcpao.MD5Key) error { return tcpao.AddMD5(s.Socket, k) }

func (s skewSock) DelMD5(r tcpao.MD5Ref) error { return tcpao.DelMD5(s.Socket, r) }

func unskew(s tcpao.Socket) tcpao.Socket {
	if x, ok := s.(skewSock); ok {
		return x.Socket
	}
	return s
}

func (s skewStack) Socket(local netip.Addr) (tcpao.Socket, error) {
	so, err := s.MemStack.Socket(local)
	return skewSock{so}, err
}
func (s skewStack) Listen(so tcpao.Socket) error { return s.MemStack.Listen(unskew(so)) }
func (s skewStack) Connect(c, l tcpao.Socket) (tcpao.Socket, error) {
	a, err := s.MemStack.Connect(unskew(c), unskew(l))
	if err != nil {
		return nil, err
	}
	return skewSock{a}, nil
}
func (s skewStack) Exchange(a, b tcpao.Socket, n int) error {
	return s.MemStack.Exchange(unskew(a), unskew(b), n)
}
func (s skewStack) CloseSocket(so tcpao.Socket) error { return s.MemStack.CloseSocket(unskew(so)) }

func TestDifferentialFindsDivergence(t *testing.T) {
	for _, tc := range []struct {
		name string
		real func() Stack
		want bool
	}{
		{"same model", func() Stack { return NewMemStack(tcpaotest.WithVRF(7)) }, false},
		{"EINVAL for EEXIST", func() Stack { return skewStack{NewMemStack(tcpaotest.WithVRF(7))} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Differential{VRF: 7, New: func() (Stack, Stack, error) {
				return NewMemStack(tcpaotest.WithVRF(7)), tc.real(), nil
			}}
			var found *Divergence
			ops := 0
			for i := 0; i < 200 && found == nil; i++ {
				o, div, err := d.Sequence(42, i)
				if err != nil {
					t.Fatal(err)
				}
				ops, found = ops+o, div
				// The same seed and index replay the same sequence.
				if o2, div2, _ := d.Sequence(42, i); o2 != o || (div == nil) != (div2 == nil) {
					t.Fatalf("sequence %d does not replay: %d/%v ops then %d/%v", i, o, div, o2, div2)
				}
			}
			if (found != nil) != tc.want {
				t.Fatalf("divergence %v, want one: %v", found, tc.want)
			}
			if found == nil {
				t.Logf("%d ops, none diverged", ops)
				return
			}
			msg := found.Error()
			last := found.Steps[len(found.Steps)-1]
			if !strings.Contains(msg, "seed=42 ") || !strings.Contains(last, "AddKey") ||
				!strings.Contains(found.Model, "EEXIST") || !strings.Contains(found.Real, "EINVAL") {
				t.Fatalf("divergence report lacks the seed, step or errnos:\n%s", msg)
			}
		})
	}
}
