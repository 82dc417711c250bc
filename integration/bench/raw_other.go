//go:build !linux || !(amd64 || arm64 || riscv64 || loong64)

package bench

import (
	"errors"
	"net/netip"
)

type rawStep struct{}

var errRawUnsupported = errors.New("bench: the raw TCP-AO loop needs little-endian 64-bit Linux")

func rawRun(int, []rawStep) (int, error)                            { return 0, errRawUnsupported }
func wipeRaw([]rawStep)                                             {}
func rawAddStep(netip.Prefix, string, uint8, uint8, []byte) rawStep { return rawStep{} }
func rawDelStep(netip.Prefix, uint8, uint8, bool) rawStep           { return rawStep{} }
