//go:build ppc64 || s390x || mips || mips64

package tcpao

// bitPos is the bit that the i-th one-bit C bitfield of a width-bit storage
// unit occupies. GCC allocates bitfields from the most significant bit on
// big-endian targets.
func bitPos(i, width int) uint { return uint(width - 1 - i) }
