//go:build linux

package tcpao

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AddMD5 issues setsockopt(TCP_MD5SIG_EXT); see MD5Socket. The copy of the
// password is zeroed.
func (s *sock) AddMD5(k MD5Key) error {
	return s.BatchKeys(func(b Socket) error { return b.(*bound).AddMD5(k) })
}

// DelMD5 issues setsockopt(TCP_MD5SIG_EXT) with a zero key length.
func (s *sock) DelMD5(r MD5Ref) error {
	return s.BatchKeys(func(b Socket) error { return b.(*bound).DelMD5(r) })
}

func (b *bound) AddMD5(k MD5Key) error {
	if err := k.Validate(); err != nil {
		return fmt.Errorf("tcpao: add %s: %w", k.MD5Ref, err)
	}
	if err := b.md5(k.MD5Ref, k.Secret.Bytes()); err != nil {
		return fmt.Errorf("tcpao: add %s: %w", k.MD5Ref, err)
	}
	return nil
}

func (b *bound) DelMD5(r MD5Ref) error {
	if err := b.md5(r, nil); err != nil {
		return fmt.Errorf("tcpao: delete %s: %w", r, err)
	}
	return nil
}

func (b *bound) md5(r MD5Ref, key []byte) error {
	if b.fd < 0 {
		return errUnbound
	}
	fam, err := b.s.family(b.fd)
	if err != nil {
		return err
	}
	var c md5Sig
	err = encodeMD5(&c, r, key, fam)
	if err == nil {
		err = setsockopt(b.fd, optMD5SigExt, unsafe.Pointer(&c), unsafe.Sizeof(c))
	}
	clear(c.Key[:])
	runtime.KeepAlive(&c)
	if errno, ok := err.(unix.Errno); ok {
		return classifyMPTCP(b.fd, os.NewSyscallError("setsockopt(TCP_MD5SIG_EXT)", errno))
	}
	return err
}
