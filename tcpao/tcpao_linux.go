//go:build linux

package tcpao

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// New returns the TCP-AO control surface of the socket behind rc (from
// (*net.TCPConn).SyscallConn, (*net.TCPListener).SyscallConn or a
// net.Dialer/ListenConfig Control hook). Every call runs inside rc.Control.
func New(rc syscall.RawConn) Socket { return &sock{ctl: rc.Control} }

// FromFD returns the TCP-AO control surface of a raw socket descriptor, e.g.
// one duplicated from a BGP daemon with pidfd_getfd(2). The caller keeps
// ownership of fd and must keep it open while the Socket is used.
func FromFD(fd int) Socket {
	return &sock{ctl: func(f func(uintptr)) error { f(uintptr(fd)); return nil }}
}

type sock struct {
	ctl func(func(fd uintptr)) error
	// fam caches the socket's family (0: not read yet): a socket never
	// changes family, and AddKey/DelKey need it on every call, which cost
	// one getsockopt(SO_DOMAIN) per key before.
	fam atomic.Int32
	// lastKeys is how many keys the last unfiltered GET_KEYS matched: the
	// next one starts with a buffer that size (plus room to grow) instead
	// of 8, which on a listener of thousands of keys cost a second
	// getsockopt walking the whole key list again.
	lastKeys atomic.Int32
	// spare is a bound Socket kept for the next BatchKeys (nil while one
	// is in use), so that single AddKey/DelKey calls do not allocate one.
	spare atomic.Pointer[bound]
}

// do runs f on the descriptor and returns f's error, or the Control error.
func (s *sock) do(f func(fd int) error) error {
	var err error
	if cerr := s.ctl(func(fd uintptr) { err = f(int(fd)) }); cerr != nil {
		return fmt.Errorf("tcpao: raw conn control: %w", cerr)
	}
	return err
}

func setsockopt(fd, opt int, p unsafe.Pointer, size uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, uintptr(opt), uintptr(p), size, 0)
	if e != 0 {
		return e
	}
	return nil
}

func getsockopt(fd, opt int, p unsafe.Pointer, size *uint32) error {
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(size)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// family is the socket's address family, read once (see fam).
func (s *sock) family(fd int) (int, error) {
	if f := s.fam.Load(); f != 0 {
		return int(f), nil
	}
	f, err := family(fd)
	if err == nil {
		s.fam.Store(int32(f))
	}
	return f, err
}

// family is the socket's address family (SO_DOMAIN): the kernel parses the
// peer address of ADD/DEL as a sockaddr of that family.
func family(fd int) (int, error) {
	d, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return 0, os.NewSyscallError("getsockopt(SO_DOMAIN)", err)
	}
	if d != unix.AF_INET && d != unix.AF_INET6 {
		return 0, fmt.Errorf("%w: socket family %d is not IPv4 or IPv6", ErrAddress, d)
	}
	return d, nil
}

// AddKey issues setsockopt(TCP_AO_ADD_KEY). Errors (errors.Is):
//   - EEXIST: a key for an overlapping peer has the same SendID or RecvID;
//   - EISCONN: the first key on a socket that is neither closed nor listening;
//   - EINVAL: set_current/set_rnext on a listening socket, an ifindex that is
//     not a VRF, a prefix with host bits, a peer that contradicts the
//     connected address;
//   - EMSGSIZE: MACLen does not fit in the SYN's option space (> 16);
//   - ENOMEM: net.core.optmem_max is exhausted (see OptMemNeeded);
//   - ENOENT: the kernel has no such algorithm;
//   - EKEYREJECTED: a TCP-MD5 key exists for the peer;
//   - ErrMPTCP (wrapping ENOPROTOOPT): a Multipath TCP socket.
//
// Client-side validation errors (ErrAlgorithm, ErrKeyLength, ErrAddress) are
// returned before any system call. The copy of the key bytes is zeroed.
func (s *sock) AddKey(k Key, o AddOptions) error {
	return s.BatchKeys(func(b Socket) error { return b.AddKey(k, o) })
}

// DelKey issues setsockopt(TCP_AO_DEL_KEY). Errors (errors.Is):
//   - ENOENT: no key matches exactly (peer, prefix, ifindex, SendID, RecvID),
//     the socket has no TCP-AO, or the named replacement Current/RNext does
//     not exist;
//   - EBUSY: the key is Current_key or RNext_key and no replacement was named
//     (replacements that were named are installed even then);
//   - EINVAL: Async on a socket that is not listening, or SetCurrent/SetRNext
//     on a listening socket;
//   - EISCONN: an established socket without TCP-AO;
//   - ErrMPTCP (wrapping ENOPROTOOPT): a Multipath TCP socket.
func (s *sock) DelKey(d DelKey) error {
	return s.BatchKeys(func(b Socket) error { return b.DelKey(d) })
}

// BatchKeys calls f with a Socket bound to the descriptor for the duration
// of one RawConn.Control: every AddKey and DelKey f makes is a bare
// setsockopt on the borrowed descriptor with a request buffer reused from
// call to call (no closure, no allocation, no descriptor reference count per
// key), which is what a hand-written setsockopt loop does. The bound Socket
// must not be used after f returns (its calls then fail). BatchKeys returns
// f's error, or the Control error. The key bytes of the last request are
// zeroed when it returns.
func (s *sock) BatchKeys(f func(Socket) error) error {
	b := s.spare.Swap(nil)
	if b == nil {
		b = &bound{s: s}
	}
	var err error
	cerr := s.ctl(func(fd uintptr) {
		b.fd = int(fd)
		err = f(b)
	})
	b.fd = -1
	clear(b.add.Key[:])
	s.spare.Store(b)
	if cerr != nil {
		return fmt.Errorf("tcpao: raw conn control: %w", cerr)
	}
	return err
}

// errUnbound is returned by a Socket from BatchKeys used after its batch.
var errUnbound = errors.New("tcpao: socket used after its BatchKeys call returned")

// bound is the Socket BatchKeys hands out: the descriptor it borrowed and
// the request buffers, reused from call to call.
type bound struct {
	s   *sock
	fd  int // -1 outside a batch
	add aoAdd
	del aoDel
}

func (b *bound) AddKey(k Key, o AddOptions) error {
	if err := b.addKey(k, o); err != nil {
		return fmt.Errorf("tcpao: add key send=%d recv=%d peer=%s: %w", k.SendID, k.RecvID, k.Peer, err)
	}
	return nil
}

func (b *bound) addKey(k Key, o AddOptions) error {
	if b.fd < 0 {
		return errUnbound
	}
	fam, err := b.s.family(b.fd)
	if err != nil {
		return err
	}
	err = encodeAdd(&b.add, k, o, fam)
	if err == nil {
		err = setsockopt(b.fd, optAddKey, unsafe.Pointer(&b.add), unsafe.Sizeof(b.add))
	}
	clear(b.add.Key[:])
	runtime.KeepAlive(b)
	if errno, ok := err.(unix.Errno); ok {
		return classifyMPTCP(b.fd, os.NewSyscallError("setsockopt(TCP_AO_ADD_KEY)", errno))
	}
	return err
}

func (b *bound) DelKey(d DelKey) error {
	if err := b.delKey(d); err != nil {
		return fmt.Errorf("tcpao: delete key send=%d recv=%d peer=%s: %w", d.SendID, d.RecvID, d.Peer, err)
	}
	return nil
}

func (b *bound) delKey(d DelKey) error {
	if b.fd < 0 {
		return errUnbound
	}
	fam, err := b.s.family(b.fd)
	if err != nil {
		return err
	}
	if err := encodeDel(&b.del, d, fam); err != nil {
		return err
	}
	if err := setsockopt(b.fd, optDelKey, unsafe.Pointer(&b.del), unsafe.Sizeof(b.del)); err != nil {
		return classifyMPTCP(b.fd, os.NewSyscallError("setsockopt(TCP_AO_DEL_KEY)", err))
	}
	return nil
}

func (b *bound) Info() (Info, error) {
	if b.fd < 0 {
		return Info{}, errUnbound
	}
	in, err := info(b.fd)
	if err != nil {
		return Info{}, fmt.Errorf("tcpao: info: %w", err)
	}
	return in, nil
}

func (b *bound) SetInfo(c InfoChange) error {
	if b.fd < 0 {
		return errUnbound
	}
	if err := setInfo(b.fd, c); err != nil {
		return fmt.Errorf("tcpao: set info: %w", err)
	}
	return nil
}

func (b *bound) Keys(f KeyFilter) ([]KeyInfo, error) {
	if b.fd < 0 {
		return nil, errUnbound
	}
	out, err := b.s.keysFD(b.fd, f)
	if err != nil {
		return nil, fmt.Errorf("tcpao: get keys: %w", err)
	}
	return out, nil
}

// Info issues getsockopt(TCP_AO_INFO). ENOENT: the socket has no TCP-AO;
// ErrMPTCP (wrapping EOPNOTSUPP): a Multipath TCP socket.
func (s *sock) Info() (Info, error) {
	var in Info
	err := s.do(func(fd int) error {
		var err error
		in, err = info(fd)
		return err
	})
	if err != nil {
		return Info{}, fmt.Errorf("tcpao: info: %w", err)
	}
	return in, nil
}

func info(fd int) (Info, error) {
	var o aoInfoOpt
	n := uint32(unsafe.Sizeof(o))
	if err := getsockopt(fd, optInfo, unsafe.Pointer(&o), &n); err != nil {
		return Info{}, classifyMPTCP(fd, os.NewSyscallError("getsockopt(TCP_AO_INFO)", err))
	}
	return decodeInfo(&o), nil
}

// SetInfo issues setsockopt(TCP_AO_INFO) after reading the current state, so
// that fields c leaves nil keep their value (the kernel overwrites
// ao_required and accept_icmps on every call). The read and the write are not
// atomic against other writers of the same socket. On a closed or listening
// socket without keys it creates the TCP-AO state. Errors (errors.Is):
//   - ENOENT: Current or RNext names no key;
//   - EINVAL: Current or RNext on a listening socket;
//   - EISCONN: an established socket without TCP-AO;
//   - ErrMPTCP: a Multipath TCP socket.
func (s *sock) SetInfo(c InfoChange) error {
	err := s.do(func(fd int) error { return setInfo(fd, c) })
	if err != nil {
		return fmt.Errorf("tcpao: set info: %w", err)
	}
	return nil
}

func setInfo(fd int, c InfoChange) error {
	cur, err := info(fd)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	o := encodeInfo(cur, c)
	if err := setsockopt(fd, optInfo, unsafe.Pointer(&o), unsafe.Sizeof(o)); err != nil {
		return classifyMPTCP(fd, os.NewSyscallError("setsockopt(TCP_AO_INFO)", err))
	}
	return nil
}

// initialKeys is the GET_KEYS buffer of the first attempt on a socket (later
// unfiltered ones start from the last count); it grows to what the kernel
// reports.
const initialKeys = 8

// Keys issues getsockopt(TCP_AO_GET_KEYS), growing the buffer until every
// matching key fits. The key bytes the kernel returns are zeroed at once;
// only their Fingerprint is kept. Errors (errors.Is): ENOENT: the socket has
// no TCP-AO; EINVAL: a filter prefix with host bits; ErrFilter; ErrMPTCP
// (wrapping EOPNOTSUPP): a Multipath TCP socket.
func (s *sock) Keys(f KeyFilter) ([]KeyInfo, error) {
	var out []KeyInfo
	err := s.do(func(fd int) error {
		var err error
		out, err = s.keysFD(fd, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tcpao: get keys: %w", err)
	}
	return out, nil
}

// keysFD is GET_KEYS on fd, its first buffer sized from the last
// unfiltered answer (lastKeys).
func (s *sock) keysFD(fd int, f KeyFilter) ([]KeyInfo, error) {
	hint := initialKeys
	all := f.all()
	if all {
		if n := int(s.lastKeys.Load()); n > 0 {
			hint = n + n/16 + initialKeys
		}
	}
	out, err := keys(fd, f, hint)
	if err == nil && all {
		s.lastKeys.Store(int32(min(len(out), 1<<30)))
	}
	return out, err
}

// keyBufs recycles the GET_KEYS buffers of sessions (up to pooledKeys
// entries): a fleet-wide roll reads each session a dozen times, and each
// read allocated one. A buffer goes back with its key bytes zeroed, and
// only the entries the kernel reports in a read are decoded.
var keyBufs = sync.Pool{New: func() any { b := make([]aoGetsockopt, pooledKeys); return &b }}

const pooledKeys = 16

func keys(fd int, f KeyFilter, n int) ([]KeyInfo, error) {
	for attempt := 0; ; attempt++ {
		var bp *[]aoGetsockopt
		var buf []aoGetsockopt
		if n <= pooledKeys {
			bp = keyBufs.Get().(*[]aoGetsockopt)
			buf = (*bp)[:n]
		} else {
			buf = make([]aoGetsockopt, n)
		}
		out, matched, err := keysInto(fd, f, buf, attempt >= 8)
		zeroKeys(buf)
		runtime.KeepAlive(buf)
		if bp != nil {
			keyBufs.Put(bp)
		}
		if err == nil && matched > n && attempt < 8 {
			n = matched + matched/4 + 1
			continue
		}
		return out, err
	}
}

// keysInto is one GET_KEYS into buf (len(buf) entries): how many keys
// matched, and the keys decoded when they all fit (or, last, those that
// did).
func keysInto(fd int, f KeyFilter, buf []aoGetsockopt, last bool) ([]KeyInfo, int, error) {
	n := len(buf)
	if err := encodeFilter(&buf[0], f, n); err != nil {
		return nil, 0, err
	}
	size := uint32(unsafe.Sizeof(buf[0]))
	if err := getsockopt(fd, optGetKeys, unsafe.Pointer(&buf[0]), &size); err != nil {
		return nil, 0, classifyMPTCP(fd, os.NewSyscallError("getsockopt(TCP_AO_GET_KEYS)", err))
	}
	matched := int(buf[0].NKeys)
	if matched > n && !last {
		return nil, matched, nil
	}
	out, err := decodeKeysFor(buf[:min(matched, n)], f)
	return out, matched, err
}
