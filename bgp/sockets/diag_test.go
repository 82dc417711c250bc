package sockets

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"reflect"
	"syscall"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// msg builds one netlink message of type typ for seq around body.
func msg(typ uint16, seq uint32, body []byte) []byte {
	n := nlmsgHdrLen + len(body)
	b := make([]byte, (n+3)&^3)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(n))
	ne.PutUint16(b[4:], typ)
	ne.PutUint32(b[8:], seq)
	copy(b[nlmsgHdrLen:], body)
	return b
}

// diagMsg builds a struct inet_diag_msg for s (the kernel's layout).
func diagMsg(s Socket) []byte {
	b := make([]byte, diagMsgLen+8) // + an attribute's worth of padding
	ne := binary.NativeEndian
	b[0], b[1] = s.Family, s.State
	id := b[4:]
	binary.BigEndian.PutUint16(id[0:], s.Local.Port())
	binary.BigEndian.PutUint16(id[2:], s.Remote.Port())
	putAddr(id[4:20], s.Family, s.Local.Addr())
	putAddr(id[20:36], s.Family, s.Remote.Addr())
	ne.PutUint32(id[36:], s.IfIndex)
	ne.PutUint32(id[40:], uint32(s.Cookie))
	ne.PutUint32(id[44:], uint32(s.Cookie>>32))
	rest := b[4+sockIDLen:]
	ne.PutUint32(rest[12:], s.UID)
	ne.PutUint32(rest[16:], uint32(s.Inode))
	return b
}

func errMsg(errno int32) []byte {
	b := make([]byte, 4+nlmsgHdrLen)
	binary.NativeEndian.PutUint32(b, uint32(-errno))
	return b
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestParseMessages(t *testing.T) {
	v4 := Socket{Family: afInet, State: StateListen, Local: netip.MustParseAddrPort("10.255.0.1:179"),
		Remote: netip.MustParseAddrPort("0.0.0.0:0"), Cookie: 0x1_0000_0002, UID: 0, Inode: 4242}
	v6 := Socket{Family: afInet6, State: StateEstablished, Local: netip.MustParseAddrPort("[2001:db8::1]:179"),
		Remote: netip.MustParseAddrPort("[2001:db8::2]:40000"), IfIndex: 3, Cookie: 7, UID: 1000, Inode: 99}
	tests := []struct {
		name     string
		in       []byte
		want     []Socket
		done     bool
		wantErr  error
		wantNone bool
	}{
		{name: "dump then done", in: cat(msg(sockDiagByFam, 5, diagMsg(v4)), msg(sockDiagByFam, 5, diagMsg(v6)), msg(nlmsgDone, 5, make([]byte, 4))), want: []Socket{v4, v6}, done: true},
		{name: "other seq ignored", in: cat(msg(sockDiagByFam, 4, diagMsg(v6)), msg(sockDiagByFam, 5, diagMsg(v4))), want: []Socket{v4}},
		{name: "ENOENT is not found", in: msg(nlmsgError, 5, errMsg(int32(syscall.ENOENT))), wantErr: ErrNotFound},
		{name: "other errno", in: msg(nlmsgError, 5, errMsg(int32(syscall.EPERM))), wantErr: syscall.EPERM},
		{name: "ack", in: msg(nlmsgError, 5, errMsg(0)), done: true},
		{name: "short header", in: []byte{1, 2, 3}, wantErr: ErrMalformed},
		{name: "length past end", in: msg(sockDiagByFam, 5, diagMsg(v4))[:40], wantErr: ErrMalformed},
		{name: "short diag msg", in: msg(sockDiagByFam, 5, make([]byte, 10)), wantErr: ErrMalformed},
		{name: "bad family", in: msg(sockDiagByFam, 5, diagMsg(Socket{Family: 7})), wantErr: ErrMalformed},
		{name: "unknown type", in: msg(99, 5, nil), wantErr: ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := parseMessages(tt.in, 5)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.done != tt.done {
				t.Errorf("done = %v, want %v", res.done, tt.done)
			}
			if len(res.sockets) != len(tt.want) {
				t.Fatalf("got %d sockets %+v, want %d", len(res.sockets), res.sockets, len(tt.want))
			}
			for i := range tt.want {
				if !reflect.DeepEqual(res.sockets[i], tt.want[i]) {
					t.Errorf("socket %d = %+v, want %+v", i, res.sockets[i], tt.want[i])
				}
			}
		})
	}
}

func TestEncodeRequest(t *testing.T) {
	tests := []struct {
		name          string
		family        uint8
		dump          bool
		local, remote netip.AddrPort
		flags         uint16
		src, dst      []byte
	}{
		{name: "listen dump v4", family: afInet, dump: true, flags: nlmFRequest | nlmFDump, src: make([]byte, 16), dst: make([]byte, 16)},
		{name: "lookup v4", family: afInet, local: netip.MustParseAddrPort("10.255.0.1:179"), remote: netip.MustParseAddrPort("10.255.0.2:40001"),
			flags: nlmFRequest, src: append([]byte{10, 255, 0, 1}, make([]byte, 12)...), dst: append([]byte{10, 255, 0, 2}, make([]byte, 12)...)},
		{name: "lookup v6", family: afInet6, local: netip.MustParseAddrPort("[::ffff:10.0.0.1]:179"), remote: netip.MustParseAddrPort("[::ffff:10.0.0.2]:2"),
			flags: nlmFRequest, src: netip.MustParseAddr("::ffff:10.0.0.1").AsSlice(), dst: netip.MustParseAddr("::ffff:10.0.0.2").AsSlice()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := encodeRequest(9, 0, tt.family, tt.dump, 1<<StateListen, tt.local, tt.remote)
			ne := binary.NativeEndian
			if got := ne.Uint32(b); int(got) != len(b) || len(b) != nlmsgHdrLen+reqV2Len {
				t.Fatalf("length field %d, len %d", got, len(b))
			}
			if ne.Uint16(b[4:]) != sockDiagByFam || ne.Uint16(b[6:]) != tt.flags || ne.Uint32(b[8:]) != 9 {
				t.Fatalf("header type=%d flags=%#x seq=%d", ne.Uint16(b[4:]), ne.Uint16(b[6:]), ne.Uint32(b[8:]))
			}
			r := b[nlmsgHdrLen:]
			if r[0] != tt.family || r[1] != ipprotoTCP || ne.Uint32(r[4:]) != 1<<StateListen {
				t.Fatalf("req family=%d proto=%d states=%#x", r[0], r[1], ne.Uint32(r[4:]))
			}
			id := r[8:]
			if binary.BigEndian.Uint16(id) != tt.local.Port() || binary.BigEndian.Uint16(id[2:]) != tt.remote.Port() {
				t.Errorf("ports %d %d", binary.BigEndian.Uint16(id), binary.BigEndian.Uint16(id[2:]))
			}
			if string(id[4:20]) != string(tt.src) || string(id[20:36]) != string(tt.dst) {
				t.Errorf("addresses % x / % x", id[4:20], id[20:36])
			}
			if ne.Uint32(id[40:]) != noCookie || ne.Uint32(id[44:]) != noCookie {
				t.Error("cookie is not INET_DIAG_NOCOOKIE")
			}
		})
	}
}

// FuzzParseMessages feeds arbitrary datagrams to the decoder: it must never
// panic, and whatever it decodes must re-encode to the same fields.
func FuzzParseMessages(f *testing.F) {
	s := Socket{Family: afInet, State: StateListen, Local: netip.MustParseAddrPort("10.255.0.1:179"), Remote: netip.MustParseAddrPort("0.0.0.0:0"), Inode: 1}
	f.Add(cat(msg(sockDiagByFam, 1, diagMsg(s)), msg(nlmsgDone, 1, make([]byte, 4))))
	f.Add(msg(nlmsgError, 1, errMsg(2)))
	f.Add(cat(msg(sockDiagByFam, 1, withMD5(diagMsg(s), md5Sig(afInet, "192.0.2.0", 24, "pw"))), msg(nlmsgDone, 1, make([]byte, 4))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := parseMessages(b, 1)
		if err != nil {
			return
		}
		for _, s := range res.sockets {
			again, err := decodeDiagMsg(diagMsg(s))
			md5 := s.MD5
			s.MD5 = nil
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Fatalf("round trip %+v -> %+v, %v", s, again, err)
			}
			for _, k := range md5 {
				if !k.Peer.IsValid() {
					t.Fatalf("MD5 key %+v", k)
				}
			}
		}
	})
}

// md5Sig is one struct tcp_diag_md5sig.
func md5Sig(fam uint8, addr string, bits int, key string) []byte {
	b := make([]byte, diagMD5SigLen)
	b[0], b[1] = fam, uint8(bits)
	binary.NativeEndian.PutUint16(b[2:], uint16(len(key)))
	copy(b[4:20], netip.MustParseAddr(addr).AsSlice())
	copy(b[20:], key)
	return b
}

// withMD5 appends an INET_DIAG_MD5SIG attribute holding sigs to an
// inet_diag_msg made by diagMsg.
func withMD5(m []byte, sigs ...[]byte) []byte {
	body := cat(sigs...)
	a := make([]byte, rtaHdrLen, rtaHdrLen+len(body))
	binary.NativeEndian.PutUint16(a[0:], uint16(rtaHdrLen+len(body)))
	binary.NativeEndian.PutUint16(a[2:], attrMD5Sig)
	return cat(m[:diagMsgLen], append(a, body...))
}

// The MD5 keys of a socket are decoded with their prefixes, and their
// passwords only as fingerprints.
func TestDecodeMD5Sig(t *testing.T) {
	s := Socket{Family: afInet, State: StateListen, Local: netip.MustParseAddrPort("0.0.0.0:179"), Remote: netip.MustParseAddrPort("0.0.0.0:0")}
	m := withMD5(diagMsg(s), md5Sig(afInet, "192.0.2.2", 32, "first"), md5Sig(afInet6, "2001:db8::", 64, "second"))
	got, err := decodeDiagMsg(m)
	if err != nil {
		t.Fatal(err)
	}
	want := []tcpao.MD5Info{md5Info("192.0.2.2/32", "first"), md5Info("2001:db8::/64", "second")}
	if !reflect.DeepEqual(got.MD5, want) {
		t.Fatalf("MD5 = %+v, want %+v", got.MD5, want)
	}
	for _, bad := range [][]byte{
		withMD5(diagMsg(s), md5Sig(afInet, "192.0.2.2", 32, "x")[:99]),
		withMD5(diagMsg(s), md5Sig(7, "192.0.2.2", 32, "x")),
		withMD5(diagMsg(s), md5Sig(afInet, "192.0.2.2", 33, "x")),
	} {
		if _, err := decodeDiagMsg(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("decoded a malformed INET_DIAG_MD5SIG: %v", err)
		}
	}
}

// md5Info is the key sock_diag shows for peer with password pw.
func md5Info(peer, pw string) tcpao.MD5Info {
	return tcpao.MD5Info{MD5Ref: tcpao.MD5Ref{Peer: netip.MustParsePrefix(peer)}, Fingerprint: tcpao.NewSecret([]byte(pw)).Fingerprint()}
}
