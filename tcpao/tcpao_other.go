//go:build !linux

package tcpao

import "syscall"

// New returns a Socket whose every call fails with ErrUnsupported: TCP-AO
// exists only on Linux, and nothing is installed elsewhere.
func New(rc syscall.RawConn) Socket { return unsupported{} }

// FromFD returns a Socket whose every call fails with ErrUnsupported.
func FromFD(fd int) Socket { return unsupported{} }

type unsupported struct{}

func (unsupported) AddKey(Key, AddOptions) error      { return ErrUnsupported }
func (unsupported) DelKey(DelKey) error               { return ErrUnsupported }
func (unsupported) Info() (Info, error)               { return Info{}, ErrUnsupported }
func (unsupported) SetInfo(InfoChange) error          { return ErrUnsupported }
func (unsupported) Keys(KeyFilter) ([]KeyInfo, error) { return nil, ErrUnsupported }

// Probe fails closed with ErrUnsupported: TCP-AO exists only on Linux.
func Probe() error { return ErrUnsupported }

// RaiseOptMemIn fails with ErrUnsupported: TCP-AO exists only on Linux.
func RaiseOptMemIn(pid, want int) (before, after int, err error) { return 0, 0, ErrUnsupported }

// ProbeAlgorithms answers ErrUnsupported for every algorithm: TCP-AO
// exists only on Linux.
func ProbeAlgorithms() map[Algorithm]error {
	out := map[Algorithm]error{}
	for _, a := range Algorithms {
		out[a] = ErrUnsupported
	}
	return out
}

// KernelRelease names the running kernel: not Linux, so no TCP-AO.
func KernelRelease() string { return "not Linux" }

// UnameRelease is "": not Linux, so KernelDefects cannot place it
// (ErrKernelRelease) and a caller applies AllMitigations.
func UnameRelease() string { return "" }

func (unsupported) AddMD5(MD5Key) error { return ErrUnsupported }
func (unsupported) DelMD5(MD5Ref) error { return ErrUnsupported }
