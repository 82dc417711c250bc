//go:build !(ppc64 || s390x || mips || mips64)

package tcpao

// bitPos is the bit that the i-th one-bit C bitfield of a width-bit storage
// unit occupies. GCC allocates bitfields from the least significant bit on
// little-endian targets.
func bitPos(i, width int) uint { _ = width; return uint(i) }
