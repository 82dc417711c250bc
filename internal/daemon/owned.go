package daemon

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/durable"
	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The ownership record (issue 33): which keys aokeyd installed, so that it
// never deletes or changes a key another agent put on the speaker's
// sockets (an operator's emergency setsockopt, a speaker that keys its own
// sockets). Invariants:
//   - Every key aokeyd installs is recorded: the sockets the rotator writes
//     are wrapped (ownedSocket) and each successful TCP_AO_ADD_KEY adds a
//     record, and the keys ConnectKeys hands the connect guard (which adds
//     them on the speaker's new socket) are recorded before they leave.
//   - A key is aokeyd's when its peer prefix, IDs and fingerprint were
//     recorded for the speaker process whose socket holds it, on any of
//     that process's sockets: the kernel copies a listener's keys onto the
//     sockets it accepts (prefix included), so a session's inherited keys
//     are the listener's, and a copy of a key aokeyd deleted (the
//     del_async race) stays aokeyd's, to be retired. A copy of a foreign
//     key is foreign, and so is another agent's key that reuses one of
//     aokeyd's IDs and material for another peer. A row of a record
//     written before the prefix was kept has none: it matches any peer.
//   - Records are never dropped while their speaker process lives (a
//     delete does not drop one: copies may remain); a process that is gone
//     (its pid absent or started at another time) loses its records at
//     load.
//   - The record is kept beside the revocation record (0600), written
//     durably shortly after it changes and at shutdown, with a check value
//     that tells whether the fingerprint key it was written under is the
//     one in use; fingerprints are of the key cmd/aokeyd keeps in its
//     state directory (tcpao.SetFingerprintKey). A crash between an add and
//     the write leaves that key unrecorded until the planner next sees it
//     desired in place: a key whose IDs and material are a desired key's
//     on that socket is claimed as aokeyd's (rotator.Claimer; it is what
//     aokeyd would install there). One that is no longer desired by then
//     is foreign: kept (never deleted), and adoptable.
//   - Upgrading (no record yet, or one under another fingerprint key): no
//     key is aokeyd's but the ones it installs and the ones the planner
//     claims (rotator.Claimer): IDs, material and peer prefix of a key
//     desired on that socket (on a session, a prefix overlapping the
//     desired one's, as the planner matches a session's keys). Material
//     alone proves nothing: another agent may install a key of the key
//     source for a peer aokeyd does not manage, or under other IDs, and
//     that key stays foreign (kept, adoptable). A key aokeyd installed
//     before the upgrade that is no longer desired is foreign too: kept,
//     never deleted, until aoctl adopt hands it over.

// procID names a speaker process across pid reuse: its pid and its start
// time (clock ticks since boot, /proc/PID/stat field 22; 0 when unknown).
type procID struct {
	PID   int
	Start uint64
}

// ownKey is one recorded key: peer prefix, IDs and material on one
// speaker process. The prefix is masked; none (fam 0) in a row recorded
// without one (an older record), which stands for any peer. It is the
// ledger's map key, one a key on the speaker's sockets (16,384 at a route
// server, in a map of twice as many slots): 48 bytes, not the 72 of a
// procID and a netip.Prefix (TestOwnKeySize). Invariants: addr is the
// prefix's address as As16 and bits its length, both zero with fam 0;
// pid is procID.PID, which pid_max (at most 2^22) keeps within int32.
type ownKey struct {
	start          uint64 // procID.Start
	pid            int32  // procID.PID
	bits           uint8  // the prefix's length
	fam            uint8  // 4 or 6: the prefix's family; 0: none
	SendID, RecvID uint8
	addr           [16]byte
	FP             tcpao.Fingerprint
}

// ownKeyOf is the ownKey of the key r with material fp on process p.
func ownKeyOf(p procID, r tcpao.KeyRef, fp tcpao.Fingerprint) ownKey {
	k := ownKey{start: p.Start, pid: int32(p.PID), SendID: r.SendID, RecvID: r.RecvID, FP: fp}
	k.setPeer(r.Peer)
	return k
}

// setPeer makes pfx (masked; invalid: none) k's prefix.
func (k *ownKey) setPeer(pfx netip.Prefix) {
	k.fam, k.bits, k.addr = 0, 0, [16]byte{}
	if !pfx.IsValid() {
		return
	}
	pfx = pfx.Masked()
	k.fam, k.bits, k.addr = 6, uint8(pfx.Bits()), pfx.Addr().As16()
	if pfx.Addr().Is4() {
		k.fam = 4
	}
}

// proc is k's speaker process.
func (k ownKey) proc() procID { return procID{PID: int(k.pid), Start: k.start} }

// peer is k's prefix (invalid: none, any peer).
func (k ownKey) peer() netip.Prefix {
	switch k.fam {
	case 4:
		return netip.PrefixFrom(netip.AddrFrom16(k.addr).Unmap(), int(k.bits))
	case 6:
		return netip.PrefixFrom(netip.AddrFrom16(k.addr), int(k.bits))
	}
	return netip.Prefix{}
}

// ownRec is what the record keeps of one ownKey, held in the ledger's map
// by value: 32 bytes a key (a route server's ledger holds tens of
// thousands, in a map of twice as many slots; a pointer to a
// time.Time-holding struct was 8 bytes in the map and a 64-byte object
// beside it, 4.3 MiB at 16,384 keys). A key is installed on one socket
// (the listener's) as a rule: that cookie is held in the record itself,
// not in a slice of its own (24 bytes and an 8-byte object a key).
// Invariants: n counts the sockets, last and *older, at most maxCookies;
// last is meaningful only with n > 0; older holds n-1 cookies, oldest
// first, nil when there are none, and is never written once stored (a
// change makes a new one: copies of the record share it).
type ownRec struct {
	last    uint64    // the newest socket it was installed on (0: a connect's)
	older   *[]uint64 // the ones before last, oldest first
	since   int64     // first recorded, Unix nanoseconds (0: unknown)
	n       uint8
	Adopted bool // handed to aokeyd by aoctl adopt, not installed by it
}

// recOf is the ownRec of a record's row's fields (of its cookies, the
// newest maxCookies: no more are ever written).
func recOf(cookies []uint64, since time.Time, adopted bool) ownRec {
	r := ownRec{Adopted: adopted}
	if !since.IsZero() {
		r.since = since.UnixNano()
	}
	if len(cookies) > maxCookies {
		cookies = cookies[len(cookies)-maxCookies:]
	}
	if n := len(cookies); n > 0 {
		r.last, r.n = cookies[n-1], uint8(n)
		if n > 1 {
			older := slices.Clone(cookies[:n-1])
			r.older = &older
		}
	}
	return r
}

// Cookies are the sockets the key was installed on, newest last (0: a
// connect's), in a slice of the caller's.
func (r ownRec) Cookies() []uint64 {
	if r.n == 0 {
		return nil
	}
	var out []uint64
	if r.older != nil {
		out = slices.Clone(*r.older)
	}
	return append(out, r.last)
}

// addCookie records socket c as the newest the key was installed on,
// dropping the oldest past maxCookies; false when c was recorded already.
func (r *ownRec) addCookie(c uint64) bool {
	cs := r.Cookies()
	if slices.Contains(cs, c) {
		return false
	}
	*r = recOf(append(cs, c), r.Since(), r.Adopted) // recOf keeps the newest maxCookies
	return true
}

// Since is when the key was first recorded (the zero time when unknown).
func (r ownRec) Since() time.Time {
	if r.since == 0 {
		return time.Time{}
	}
	return time.Unix(0, r.since).UTC()
}

const maxCookies = 8

// ledger is the ownership record. Its methods are safe for concurrent use
// (the rotator's peers, the listener sync, ConnectKeys); Owns never blocks
// on I/O.
type ledger struct {
	path  string
	fault durable.Fault
	log   *slog.Logger
	clock func() time.Time
	start func(pid int) uint64 // a process's start time (test seam)

	mu        sync.Mutex
	keys      map[ownKey]ownRec
	owners    map[int]*procOwner                   // by pid
	bootstrap bool                                 // no usable record at start: only claims and installs are aokeyd's
	md5       map[netip.Prefix][]tcpao.Fingerprint // TCP-MD5 passwords installed (owned_md5.go)
	dirty     bool
	timer     *time.Timer
	writeErr  error
	closed    bool
	// cost is what the last write took (encoding and the durable save):
	// the next waits flushPace times that (flushWait).
	cost time.Duration
}

// flushDelay batches the record's writes: a listener sync of thousands of
// keys is one write.
const flushDelay = 200 * time.Millisecond

// flushPace and flushMax pace the writes by their cost: a write comes no
// sooner than flushPace times the last one's cost after the change that
// asks for it, and never later than flushMax. Each write encodes the whole
// record: at 1,024 peers one took tens of milliseconds in the guest, and
// writes every 200 ms over a fleet-wide roll were 24 of aokeyd's 118
// CPU-seconds. Paced, the writes take at most 1/flushPace of a CPU. A
// crash loses what changed since the last write: keys that then look
// foreign are kept, never deleted, and the planner claims those that are
// exactly a desired key (procOwner.Claim).
const (
	flushPace = 20
	flushMax  = 5 * time.Second
)

// flushWait is how long a change waits for its write (l.mu held).
func (l *ledger) flushWait() time.Duration {
	return min(max(flushDelay, flushPace*l.cost), flushMax)
}

// ledgerFile is the record's on-disk form.
type ledgerFile struct {
	Version int `json:"version"`
	// Check is the fingerprint of checkText under the fingerprint key the
	// record was written with: another key makes every fingerprint in it
	// meaningless.
	Check string      `json:"check"`
	Keys  []ledgerRow `json:"keys"`
	MD5   []md5Row    `json:"md5,omitempty"`
}

type ledgerRow struct {
	PID         int       `json:"pid"`
	Start       uint64    `json:"start"`
	Peer        string    `json:"peer,omitempty"` // "": recorded before prefixes were (any peer)
	SendID      uint8     `json:"send_id"`
	RecvID      uint8     `json:"recv_id"`
	Fingerprint string    `json:"fingerprint"`
	Cookies     []uint64  `json:"cookies,omitempty"`
	Since       time.Time `json:"since"`
	Adopted     bool      `json:"adopted,omitempty"`
}

const checkText = "aokeyd ownership record check"

func checkValue() string {
	s := tcpao.NewSecret([]byte(checkText))
	fp := s.Fingerprint()
	return hex.EncodeToString(fp[:])
}

// openLedger loads the record at path ("": kept in memory only, every start
// is an upgrade), telling a process's start time with start (nil:
// procStart, from /proc). A record that cannot be read is an error: starting
// without it would make every non-desired key of aokeyd's look foreign
// (kept, harmless) but lose adoptions.
func openLedger(path string, fault durable.Fault, log *slog.Logger, clock func() time.Time, start func(pid int) uint64) (*ledger, error) {
	if start == nil {
		start = procStart
	}
	l := &ledger{path: path, fault: fault, log: log, clock: clock, start: start,
		keys: map[ownKey]ownRec{}, owners: map[int]*procOwner{}}
	if path == "" {
		l.bootstrap = true
		return l, nil
	}
	b, err := loadOwned(path, fault, log)
	if err != nil {
		return nil, fmt.Errorf("ownership record %w (move both aside to start afresh: keys found in place are then aokeyd's only where they are exactly a desired key)", err)
	}
	if b == nil {
		l.bootstrap = true
		log.Info("no ownership record yet: keys found in place are aokeyd's only where they are exactly a desired key (IDs, material, peer); others are kept as foreign", "file", path)
		return l, nil
	}
	var f ledgerFile
	if err := json.Unmarshal(b, &f); err != nil { // loadOwned checked it
		return nil, fmt.Errorf("ownership record %s: %w", path, err)
	}
	if f.Check != checkValue() {
		l.bootstrap = true
		log.Warn("the ownership record was written under another fingerprint key: starting afresh (keys found in place are aokeyd's only where they are exactly a desired key)", "file", path)
		return l, nil
	}
	alive := map[int]uint64{}
	for i, r := range f.Keys {
		fp, err := hex.DecodeString(r.Fingerprint)
		if err != nil || len(fp) != len(tcpao.Fingerprint{}) {
			return nil, fmt.Errorf("ownership record %s: keys[%d].fingerprint is not %d hex bytes", path, i, len(tcpao.Fingerprint{}))
		}
		st, seen := alive[r.PID]
		if !seen {
			st = l.start(r.PID)
			alive[r.PID] = st
		}
		if st != r.Start {
			continue // that speaker process is gone
		}
		var pfx netip.Prefix
		if r.Peer != "" {
			if pfx, err = netip.ParsePrefix(r.Peer); err != nil {
				return nil, fmt.Errorf("ownership record %s: keys[%d].peer: %w", path, i, err)
			}
		}
		k := ownKeyOf(procID{r.PID, r.Start}, tcpao.KeyRef{Peer: pfx, SendID: r.SendID, RecvID: r.RecvID}, tcpao.Fingerprint{})
		copy(k.FP[:], fp)
		l.keys[k] = recOf(r.Cookies, r.Since, r.Adopted)
	}
	if err := l.loadMD5(path, f.MD5); err != nil {
		return nil, err
	}
	return l, nil
}

// procStart is pid's start time from /proc (0 when it cannot be read: no
// such process, or not a real one).
func procStart(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64) // field 22
	return v
}

// owner is the Ownership of the keys on a socket of process pid: the same
// value for the same pid (Desired.Same compares it by identity). A pid's
// start time is read once, when aokeyd first sees it.
func (l *ledger) owner(pid int) *procOwner {
	l.mu.Lock()
	o := l.owners[pid]
	l.mu.Unlock()
	if o != nil {
		return o
	}
	st := l.start(pid)
	l.mu.Lock()
	defer l.mu.Unlock()
	if o = l.owners[pid]; o == nil {
		o = &procOwner{l: l, p: procID{PID: pid, Start: st}}
		l.owners[pid] = o
	}
	return o
}

// adopted makes the next owner call of each process a new value: the
// rotator's machines see a changed desired state (Desired.Same compares
// Owner by identity) and plan again with the adopted keys as aokeyd's.
func (l *ledger) adopted() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.owners)
}

// wrap is s, a socket of the speaker named by ref, with its adds recorded.
func (l *ledger) wrap(ref sockets.Ref, s tcpao.Socket) tcpao.Socket {
	return ownedSocket{Socket: s, l: l, p: l.owner(ref.PID).p, cookie: ref.Cookie}
}

// record notes that aokeyd installed (or adopted) the key r with material
// fp on socket cookie of process p.
func (l *ledger) record(p procID, cookie uint64, r tcpao.KeyRef, fp tcpao.Fingerprint, adopted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(ownKeyOf(p, r, fp), cookie, adopted)
}

func (l *ledger) recordLocked(k ownKey, cookie uint64, adopted bool) {
	r, ok := l.keys[k]
	changed := false
	if !ok {
		r = recOf(nil, l.clock(), false)
		changed = true
	}
	defer func() { l.keys[k] = r }()
	if adopted && !r.Adopted {
		r.Adopted, changed = true, true
	}
	if r.addCookie(cookie) {
		changed = true
	}
	if changed {
		l.changedLocked()
	}
}

// changedLocked schedules a write of the record.
func (l *ledger) changedLocked() {
	l.dirty = true
	if l.path == "" || l.timer != nil || l.closed {
		return
	}
	l.timer = time.AfterFunc(l.flushWait(), func() { _ = l.flush() })
}

// owns reports whether k, read from a socket of process p, is aokeyd's:
// recorded (installed, adopted or claimed). Without a record (bootstrap)
// nothing else is: a desired key in place is claimed by the planner
// (procOwner.Claim), which alone knows what is desired on the socket.
func (l *ledger) owns(p procID, k tcpao.KeyInfo) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := ownKeyOf(p, k.KeyRef, k.Fingerprint)
	if _, found := l.keys[ok]; found {
		return true
	}
	ok.setPeer(netip.Prefix{}) // an older record's row: any peer
	_, found := l.keys[ok]
	return found
}

// flush writes the record if it changed.
func (l *ledger) flush() error {
	l.mu.Lock()
	l.timer = nil
	if !l.dirty || l.path == "" {
		l.mu.Unlock()
		return nil
	}
	t0 := time.Now()
	f := ledgerFile{Version: 1, Check: checkValue(), MD5: l.md5Rows()}
	for k, r := range l.keys {
		p := k.proc()
		row := ledgerRow{PID: p.PID, Start: p.Start, SendID: k.SendID, RecvID: k.RecvID,
			Fingerprint: hex.EncodeToString(k.FP[:]), Cookies: r.Cookies(), Since: r.Since(), Adopted: r.Adopted}
		if pfx := k.peer(); pfx.IsValid() {
			row.Peer = pfx.String()
		}
		f.Keys = append(f.Keys, row)
	}
	l.dirty = false
	l.mu.Unlock()
	slices.SortFunc(f.Keys, func(a, b ledgerRow) int {
		return cmpRows(a, b)
	})
	b, err := json.MarshalIndent(f, "", "  ")
	if err == nil {
		err = ownedRecord(l.path, l.fault).Save(append(b, '\n'))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cost = time.Since(t0)
	if err != nil {
		l.dirty = true // the next change (or Close) tries again
		if l.writeErr == nil {
			l.log.Error("cannot write the ownership record: keys installed since the last write would look foreign after a restart (kept, not deleted)", "file", l.path, "err", err)
		}
	}
	l.writeErr = err
	return err
}

func cmpRows(a, b ledgerRow) int {
	switch {
	case a.PID != b.PID:
		return a.PID - b.PID
	case a.SendID != b.SendID:
		return int(a.SendID) - int(b.SendID)
	case a.RecvID != b.RecvID:
		return int(a.RecvID) - int(b.RecvID)
	case a.Peer != b.Peer:
		return strings.Compare(a.Peer, b.Peer)
	}
	return strings.Compare(a.Fingerprint, b.Fingerprint)
}

// close writes the record a last time; later changes are kept in memory.
func (l *ledger) close() error {
	l.mu.Lock()
	l.closed = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	return l.flush()
}

// warning is the status warning for a record that could not be written.
func (l *ledger) warning() string {
	if l == nil {
		return "" // a Daemon built by a test without New
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writeErr == nil {
		return ""
	}
	return fmt.Sprintf("the ownership record %s cannot be written (%v): keys installed since its last write would look foreign after a restart (kept, not deleted; aoctl adopt hands them back)", l.path, l.writeErr)
}

// procOwner is the ledger's Ownership for one speaker process's sockets.
type procOwner struct {
	l *ledger
	p procID
}

func (o *procOwner) Owns(k tcpao.KeyInfo) bool { return o.l.owns(o.p, k) }

var _ rotator.Claimer = (*procOwner)(nil)

// Claim records k, a desired key found in place on a socket of the
// process, as aokeyd's unless it is already (rotator.Claimer).
func (o *procOwner) Claim(k tcpao.KeyInfo) {
	o.l.mu.Lock()
	defer o.l.mu.Unlock()
	ok := ownKeyOf(o.p, k.KeyRef, k.Fingerprint)
	if _, found := o.l.keys[ok]; !found {
		o.l.recordLocked(ok, 0, false)
	}
}

// ownedSocket is a socket of the speaker as the rotator writes it: every
// key added on it is recorded as aokeyd's.
type ownedSocket struct {
	tcpao.Socket
	l      *ledger
	p      procID
	cookie uint64
}

func (s ownedSocket) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	err := s.Socket.AddKey(k, o)
	if err == nil {
		s.l.record(s.p, s.cookie, k.KeyRef, k.Secret.Fingerprint(), false)
	}
	return err
}

// BatchKeys keeps the inner socket's single borrow, recording the adds
// made in it.
func (s ownedSocket) BatchKeys(f func(tcpao.Socket) error) error {
	return tcpao.Batch(s.Socket, func(bs tcpao.Socket) error {
		return f(ownedSocket{Socket: bs, l: s.l, p: s.p, cookie: s.cookie})
	})
}

// AddMD5, DelMD5 and MD5Keys pass the inner socket's TCP-MD5 side
// through (TCP-MD5 keys are recorded by fingerprint in the key source,
// not in the ledger: see md5.go).
func (s ownedSocket) AddMD5(k tcpao.MD5Key) error { return tcpao.AddMD5(s.Socket, k) }

func (s ownedSocket) DelMD5(r tcpao.MD5Ref) error { return tcpao.DelMD5(s.Socket, r) }

func (s ownedSocket) MD5Keys() ([]tcpao.MD5Info, error) { return tcpao.ReadMD5(s.Socket) }

// ArmPeerProbe and EndPeerProbe pass the inner socket's keepalive probe
// through (tcpao.PeerProber): they add no key.
func (s ownedSocket) ArmPeerProbe() (tcpao.PeerProbe, error) { return tcpao.ArmPeerProbe(s.Socket) }

func (s ownedSocket) EndPeerProbe(p tcpao.PeerProbe) error { return tcpao.EndPeerProbe(s.Socket, p) }
