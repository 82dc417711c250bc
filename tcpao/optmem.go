package tcpao

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// OptMemPath is the sysctl that caps the socket option memory of one socket
// (net.core.optmem_max).
const OptMemPath = "/proc/sys/net/core/optmem_max"

// sizeofKernelKey is sizeof(struct tcp_ao_key) on 64-bit Linux 6.7..6.12
// (include/net/tcp_ao.h): hlist_node 16, tcp_ao_addr 16, key[80], three
// ints, seven u8 (padded to 136), rcu_head 16, two atomic64_t: 168 bytes.
const sizeofKernelKey = 168

// digestSize is the crypto_ahash digest size the kernel allocates twice per
// key for the cached send and receive traffic keys.
func digestSize(a Algorithm) int {
	switch a {
	case HMACSHA256:
		return 32
	case CMACAES128:
		return 16
	default: // hmac(sha1) and anything unknown: the common case
		return 20
	}
}

// KeyOptMem is the socket option memory one MKT of algorithm a costs:
// tcp_ao_key_alloc() sock_kmalloc()s sizeof(struct tcp_ao_key) plus two
// digests (tcp_ao_sizeof_key). hmac(sha1): 208 bytes, hmac(sha256): 232,
// cmac(aes128): 200. The tcp_ao_info itself is a plain kzalloc and is not
// charged.
func KeyOptMem(a Algorithm) int { return sizeofKernelKey + 2*digestSize(a) }

// OptMemNeeded estimates the socket option memory a socket needs to hold
// nkeys MKTs of algorithm a. A listener holds every key of every peer; an
// accepted socket only the keys that match its peer.
func OptMemNeeded(nkeys int, a Algorithm) int { return nkeys * KeyOptMem(a) }

// OptMemMaxKeys is how many MKTs of algorithm a fit under limit: sock_kmalloc
// succeeds only while the total stays strictly below net.core.optmem_max, so
// under the default 131072 a listener takes 630 hmac(sha1) keys and the 631st
// fails with ENOMEM.
func OptMemMaxKeys(limit int, a Algorithm) int {
	if limit <= 0 {
		return 0
	}
	return (limit - 1) / KeyOptMem(a)
}

// OptMemMax reads net.core.optmem_max.
func OptMemMax() (int, error) {
	b, err := os.ReadFile(OptMemPath)
	if err != nil {
		return 0, fmt.Errorf("tcpao: read optmem_max: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("tcpao: parse %s: %w", OptMemPath, err)
	}
	return n, nil
}
