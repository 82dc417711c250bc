//go:build linux

package connectguard

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// ioctlSize is the argument size encoded in an _IOC number.
func ioctlSize(req uint) uintptr { return uintptr(req>>16) & 0x3fff }

// TestABISizes checks the mirrored structs of include/uapi/linux/seccomp.h
// against the sizes x/sys/unix's ioctl numbers encode and against what the
// running kernel reports.
func TestABISizes(t *testing.T) {
	tests := []struct {
		name   string
		got    uintptr
		want   uintptr
		kernel func(seccompNotifSizes) uint16
	}{
		{"seccomp_notif", unsafe.Sizeof(seccompNotif{}), ioctlSize(unix.SECCOMP_IOCTL_NOTIF_RECV), func(s seccompNotifSizes) uint16 { return s.Notif }},
		{"seccomp_notif_resp", unsafe.Sizeof(seccompNotifResp{}), ioctlSize(unix.SECCOMP_IOCTL_NOTIF_SEND), func(s seccompNotifSizes) uint16 { return s.NotifResp }},
		{"seccomp_data", unsafe.Sizeof(seccompData{}), 64, func(s seccompNotifSizes) uint16 { return s.Data }},
		{"notification id", unsafe.Sizeof(uint64(0)), ioctlSize(unix.SECCOMP_IOCTL_NOTIF_ID_VALID), nil},
	}
	ks, err := notifSizes()
	if err != nil {
		t.Fatalf("SECCOMP_GET_NOTIF_SIZES: %v", err)
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %d bytes, uAPI %d", tt.name, tt.got, tt.want)
		}
		if tt.kernel != nil && uintptr(tt.kernel(ks)) != tt.got {
			t.Errorf("%s: %d bytes, running kernel %d", tt.name, tt.got, tt.kernel(ks))
		}
	}
	if off := unsafe.Offsetof(seccompNotif{}.Data); off != 16 {
		t.Errorf("seccomp_notif.data at %d, want 16", off)
	}
	if off := unsafe.Offsetof(seccompData{}.Args); off != 16 {
		t.Errorf("seccomp_data.args at %d, want 16", off)
	}
}

// seccompDataBytes lays out nr and arch as seccomp_data's first two words.
// The x/net/bpf VM loads words big-endian while seccomp loads them in host
// order; the filter only does aligned 4-byte loads, so encoding each word
// big-endian gives the VM the same values the kernel sees.
func seccompDataBytes(nr, arch uint32) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[offNr:], nr)
	binary.BigEndian.PutUint32(b[offArch:], arch)
	return b
}

func TestFilterProgram(t *testing.T) {
	a, err := nativeArch()
	if err != nil {
		t.Skip(err)
	}
	vm, err := bpf.NewVM(program(a))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		nr, arch uint32
		want     uint32
	}{
		{"connect", a.connect, a.audit, unix.SECCOMP_RET_USER_NOTIF},
		{"listen", a.listen, a.audit, unix.SECCOMP_RET_USER_NOTIF},
		{"bind", unix.SYS_BIND, a.audit, unix.SECCOMP_RET_ALLOW},
		{"listen nr, foreign arch", a.listen, unix.AUDIT_ARCH_I386, unix.SECCOMP_RET_ALLOW},
		{"socket", unix.SYS_SOCKET, a.audit, unix.SECCOMP_RET_ALLOW},
		{"accept4", unix.SYS_ACCEPT4, a.audit, unix.SECCOMP_RET_ALLOW},
		{"sendto", unix.SYS_SENDTO, a.audit, unix.SECCOMP_RET_ALLOW},
		{"connect+1", a.connect + 1, a.audit, unix.SECCOMP_RET_ALLOW},
		{"connect nr, foreign arch", a.connect, unix.AUDIT_ARCH_I386, unix.SECCOMP_RET_ALLOW},
		{"x32 connect", a.connect | 0x40000000, a.audit, unix.SECCOMP_RET_ALLOW},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := vm.Run(seccompDataBytes(tt.nr, tt.arch))
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != tt.want {
				t.Errorf("action %#x, want %#x", got, tt.want)
			}
		})
	}
	if _, err := bpf.Assemble(program(a)); err != nil {
		t.Errorf("assemble: %v", err)
	}
}

func TestParseSockaddr(t *testing.T) {
	in4 := func(a [4]byte, port uint16) []byte {
		b := make([]byte, 16)
		binary.NativeEndian.PutUint16(b, unix.AF_INET)
		binary.BigEndian.PutUint16(b[2:], port)
		copy(b[4:], a[:])
		return b
	}
	in6 := func(a netip.Addr, port uint16) []byte {
		b := make([]byte, 28)
		binary.NativeEndian.PutUint16(b, unix.AF_INET6)
		binary.BigEndian.PutUint16(b[2:], port)
		binary.NativeEndian.PutUint32(b[24:], 7) // scope id: a link-local address's zone
		a16 := a.As16()
		copy(b[8:], a16[:])
		return b
	}
	un := make([]byte, 20)
	binary.NativeEndian.PutUint16(un, unix.AF_UNIX)
	tests := []struct {
		name string
		in   []byte
		want string
		err  bool
	}{
		{"ipv4", in4([4]byte{10, 255, 0, 2}, 179), "10.255.0.2:179", false},
		{"ipv6", in6(netip.MustParseAddr("2001:db8::2"), 179), "[2001:db8::2]:179", false},
		{"v4-mapped", in6(netip.MustParseAddr("::ffff:10.0.0.1"), 179), "10.0.0.1:179", false},
		{"link-local", in6(netip.MustParseAddr("fe80::b"), 179), "[fe80::b%7]:179", false},
		{"link-local scope 0", func() []byte {
			b := in6(netip.MustParseAddr("fe80::b"), 179)
			clear(b[24:])
			return b
		}(), "[fe80::b]:179", false},
		{"link-local without scope id", in6(netip.MustParseAddr("fe80::b"), 179)[:24], "[fe80::b]:179", false},
		{"unix", un, "", true},
		{"short ipv4", in4([4]byte{1, 2, 3, 4}, 179)[:6], "", true},
		{"short ipv6", in6(netip.MustParseAddr("::1"), 1)[:20], "", true},
		{"empty", nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSockaddr(tt.in)
			if tt.err {
				if !errors.Is(err, errNotInet) {
					t.Fatalf("got %v, %v; want errNotInet", got, err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("got %v, %v; want %s", got, err, tt.want)
			}
		})
	}
}
