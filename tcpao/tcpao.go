package tcpao

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
)

// Algorithm is a TCP-AO MAC algorithm name as the kernel's crypto API spells
// it in tcp_ao_add.alg_name.
type Algorithm string

// The algorithms aokeyd offers. RFC 5926 mandates HMAC-SHA-1-96 and
// AES-128-CMAC-96; HMAC-SHA-256 is the common stronger choice. The kernel maps
// "cmac(aes128)" to "cmac(aes)" with a 16-byte key.
const (
	HMACSHA1   Algorithm = "hmac(sha1)"
	HMACSHA256 Algorithm = "hmac(sha256)"
	CMACAES128 Algorithm = "cmac(aes128)"
)

// Algorithms lists the supported algorithms in a stable order.
var Algorithms = []Algorithm{HMACSHA1, HMACSHA256, CMACAES128}

// Valid reports whether a is one of the supported algorithms.
func (a Algorithm) Valid() bool {
	for _, x := range Algorithms {
		if a == x {
			return true
		}
	}
	return false
}

// ParseAlgorithm accepts the kernel spelling and a few operator spellings
// ("hmac-sha-1", "sha1", "hmac-sha256", "aes-128-cmac", "cmac-aes128").
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case string(HMACSHA1), "hmac-sha-1", "hmac-sha1", "sha1":
		return HMACSHA1, nil
	case string(HMACSHA256), "hmac-sha-256", "hmac-sha256", "sha256":
		return HMACSHA256, nil
	case string(CMACAES128), "aes-128-cmac", "cmac-aes128", "aes128-cmac", "cmac(aes)":
		return CMACAES128, nil
	}
	return "", fmt.Errorf("%w: %q (want one of hmac(sha1), hmac(sha256), cmac(aes128))", ErrAlgorithm, s)
}

// Limits of the uAPI (include/uapi/linux/tcp.h).
const (
	// MaxKeyLen is TCP_AO_MAXKEYLEN.
	MaxKeyLen = 80
	// DefaultMACLen is what the kernel uses when maclen is 0, and RFC 5926's
	// 96-bit truncation.
	DefaultMACLen = 12
)

// Sentinel errors returned by this package (besides the wrapped errno values,
// which callers test with errors.Is(err, unix.EEXIST) and friends).
var (
	// ErrUnsupported is returned on platforms without TCP-AO (every !linux
	// build). It fails closed: nothing is installed.
	ErrUnsupported = errors.New("tcpao: TCP-AO is not supported on this platform")
	// ErrNoKernelSupport is returned by Probe when the running Linux kernel
	// was built without CONFIG_TCP_AO (every TCP_AO_* socket option then
	// fails with ENOPROTOOPT). Its text is the operator's one-line fix.
	ErrNoKernelSupport = errors.New("the running kernel lacks TCP-AO (built without CONFIG_TCP_AO): " +
		"run aokeyd on Linux 6.7 or later built with CONFIG_TCP_AO=y; see the README section \"Kernel requirements\"")
	// ErrMPTCP is returned, wrapping the kernel's errno, when a TCP-AO or
	// TCP-MD5 socket option fails on a Multipath TCP socket (SO_PROTOCOL
	// IPPROTO_MPTCP). The MPTCP socket layer passes only the TCP options it
	// knows to its subflows, and answers every other one with ENOPROTOOPT
	// (setsockopt) or EOPNOTSUPP (getsockopt), on any kernel, with or
	// without CONFIG_TCP_AO: it is not ErrNoKernelSupport, and the fix is
	// in the program that made the socket (Go 1.24 and later listen with
	// MPTCP by default: net.ListenConfig.SetMultipathTCP(false), or run it
	// with GODEBUG=multipathtcp=0).
	ErrMPTCP = errors.New("TCP-AO cannot be set on a Multipath TCP socket")
	// ErrAlgorithm is returned for an algorithm this package does not offer.
	ErrAlgorithm = errors.New("tcpao: unknown algorithm")
	// ErrKeyLength is returned for a secret of 0 or more than MaxKeyLen bytes
	// (16 bytes exactly for cmac(aes128)).
	ErrKeyLength = errors.New("tcpao: bad key length")
	// ErrAddress is returned for an invalid peer prefix.
	ErrAddress = errors.New("tcpao: bad peer address")
)

// ProbeError is Probe's error when the kernel could not be asked whether it
// has TCP-AO: the scratch socket or its TCP_AO_INFO read failed with
// something other than ENOPROTOOPT, most likely a seccomp filter or an LSM
// denying the call. That is no answer, and aokeyd does not start on one.
// Its text is one line: the failed call and its error, and what to check.
type ProbeError struct {
	Err error // the failed call (an *os.SyscallError) and its errno
}

func (e *ProbeError) Error() string {
	return "the kernel could not be asked whether it has TCP-AO (" + e.Err.Error() + "), and aokeyd will not run without an answer: " +
		"check what confines the process that asked: a seccomp filter (systemd SystemCallFilter=, or RestrictAddressFamilies= " +
		"without AF_INET and AF_INET6), an LSM profile (AppArmor, SELinux) denying it TCP sockets, and the user and " +
		"capabilities it runs with (compare deploy/debian/aokeyd.service); see the README section \"Kernel requirements\""
}

func (e *ProbeError) Unwrap() error { return e.Err }

// Secret holds MKT key bytes. It never prints them: String, GoString,
// LogValue, Format and MarshalJSON all redact. Zero wipes the bytes; callers
// zero a Secret once it is no longer needed. A shared copy (Shared) is the
// exception: Zero leaves it to its other holders, and it is wiped once
// nothing refers to it.
type Secret struct {
	b []byte
	// fp is the Fingerprint, computed once when the Secret is made and
	// carried by clones: reconcile passes compare desired and installed
	// keys by fingerprint, and an HMAC per key per pass was 40% of an idle
	// pass's CPU.
	fp Fingerprint
}

// NewSecret copies b into a new Secret. The caller may (and should) zero b.
func NewSecret(b []byte) Secret {
	c := secretBuf(len(b))
	copy(c, b)
	return Secret{b: c, fp: fingerprint(c)}
}

// secretBuf returns n bytes for a secret's copy, which are wiped once
// nothing refers to them any more, should their owners drop them without
// Zero. A copy of a key is handed on (a peer's desired keys go to its
// state machine, which may still be installing them when a newer desired
// state replaces them), so the one who drops it cannot always know that
// nobody else still reads it; the garbage collector can. Until the
// collection that finds it unreachable, the copy stays in memory: Zero is
// still the way to wipe a copy one owns at once.
//
// The copy is the smallest of the heap's size classes that holds n bytes
// (16, 24, 32, 48, 64 or 80): a daemon holds a copy per key per peer (4
// keys at 4,096 peers is 16,384 copies), most of them 16 to 32 bytes, and
// 80 bytes each was 0.75 MiB more of its heap.
func secretBuf(n int) []byte {
	switch {
	case n == 0 || n > MaxKeyLen:
		return make([]byte, n) // not a key the kernel takes: its decoder zeroes it
	case n <= 16:
		p := new([16]byte)
		runtime.SetFinalizer(p, func(p *[16]byte) { clear(p[:]) })
		return p[:n:n]
	case n <= 24:
		p := new([24]byte)
		runtime.SetFinalizer(p, func(p *[24]byte) { clear(p[:]) })
		return p[:n:n]
	case n <= 32:
		p := new([32]byte)
		runtime.SetFinalizer(p, func(p *[32]byte) { clear(p[:]) })
		return p[:n:n]
	case n <= 48:
		p := new([48]byte)
		runtime.SetFinalizer(p, func(p *[48]byte) { clear(p[:]) })
		return p[:n:n]
	case n <= 64:
		p := new([64]byte)
		runtime.SetFinalizer(p, func(p *[64]byte) { clear(p[:]) })
		return p[:n:n]
	}
	p := new([MaxKeyLen]byte)
	runtime.SetFinalizer(p, func(p *[MaxKeyLen]byte) { clear(p[:]) })
	return p[:n:n]
}

// Len is the key length in bytes.
func (s Secret) Len() int { return len(s.b) }

// Bytes returns the key bytes themselves (not a copy). Only code that hands
// them to the kernel should call it.
func (s Secret) Bytes() []byte { return s.b }

// Clone returns an independent copy.
func (s Secret) Clone() Secret {
	c := secretBuf(len(s.b))
	copy(c, s.b)
	return Secret{b: c, fp: s.fp}
}

// Zero overwrites the key bytes, unless s is a shared copy (Shared),
// which others may still use: that one is wiped once nobody refers to it.
func (s Secret) Zero() {
	if !s.isShared() {
		clear(s.b)
	}
}

// Equal compares two secrets in constant time.
func (s Secret) Equal(o Secret) bool { return hmac.Equal(s.b, o.b) }

// Fingerprint is a process-local keyed digest of the secret: equal secrets
// have equal fingerprints within one process, and it reveals nothing usable
// outside it (the HMAC key is random per process and never leaves memory).
// It is computed when the Secret is made (NewSecret) and is not changed by
// Zero.
func (s Secret) Fingerprint() Fingerprint {
	if s.fp == (Fingerprint{}) && s.b != nil {
		return fingerprint(s.b) // a Secret not made by NewSecret
	}
	return s.fp
}

func (s Secret) String() string                { return redacted }
func (s Secret) GoString() string              { return "tcpao.Secret{" + redacted + "}" }
func (s Secret) LogValue() slog.Value          { return slog.StringValue(redacted) }
func (s Secret) MarshalJSON() ([]byte, error)  { return []byte(`"` + redacted + `"`), nil }
func (s Secret) MarshalText() ([]byte, error)  { return []byte(redacted), nil }
func (s Secret) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(redacted)) }

// redacted is what every rendering of a Secret shows: not even its length.
const redacted = "[redacted]"

// Fingerprint identifies a secret within this process; see Secret.Fingerprint.
type Fingerprint [16]byte

var fpKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("tcpao: no randomness for fingerprint key: " + err.Error())
	}
	return k
}()

// fpUsed is set by the first fingerprint computed: from then on fpKey is
// fixed (SetFingerprintKey refuses).
var fpUsed atomic.Bool

// FingerprintKeyLen is the length of a key SetFingerprintKey takes.
const FingerprintKeyLen = 32

// ErrFingerprintKeyInUse: SetFingerprintKey was called after a fingerprint
// was computed under the random key.
var ErrFingerprintKeyInUse = errors.New("tcpao: a fingerprint was already computed; set the fingerprint key before making any Secret")

// SetFingerprintKey replaces the process's random fingerprint key with k
// (FingerprintKeyLen bytes, copied), so that fingerprints stay the same
// across restarts: a daemon that records which keys it installed (by IDs
// and fingerprint) and keeps that record on disk sets the key it keeps
// beside it (readable only by itself), before it makes any Secret or reads
// any key. Whoever holds both the key and a fingerprint can test guesses
// of the secret offline, so the key is as sensitive as the record.
func SetFingerprintKey(k []byte) error {
	if len(k) != FingerprintKeyLen {
		return fmt.Errorf("tcpao: fingerprint key is not %d bytes", FingerprintKeyLen)
	}
	if fpUsed.Load() {
		return ErrFingerprintKeyInUse
	}
	copy(fpKey, k)
	return nil
}

func fingerprint(b []byte) Fingerprint {
	h := getFingerprinter()
	defer h.release()
	return h.sum(b)
}

// fingerprinters keeps keyed hashers from one GET_KEYS answer to the next:
// every read of a session's keys (each step of each peer's roll) paid for
// crypto/hmac's set-up, more than its 3 keys' own hashing.
var fingerprinters = sync.Pool{New: func() any { return new(fingerprinter) }}

func getFingerprinter() *fingerprinter { return fingerprinters.Get().(*fingerprinter) }

// release resets the hasher, which overwrites the last secret's bytes in
// its buffer with the saved keyed state, and returns it to the pool.
func (h *fingerprinter) release() {
	if h.m != nil {
		h.m.Reset()
	}
	clear(h.out[:])
	fingerprinters.Put(h)
}

// zeroBlock follows each secret into its fingerprint's hash (see sum).
var zeroBlock [sha256.BlockSize]byte

// fingerprinter computes fingerprints with one keyed hasher, so that
// decoding a GET_KEYS answer of thousands of keys pays for the HMAC set-up
// (two allocations, two SHA-256 blocks for the padded key) once instead of
// per key: after its first Reset, crypto/hmac restores the inner and outer
// states it saved instead of hashing ipad and opad again. It stays HMAC-SHA256
// under the per-process random key, a keyed PRF: a fingerprint says nothing
// about the secret to anyone without fpKey, and fpKey never leaves memory.
// A plain or non-cryptographic hash (maphash) would not give that. The zero
// value is ready; it is not safe for concurrent use.
type fingerprinter struct {
	m   hash.Hash
	out [sha256.Size]byte
}

func (h *fingerprinter) sum(b []byte) Fingerprint {
	if h.m == nil {
		fpUsed.Store(true)
		h.m = hmac.New(sha256.New, fpKey)
	} else {
		h.m.Reset()
	}
	h.m.Write(b)
	// A block of zeros after the secret pushes its last bytes out of
	// SHA-256's block buffer, which Sum copies (to the stack) and Reset
	// only later overwrites: no copy of the secret is left behind. (A
	// fingerprint is of this process only; equal secrets still have equal
	// fingerprints, different ones different.)
	h.m.Write(zeroBlock[:])
	var f Fingerprint
	copy(f[:], h.m.Sum(h.out[:0]))
	clear(h.out[:])
	return f
}

// KeyRef names one MKT on a socket the way the kernel matches it for
// TCP_AO_DEL_KEY: peer address and prefix, L3 ifindex (0 = any VRF, no
// TCP_AO_KEYF_IFINDEX), SendID and RecvID.
type KeyRef struct {
	Peer    netip.Prefix
	IfIndex int
	SendID  uint8
	RecvID  uint8
}

func (r KeyRef) String() string {
	s := fmt.Sprintf("%s send=%d recv=%d", r.Peer, r.SendID, r.RecvID)
	if r.IfIndex != 0 {
		s += fmt.Sprintf(" ifindex=%d", r.IfIndex)
	}
	return s
}

// Key is one MKT as TCP_AO_ADD_KEY installs it.
type Key struct {
	KeyRef
	Algorithm Algorithm
	// MACLen is the MAC length in bytes; 0 means DefaultMACLen.
	MACLen uint8
	// ExcludeOptions sets TCP_AO_KEYF_EXCLUDE_OPT: TCP options other than
	// TCP-AO are not covered by the MAC (RFC 5925 section 3.1, TCP options
	// flag cleared).
	ExcludeOptions bool
	Secret         Secret
}

// String never includes the secret.
func (k Key) String() string {
	return fmt.Sprintf("%s alg=%s maclen=%d", k.KeyRef, k.Algorithm, k.macLen())
}

// LogValue never includes the secret.
func (k Key) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("peer", k.Peer.String()),
		slog.Int("send_id", int(k.SendID)),
		slog.Int("recv_id", int(k.RecvID)),
		slog.String("alg", string(k.Algorithm)),
	)
}

func (k Key) macLen() uint8 {
	if k.MACLen == 0 {
		return DefaultMACLen
	}
	return k.MACLen
}

// Validate checks what the kernel would otherwise reject with EINVAL.
func (k Key) Validate() error {
	if !k.Algorithm.Valid() {
		return fmt.Errorf("%w: %q", ErrAlgorithm, k.Algorithm)
	}
	if n := k.Secret.Len(); n == 0 || n > MaxKeyLen {
		return fmt.Errorf("%w: want 1..%d bytes", ErrKeyLength, MaxKeyLen)
	}
	if k.Algorithm == CMACAES128 && k.Secret.Len() != 16 {
		return fmt.Errorf("%w: cmac(aes128) needs exactly 16 bytes", ErrKeyLength)
	}
	if !k.Peer.IsValid() {
		return fmt.Errorf("%w: %v", ErrAddress, k.Peer)
	}
	return nil
}

// AddOptions are the flags of TCP_AO_ADD_KEY.
type AddOptions struct {
	// SetCurrent makes the key Current_key at once (set_current).
	SetCurrent bool
	// SetRNext announces the key as RNext_key (set_rnext).
	SetRNext bool
}

// DelKey is one TCP_AO_DEL_KEY request.
type DelKey struct {
	KeyRef
	// Async sets del_async: the key is unlinked and freed after an RCU grace
	// period without waiting for it. Listening sockets only (EINVAL else).
	Async bool
	// SetCurrent/Current and SetRNext/RNext name replacement keys (by SendID
	// and RecvID respectively) in the same call: the forced delete of a key
	// that is Current_key or RNext_key on an established socket.
	SetCurrent bool
	Current    uint8
	SetRNext   bool
	RNext      uint8
}

// Info is getsockopt(TCP_AO_INFO): per-socket state and counters.
type Info struct {
	// CurrentKey is the SendID of Current_key, RNextKey the RecvID of
	// RNext_key; HaveCurrent/HaveRNext say whether they are set.
	CurrentKey, RNextKey    uint8
	HaveCurrent, HaveRNext  bool
	AORequired, AcceptICMPs bool
	PktGood                 uint64
	PktBad                  uint64
	PktKeyNotFound          uint64
	PktAORequired           uint64
	PktDroppedICMP          uint64
}

// InfoChange is a setsockopt(TCP_AO_INFO). Nil fields keep their current
// value: the setter reads TCP_AO_INFO first, because the kernel overwrites
// ao_required and accept_icmps on every set.
type InfoChange struct {
	Current       *uint8 // SendID to make Current_key
	RNext         *uint8 // RecvID to announce as RNext_key
	AORequired    *bool
	AcceptICMPs   *bool
	ResetCounters bool // set_counters with all counters 0
}

// KeyInfo is one key as TCP_AO_GET_KEYS reports it. The key bytes the kernel
// returns are zeroed at once; only their Fingerprint is kept.
type KeyInfo struct {
	KeyRef
	Algorithm      Algorithm
	MACLen         uint8
	ExcludeOptions bool
	Fingerprint    Fingerprint
	IsCurrent      bool
	IsRNext        bool
	PktGood        uint64
	PktBad         uint64
}

// KeyFilter selects keys for TCP_AO_GET_KEYS. The zero value selects all
// keys (get_all). Current or RNext select the Current_key / RNext_key. Ref
// selects the key that matches exactly.
type KeyFilter struct {
	Current bool
	RNext   bool
	Ref     *KeyRef
	// SkipFingerprint leaves KeyInfo.Fingerprint zero: for a reader of
	// IDs, flags and counters only (a roll waiting for the peer's
	// switch, a monitor), which then pays no keyed hash per key. The key
	// bytes the kernel returns are zeroed all the same.
	SkipFingerprint bool
	// FingerprintIDs, when set (and SkipFingerprint is not), fingerprints
	// only the keys with this SendID and RecvID; the others' Fingerprint
	// stays zero. For a reader that looks for one key's material among
	// thousands in one read (a revoke on a fleet's listener, three keys a
	// peer): one keyed hash per candidate, not per key, and not a read of
	// its own per candidate (each a walk of the whole key list in the
	// kernel).
	FingerprintIDs *[2]uint8
	// Known, when set, are the secrets the reader expects (its desired
	// keys): a key it fingerprints whose bytes are one of them takes that
	// secret's fingerprint without an HMAC (see Known). The answer is the
	// same with or without it.
	Known *Known
}

// all reports whether f selects every key (get_all), whatever it asks of
// their fingerprints.
func (f KeyFilter) all() bool { return !f.Current && !f.RNext && f.Ref == nil }

// Fingerprints reports whether a read with f fingerprints a key with
// these IDs.
func (f KeyFilter) Fingerprints(sendID, recvID uint8) bool {
	if f.SkipFingerprint {
		return false
	}
	return f.FingerprintIDs == nil || f.FingerprintIDs[0] == sendID && f.FingerprintIDs[1] == recvID
}

// Socket is the TCP-AO control surface of one TCP socket. The Linux
// implementation (New, FromFD) issues the socket options; tcpaotest provides
// an in-memory kernel with the same rules.
type Socket interface {
	// AddKey is TCP_AO_ADD_KEY. The kernel answers EEXIST for a key with the
	// same peer and SendID or RecvID, EISCONN for the first key on an
	// established socket without TCP-AO, EINVAL for bad parameters and
	// ENOMEM when net.core.optmem_max is exhausted.
	AddKey(k Key, o AddOptions) error
	// DelKey is TCP_AO_DEL_KEY. ENOENT: no such key; EBUSY: the key is
	// Current_key or RNext_key on an established socket and no replacement
	// was named; EINVAL: del_async on a socket that is not listening.
	DelKey(d DelKey) error
	// Info is getsockopt(TCP_AO_INFO). ENOENT: no TCP-AO on the socket.
	Info() (Info, error)
	// SetInfo is setsockopt(TCP_AO_INFO), read-modify-write.
	SetInfo(c InfoChange) error
	// Keys is TCP_AO_GET_KEYS.
	Keys(f KeyFilter) ([]KeyInfo, error)
}

// Batcher is a Socket that runs several calls in one borrow of its
// descriptor: the Linux sockets (one RawConn.Control) and sockets borrowed
// from another process (one pidfd_getfd).
type Batcher interface {
	BatchKeys(f func(Socket) error) error
}

// Batch runs f with s's batched Socket when s is a Batcher, else with s
// itself. The Socket f gets must not be kept after f returns.
func Batch(s Socket, f func(Socket) error) error {
	if b, ok := s.(Batcher); ok {
		return b.BatchKeys(f)
	}
	return f(s)
}
