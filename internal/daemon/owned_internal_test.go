package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestLedgerRecord: the ownership record keeps what was installed across a
// reopen, by speaker process, IDs and fingerprint; a process that is gone
// loses its records; a record written under another fingerprint key (its
// check differs) starts afresh, as an upgrade does.
func TestLedgerRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "owned-keys.json")
	log := slog.New(slog.DiscardHandler)
	starts := map[int]uint64{100: 7, 200: 9}
	reopen := func() *ledger {
		t.Helper()
		l, err := openLedger(path, nil, log, time.Now, func(pid int) uint64 { return starts[pid] })
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a := tcpao.NewSecret([]byte("key a of 16 bytes")).Fingerprint()
	b := tcpao.NewSecret([]byte("key b of 16 bytes")).Fingerprint()
	host := netip.MustParsePrefix("192.0.2.2/32")
	ref := func(send uint8) tcpao.KeyRef { return tcpao.KeyRef{Peer: host, SendID: send, RecvID: send} }
	info := func(send uint8, fp tcpao.Fingerprint) tcpao.KeyInfo {
		return tcpao.KeyInfo{KeyRef: ref(send), Fingerprint: fp}
	}
	otherPeer := func(k tcpao.KeyInfo) tcpao.KeyInfo {
		k.Peer = netip.MustParsePrefix("198.51.100.9/32")
		return k
	}
	l := reopen()
	if !l.bootstrap {
		t.Fatal("no record yet: want the upgrade rule")
	}
	l.record(l.owner(100).p, 11, ref(1), a, false)
	l.record(l.owner(200).p, 12, ref(2), b, false)
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("record mode %v (%v), want 0600", st, err)
	}
	starts[200] = 10 // process 200 restarted: another speaker process
	l = reopen()
	if l.bootstrap {
		t.Error("a record was read: not an upgrade")
	}
	o100, o200 := l.owner(100), l.owner(200)
	for _, tc := range []struct {
		name string
		o    *procOwner
		k    tcpao.KeyInfo
		want bool
	}{
		{"installed", o100, info(1, a), true},
		{"other material under its IDs", o100, info(1, b), false},
		{"other IDs", o100, info(3, a), false},
		{"its IDs and material for another peer", o100, otherPeer(info(1, a)), false},
		{"a gone process's", o200, info(2, b), false},
	} {
		if got := tc.o.Owns(tc.k); got != tc.want {
			t.Errorf("%s: Owns = %t, want %t", tc.name, got, tc.want)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(raw), checkValue(), strings.Repeat("0", 64), 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if l = reopen(); !l.bootstrap || l.owner(100).Owns(info(1, a)) {
		t.Error("a record under another fingerprint key was used")
	}

	// A record that cannot be written says so in status, and is written
	// at the next chance.
	l.fault = func(string, string) error { return errors.New("disk full") }
	l.record(l.owner(100).p, 11, ref(5), a, false)
	if err := l.flush(); err == nil || !strings.Contains(l.warning(), "disk full") {
		t.Errorf("flush = %v, warning %q: want the write's error in status", err, l.warning())
	}
	l.fault = nil
	if err := l.close(); err != nil || l.warning() != "" {
		t.Errorf("close = %v, warning %q after the disk recovered", err, l.warning())
	}
	if l = reopen(); !l.owner(100).Owns(info(5, a)) {
		t.Error("the key recorded while the disk was full was lost")
	}
}

// TestLedgerRowWithoutPeer: a record written before rows kept the peer
// prefix still counts: its rows stand for any peer (what they meant when
// written), and a row that names a prefix is exact.
func TestLedgerRowWithoutPeer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "owned-keys.json")
	fp := tcpao.NewSecret([]byte("key a of 16 bytes")).Fingerprint()
	hexFP := fmt.Sprintf("%x", fp[:])
	rec := fmt.Sprintf(`{"version": 1, "check": %q, "keys": [
  {"pid": 100, "start": 7, "send_id": 1, "recv_id": 1, "fingerprint": %q, "since": "2024-01-01T00:00:00Z"},
  {"pid": 100, "start": 7, "peer": "192.0.2.0/24", "send_id": 2, "recv_id": 2, "fingerprint": %q, "since": "2024-01-01T00:00:00Z"}
]}`, checkValue(), hexFP, hexFP)
	if err := os.WriteFile(path, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := openLedger(path, nil, slog.New(slog.DiscardHandler), time.Now, func(int) uint64 { return 7 })
	if err != nil {
		t.Fatal(err)
	}
	o := l.owner(100)
	for _, tc := range []struct {
		name string
		peer string
		ids  uint8
		want bool
	}{
		{"row without a peer, one peer", "192.0.2.2/32", 1, true},
		{"row without a peer, another", "198.51.100.9/32", 1, true},
		{"row with a prefix, that prefix", "192.0.2.0/24", 2, true},
		{"row with a prefix, a host in it", "192.0.2.2/32", 2, false},
		{"row with a prefix, another prefix", "198.51.100.0/24", 2, false},
	} {
		k := tcpao.KeyInfo{KeyRef: tcpao.KeyRef{Peer: netip.MustParsePrefix(tc.peer), SendID: tc.ids, RecvID: tc.ids}, Fingerprint: fp}
		if got := o.Owns(k); got != tc.want {
			t.Errorf("%s: Owns = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// TestOwnedTodaysRecord: an ownership record as aokeyd writes it today
// (rows with a peer prefix, cookies and an adoption; TCP-MD5 passwords by
// prefix) reads: each key is aokeyd's for its process, prefix, IDs and
// material, the adopted one too, and each password for its prefix. Rows
// name kernel keys, not peers: a key's prefix is its identity there.
func TestOwnedTodaysRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "owned-keys.json")
	fp := tcpao.NewSecret([]byte("key a of 16 bytes")).Fingerprint()
	md5 := tcpao.NewSecret([]byte("md5-Password-one")).Fingerprint()
	rec := fmt.Sprintf(`{
  "version": 1,
  "check": %q,
  "keys": [
    {"pid": 100, "start": 7, "peer": "192.0.2.2/32", "send_id": 1, "recv_id": 101, "fingerprint": %q, "cookies": [5, 9], "since": "2026-11-01T00:00:00Z"},
    {"pid": 100, "start": 7, "peer": "192.0.2.0/30", "send_id": 2, "recv_id": 102, "fingerprint": %q, "since": "2026-11-01T00:00:00Z", "adopted": true}
  ],
  "md5": [
    {"prefix": "198.51.100.2/32", "fingerprints": [%q]}
  ]
}
`, checkValue(), fmt.Sprintf("%x", fp[:]), fmt.Sprintf("%x", fp[:]), fmt.Sprintf("%x", md5[:]))
	if err := os.WriteFile(path, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := openLedger(path, nil, slog.New(slog.DiscardHandler), time.Now, func(int) uint64 { return 7 })
	if err != nil {
		t.Fatal(err)
	}
	key := func(p string, send, recv uint8) tcpao.KeyInfo {
		return tcpao.KeyInfo{KeyRef: tcpao.KeyRef{Peer: netip.MustParsePrefix(p), SendID: send, RecvID: recv}, Fingerprint: fp}
	}
	o := l.owner(100)
	if !o.Owns(key("192.0.2.2/32", 1, 101)) || !o.Owns(key("192.0.2.0/30", 2, 102)) {
		t.Error("a recorded key is not aokeyd's")
	}
	if o.Owns(key("192.0.2.3/32", 1, 101)) || l.owner(101).Owns(key("192.0.2.2/32", 1, 101)) {
		t.Error("a key of another prefix or process is aokeyd's")
	}
	if !l.ownsMD5(netip.MustParsePrefix("198.51.100.2/32"), md5) || l.ownsMD5(netip.MustParsePrefix("198.51.100.3/32"), md5) {
		t.Error("the recorded TCP-MD5 password is not aokeyd's for its prefix alone")
	}
}

// TestOwnRecSize: the ledger holds one ownRec a key by value (16,384 at a
// 4,096-peer route server's listener): 32 bytes, no time.Time (24 bytes
// with a pointer) and no object of its own for a key on one socket; its
// Since reads back what was recorded, to the nanosecond, and its sockets
// as they were added.
func TestOwnRecSize(t *testing.T) {
	at := time.Date(2026, 12, 7, 16, 30, 0, 123456789, time.UTC)
	if n := unsafe.Sizeof(ownRec{}); n > 32 {
		t.Errorf("ownRec is %d bytes: over 32", n)
	}
	// Its sockets: newest last, each once, the newest maxCookies; a copy
	// taken before a change keeps what it had.
	r := recOf(nil, at, false)
	var want []uint64
	for c := range uint64(maxCookies + 3) {
		before, had := r, slices.Clone(r.Cookies())
		if !r.addCookie(c) || r.addCookie(c) {
			t.Fatalf("cookie %d: added once, then refused", c)
		}
		want = append(want, c)
		if len(want) > maxCookies {
			want = want[1:]
		}
		if got := r.Cookies(); !slices.Equal(got, want) || !slices.Equal(before.Cookies(), had) {
			t.Fatalf("cookie %d: %v, want %v; the copy before it %v, want %v", c, got, want, before.Cookies(), had)
		}
		if !r.Since().Equal(at) {
			t.Fatalf("cookie %d: Since %v", c, r.Since())
		}
	}
	if got := recOf([]uint64{0, 5, 6, 7, 8, 9, 10, 11, 12, 13}, at, true); !slices.Equal(got.Cookies(), []uint64{6, 7, 8, 9, 10, 11, 12, 13}) || !got.Adopted {
		t.Errorf("a row's cookies: %v", got.Cookies())
	}
	if got := recOf([]uint64{0}, at, false).Cookies(); !slices.Equal(got, []uint64{0}) {
		t.Errorf("a connect's cookie: %v", got)
	}
	if got := recOf(nil, at, false).Since(); !got.Equal(at) {
		t.Errorf("Since = %v, want %v", got, at)
	}
	if got := recOf(nil, time.Time{}, false).Since(); !got.IsZero() {
		t.Errorf("an unknown Since reads back as %v", got)
	}
}

// TestOwnKeySize: the ledger's map key is 48 bytes (a route server's
// ledger holds 16,384 in twice as many slots), and it gives back the
// process and prefix it was made of: IPv4, IPv6, an IPv4-mapped IPv6
// prefix as such, none; the prefix masked.
func TestOwnKeySize(t *testing.T) {
	if n := unsafe.Sizeof(ownKey{}); n > 48 {
		t.Errorf("ownKey is %d bytes: over 48", n)
	}
	p := procID{PID: 4194304, Start: 1<<40 + 7}
	for _, c := range []struct{ in, want string }{
		{"192.0.2.77/24", "192.0.2.0/24"}, {"10.1.2.3/32", "10.1.2.3/32"}, {"2001:db8::1/64", "2001:db8::/64"},
		{"::ffff:192.0.2.1/128", "::ffff:192.0.2.1/128"}, {"0.0.0.0/0", "0.0.0.0/0"}, {"", ""},
	} {
		var in netip.Prefix
		if c.in != "" {
			in = netip.MustParsePrefix(c.in)
		}
		k := ownKeyOf(p, tcpao.KeyRef{Peer: in, SendID: 3, RecvID: 4}, tcpao.Fingerprint{9})
		got := ""
		if pfx := k.peer(); pfx.IsValid() {
			got = pfx.String()
		}
		if got != c.want || k.proc() != p || k.SendID != 3 || k.RecvID != 4 || k.FP != (tcpao.Fingerprint{9}) {
			t.Errorf("%q: peer %q, proc %+v, IDs %d/%d: want %q", c.in, got, k.proc(), k.SendID, k.RecvID, c.want)
		}
		if in.IsValid() && k == ownKeyOf(p, tcpao.KeyRef{SendID: 3, RecvID: 4}, tcpao.Fingerprint{9}) {
			t.Errorf("%q: the key equals the one without a prefix", c.in)
		}
	}
}
