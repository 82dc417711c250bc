//go:build linux

package testkit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Needle is a byte string to count in memory. It is given in two parts so
// that the search holds no whole copy of it: a test looking for a secret
// must not add one.
type Needle struct{ Head, Tail []byte }

func (n Needle) len() int { return len(n.Head) + len(n.Tail) }

// Len is the needle's length in bytes.
func (n Needle) Len() int { return n.len() }

// CountInMemory counts the copies of each needle in this process's private
// writable memory, read through /proc/self/mem: the Go heap (live objects
// and freed ones not yet reused or returned to the OS), goroutine and
// thread stacks, and data. It is what a core dump or a same-uid reader of
// /proc/PID/mem would find, not only what is reachable. Linux only.
func CountInMemory(needles ...Needle) ([]int, error) {
	maxLen := 0
	for _, n := range needles {
		if len(n.Head) == 0 {
			return nil, fmt.Errorf("testkit: a needle with an empty head")
		}
		maxLen = max(maxLen, n.len())
	}
	// The scan buffer lives outside the Go heap and is skipped: what it
	// reads is never counted again.
	const chunk = 1 << 20
	buf, err := unix.Mmap(-1, 0, chunk, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("testkit: scan buffer: %w", err)
	}
	defer unix.Munmap(buf)
	self := [2]uint64{addrOf(buf), addrOf(buf) + chunk}
	regions, err := writableRegions()
	if err != nil {
		return nil, err
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	counts := make([]int, len(needles))
	for _, r := range regions {
		if r[0] < self[1] && self[0] < r[1] {
			continue
		}
		for off := r[0]; off < r[1]; {
			n := int(min(uint64(chunk), r[1]-off))
			got, err := mem.ReadAt(buf[:n], int64(off))
			if err != nil || got != n {
				off += uint64(n) // unreadable (guard pages): skip
				continue
			}
			// A copy that straddles two chunks is counted in the first:
			// the next chunk starts maxLen-1 bytes back and counts only
			// copies that start past that overlap.
			last := off+uint64(n) >= r[1]
			step := n
			if !last && n > maxLen {
				step = n - (maxLen - 1)
			}
			for i, nd := range needles {
				counts[i] += countIn(buf[:n], step, nd)
			}
			clear(buf[:n])
			off += uint64(step)
		}
	}
	return counts, nil
}

// countIn counts the copies of nd in b that start before limit.
func countIn(b []byte, limit int, nd Needle) int {
	c := 0
	for i := 0; i < limit; {
		j := bytes.Index(b[i:], nd.Head)
		if j < 0 || i+j >= limit {
			break
		}
		at := i + j
		if bytes.HasPrefix(b[at+len(nd.Head):], nd.Tail) {
			c++
		}
		i = at + 1
	}
	return c
}

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// writableRegions lists the private writable mappings of this process.
func writableRegions() ([][2]uint64, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][2]uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || !strings.HasPrefix(fields[1], "rw") || fields[1][3] != 'p' {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		a, err1 := strconv.ParseUint(lo, 16, 64)
		b, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("testkit: /proc/self/maps: %q", sc.Text())
		}
		out = append(out, [2]uint64{a, b})
	}
	return out, sc.Err()
}

// SecretNeedles reads the test secret whose line in the secrets file
// (keystore/testdata/test-secrets.txt, at path) starts with prefix, and the
// line after it (its base64), as needles; the test then holds no whole
// copy of either, and what it read is wiped.
func SecretNeedles(t testing.TB, path, prefix string) (raw, b64 Needle) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer clear(data)
	lines := bytes.Split(data, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte(prefix)) && i+1 < len(lines) {
			split := func(b []byte) Needle {
				b = bytes.TrimSpace(b)
				return Needle{Head: bytes.Clone(b[:len(b)/2]), Tail: bytes.Clone(b[len(b)/2:])}
			}
			return split(l), split(lines[i+1])
		}
	}
	t.Fatalf("%s has no line starting %q", path, prefix)
	return
}

// Join returns the needle's bytes in one new buffer on the heap, which
// the caller wipes. It is not inlined: inlined, a small buffer that does
// not escape the caller is put on the goroutine's stack, and a stack that
// grows is copied and the old one dropped unwiped, a copy Join's caller
// could not wipe.
//
//go:noinline
func (n Needle) Join() []byte {
	b := make([]byte, n.len())
	copy(b[copy(b, n.Head):], n.Tail)
	return b
}
