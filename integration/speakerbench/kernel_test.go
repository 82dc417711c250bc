package speakerbench

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
	"golang.org/x/sys/unix"
)

// sockView is what the kernel says of one of gobgpd's established sockets.
type sockView struct {
	current uint8
	haveCur bool
	ids     map[uint8]bool // SendIDs of the keys on it
	// pktBad is the socket's TCP-AO bad-MAC count, keyBad the keys' (by
	// SendID) that have one.
	pktBad uint64
	keyBad map[uint8]uint64
	// at is when this socket's read returned: a peer is seen in a state at
	// the read of its own sockets, not at the end of a read of every
	// pending peer's (a second at N=512, where the guest is busy).
	at time.Time
}

// kernelView is gobgpd's sockets read straight from the kernel (pidfd_getfd
// duplicates, TCP_AO_INFO and TCP_AO_GET_KEYS), independently of aokeyd.
type kernelView struct {
	est      map[netip.Addr][]sockView       // by the peer's address
	listener map[netip.Prefix]map[uint8]bool // SendIDs of the listener's keys, by their peer prefix
	// listenerBad and listenerKeyNotFound are the listeners' TCP-AO
	// counters (segments to the listening socket: SYNs, and what reaches
	// no established socket).
	listenerBad, listenerKeyNotFound uint64
}

// listenerIDs are the SendIDs of the listener's keys that cover peer: the
// keys of each of its prefixes, looked up by prefix (a scan of every
// prefix for every peer made a read of 512 peers quadratic).
func (kv kernelView) listenerIDs(peer netip.Addr) map[uint8]bool {
	ids := map[uint8]bool{}
	for bits := peer.BitLen(); bits >= 0; bits-- {
		p, err := peer.Prefix(bits)
		if err != nil {
			continue
		}
		for id := range kv.listener[p] {
			ids[id] = true
		}
	}
	return ids
}

// readKernel reads the listeners of gobgpd (or of f.sockPID) and the
// established sockets of the peers in want; with counters, their TCP_AO_INFO counters too (each session's
// pkt_bad). Without, a session costs one TCP_AO_GET_KEYS besides its
// borrow: the bench's reads of hundreds of sessions during a roll share
// the guest's two vCPUs with aokeyd.
func (f *bench) readKernel(want map[netip.Addr]bool, counters, listener bool) (kernelView, error) {
	pid := f.sockPID
	if pid == 0 {
		pid = f.gobgp.PID
	}
	kv := kernelView{est: map[netip.Addr][]sockView{}, listener: map[netip.Prefix]map[uint8]bool{}}
	// One sock_diag socket and gobgpd's descriptor table, kept from read to
	// read (the table is read again when a socket is not in it): the
	// bench's reads share the guest's two vCPUs with aokeyd, and entering
	// gobgpd's namespace and reading a link per descriptor each time cost
	// more than the sockets' own reads.
	if f.diag == nil {
		d, err := sockets.OpenDiag(pid)
		if err != nil {
			return kv, err
		}
		f.diag = d
		f.t.Cleanup(func() { d.Close() })
	}
	d := f.diag
	est, err := d.EstablishedSockets()
	if err != nil {
		return kv, err
	}
	ls, err := d.Listeners()
	if err != nil {
		return kv, err
	}
	fresh := false
	fdOf := func(inode uint64) (int, bool, error) {
		if fd, ok := f.fds[inode]; ok {
			return fd, true, nil
		}
		if fresh {
			return 0, false, nil
		}
		fds, err := sockets.FDTable(pid)
		if err != nil {
			return 0, false, err
		}
		f.fds, fresh = fds, true
		fd, ok := f.fds[inode]
		return fd, ok, nil
	}
	lst := time.Now()
	if !listener {
		ls = nil
	}
	for _, s := range ls {
		fd, ok, err := fdOf(s.Inode)
		if err != nil {
			return kv, err
		}
		if !ok || s.Local.Port() != 179 {
			continue
		}
		ref := sockets.Ref{PID: pid, Inode: s.Inode, Cookie: s.Cookie, FD: fd, Local: s.Local, Remote: s.Remote, Listening: true}
		err = sockets.WithSocket(ref, func(fd int) error {
			// IDs only: a fingerprint is a keyed hash per key, and the
			// listener holds three keys per peer.
			sk := tcpao.FromFD(fd)
			if counters {
				if in, err := sk.Info(); err == nil {
					kv.listenerBad += in.PktBad
					kv.listenerKeyNotFound += in.PktKeyNotFound
				}
			}
			ks, err := sk.Keys(tcpao.KeyFilter{SkipFingerprint: true})
			for _, k := range ks {
				a := k.Peer
				if a.Addr().Is4In6() {
					a = netip.PrefixFrom(a.Addr().Unmap(), a.Bits()-96)
				}
				a = a.Masked() // as listenerIDs looks it up
				if kv.listener[a] == nil {
					kv.listener[a] = map[uint8]bool{}
				}
				kv.listener[a][k.SendID] = true
			}
			return err
		})
		if err != nil && !errors.Is(err, sockets.ErrStale) {
			return kv, fmt.Errorf("listener %s: %w", ref, err)
		}
	}
	f.listenerTime += time.Since(lst)
	for _, s := range est {
		peer := s.Remote.Addr().Unmap()
		if !want[peer] {
			continue
		}
		fd, ok, err := fdOf(s.Inode)
		if err != nil {
			return kv, err
		}
		if !ok {
			continue
		}
		ref := sockets.Ref{PID: pid, Inode: s.Inode, Cookie: s.Cookie, FD: fd, Local: s.Local, Remote: s.Remote}
		var v sockView
		err = sockets.WithSocket(ref, func(fd int) error {
			sk := tcpao.FromFD(fd)
			if counters {
				in, err := sk.Info()
				if err != nil {
					return err
				}
				v.pktBad = in.PktBad
			}
			// One TCP_AO_GET_KEYS: its keys carry the Current_key flag.
			ks, err := sk.Keys(tcpao.KeyFilter{SkipFingerprint: true})
			v.ids = map[uint8]bool{}
			for _, k := range ks {
				v.ids[k.SendID] = true
				if k.IsCurrent {
					v.current, v.haveCur = k.SendID, true
				}
				if k.PktBad > 0 {
					if v.keyBad == nil {
						v.keyBad = map[uint8]uint64{}
					}
					v.keyBad[k.SendID] = k.PktBad
				}
			}
			return err
		})
		if errors.Is(err, sockets.ErrStale) {
			continue // closed meanwhile: a flap, which the session checks count
		}
		if err != nil {
			return kv, fmt.Errorf("socket %s: %w", ref, err)
		}
		v.at = time.Now()
		kv.est[peer] = append(kv.est[peer], v)
	}
	return kv, nil
}

// badSockets says which of gobgpd's sessions counted segments that failed
// TCP-AO verification (their pkt_bad, cumulative, and their keys'), for
// the log of a phase where TcpExt TCPAOBad rose: at most limit of them.
func (f *bench) badSockets(limit int) string {
	want := map[netip.Addr]bool{}
	for _, p := range f.all() {
		want[p] = true
	}
	kv, err := f.readKernel(want, true, true)
	if err != nil {
		return err.Error()
	}
	var out []string
	n := 0
	for _, p := range f.all() {
		for _, v := range kv.est[p] {
			if v.pktBad == 0 {
				continue
			}
			n++
			if len(out) < limit {
				out = append(out, fmt.Sprintf("%s pkt_bad=%d keys(send id: pkt_bad)=%v current=%d", p, v.pktBad, v.keyBad, v.current))
			}
		}
	}
	return fmt.Sprintf("listener pkt_bad=%d key_not_found=%d; %d sessions with pkt_bad > 0: %s",
		kv.listenerBad, kv.listenerKeyNotFound, n, strings.Join(out, "; "))
}

// strayConnections lists, from ss, the TCP sockets to or from port 179 in
// either namespace that are neither established nor listening (at most
// limit lines of each): a connection one side closed while the other
// still sends on it, whose segments reach A's listener and fail TCP-AO
// verification there (the listener cannot know the connection's ISNs).
func (f *bench) strayConnections(limit int) string {
	var out []string
	for _, side := range []struct {
		name string
		ns   *netns.NS
	}{{"A", f.a}, {"B", f.b}} {
		lines, err := port179(side.ns, false)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: ss: %v", side.name, err))
			continue
		}
		shown := lines[:min(len(lines), limit)]
		out = append(out, fmt.Sprintf("%s: %d sockets on port 179 neither established nor listening:\n\t%s", side.name, len(lines), strings.Join(shown, "\n\t")))
	}
	return strings.Join(out, "\n")
}

// port179 lists, from ss in ns, the TCP sockets to or from port 179 that
// are neither established nor listening; closing leaves out TIME-WAIT
// ones too (they send nothing of their own).
func port179(ns *netns.NS, closing bool) ([]string, error) {
	args := []string{"ss", "-tanoH", "exclude", "established", "exclude", "listening"}
	if closing {
		args = append(args, "exclude", "time-wait")
	}
	text, err := ns.Run(append(args, "( sport = :179 or dport = :179 )")...)
	if err != nil {
		return nil, err
	}
	if text = strings.TrimSpace(text); text == "" {
		return nil, nil
	}
	return strings.Split(text, "\n"), nil
}

// pred is a state of one peer's sockets: of each of its established
// sockets (est; nil: none needed) and of the listener's keys for it (lis;
// nil: any).
type pred struct {
	est func(sockView) bool
	lis func(map[uint8]bool) bool
}

// holds reports whether peer's sockets satisfy p (with est, that it has an
// established socket at all).
func (kv kernelView) holds(peer netip.Addr, p pred) bool {
	if p.est != nil {
		vs := kv.est[peer]
		if len(vs) == 0 {
			return false
		}
		for _, v := range vs {
			if !p.est(v) {
				return false
			}
		}
	}
	return kv.listenerHolds(peer, p)
}

// seenAt is when peer's state in kv was read: the latest read of its
// sockets, which follows the read of the listener in the same kernel read
// (when the listener was not read again, its last reading stands: the
// rolls and the revoke change its keys for a peer once, for good); end
// when kv holds no socket of peer's (the read's end).
func (kv kernelView) seenAt(peer netip.Addr, end time.Time) time.Time {
	var at time.Time
	for _, v := range kv.est[peer] {
		if v.at.After(at) {
			at = v.at
		}
	}
	if at.IsZero() {
		return end
	}
	return at
}

// listenerHolds reports whether the listener's keys for peer satisfy p.
func (kv kernelView) listenerHolds(peer netip.Addr, p pred) bool {
	return p.lis == nil || p.lis(kv.listenerIDs(peer))
}

// pollUntil reads the kernel about the peers not yet done until each is,
// and returns when each was first seen done (since t0), and when first
// seen in each state of marks (a peer seen done is in each at the latest).
// A peer is seen done (or in a mark's state) when its own sockets were
// read (seenAt), not when the read of every remaining peer's ended; the
// answers' resolution is the time between two reads of a peer's sockets.
//
// The reads run on an OS thread of their own at nice 19 (lowPriority): a
// read of every fleet session, back to back through a roll, took half of
// one of the guest's two vCPUs at N=256 (2.0 s over a 4.2 s roll, as much
// as aokeyd's whole roll), a load on the system under test that a single
// peer's roll does not have. At nice 19 the reads take the CPU the routers
// and aokeyd leave: when those want it all, a read comes later, and a peer
// is seen done later than it was, never earlier.
func (f *bench) pollUntil(peers []netip.Addr, t0 time.Time, timeout time.Duration, what string,
	ok pred, marks map[string]pred) (at map[netip.Addr]time.Duration, markAt map[string]map[netip.Addr]time.Duration, err error) {
	lowPriority(func() { at, markAt, err = f.poll(peers, t0, timeout, what, ok, marks) })
	return at, markAt, err
}

// lowPriority runs fn on an OS thread of its own at nice 19, which no other
// goroutine runs on and which ends with fn (it is never unlocked), so that
// nothing else of the bench's, nor a process it starts (aoctl), runs at
// that priority.
func lowPriority(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19) // best effort: the reads still run at 0
		fn()
	}()
	<-done
}

func (f *bench) poll(peers []netip.Addr, t0 time.Time, timeout time.Duration, what string,
	ok pred, marks map[string]pred) (at map[netip.Addr]time.Duration, markAt map[string]map[netip.Addr]time.Duration, err error) {
	pending := map[netip.Addr]bool{}
	for _, p := range peers {
		pending[p] = true
	}
	at, markAt = map[netip.Addr]time.Duration{}, map[string]map[netip.Addr]time.Duration{}
	for m := range marks {
		markAt[m] = map[netip.Addr]time.Duration{}
	}
	deadline := time.Now().Add(timeout)
	// The listener is read while a pending peer's listener part (of ok, or
	// of a mark not seen yet) does not hold; after that its last reading
	// stands in (the rolls only ever take a key off it, or put one on, for
	// good). At N=256 the listener, three keys per peer, was 115 of the
	// 144 ms a read of the kernel took.
	readListener := true
	var listener map[netip.Prefix]map[uint8]bool
	for {
		st := time.Now()
		kv, err := f.readKernel(pending, false, readListener)
		now := time.Now()
		f.reads++
		f.readTime += now.Sub(st)
		if err != nil {
			return at, markAt, err
		}
		if readListener {
			listener = kv.listener
		} else {
			kv.listener = listener
		}
		readListener = false
		for p := range pending {
			done := kv.holds(p, ok)
			seen := kv.seenAt(p, now).Sub(t0)
			for m, mp := range marks {
				if _, was := markAt[m][p]; !was && (done || kv.holds(p, mp)) {
					markAt[m][p] = seen
				}
			}
			if done {
				at[p] = seen
				delete(pending, p)
				continue
			}
			readListener = readListener || !kv.listenerHolds(p, ok)
			for m, mp := range marks {
				if _, seen := markAt[m][p]; !seen && !kv.listenerHolds(p, mp) {
					readListener = true
				}
			}
		}
		if len(pending) == 0 {
			return at, markAt, nil
		}
		if now.After(deadline) {
			var one netip.Addr
			for p := range pending {
				one = p
				break
			}
			return at, markAt, fmt.Errorf("%s: %d of %d peers not done after %v (e.g. %s: sockets %+v, listener ids %v)",
				what, len(pending), len(peers), timeout, one, kv.est[one], kv.listenerIDs(one))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rolled: the old key gone from the peer's sockets and from the listener's
// keys for it, the new key current.
func rolled(oldID, newID uint8) pred {
	return pred{est: func(v sockView) bool { return !v.ids[oldID] && v.ids[newID] && v.haveCur && v.current == newID },
		lis: func(l map[uint8]bool) bool { return !l[oldID] && l[newID] }}
}

// switched: the new key current on the peer's socket.
func switched(newID uint8) pred {
	return pred{est: func(v sockView) bool { return v.haveCur && v.current == newID }}
}

// carries: the peer's sockets and the listener hold exactly the keys ids,
// the socket sending with current.
func carries(current uint8, ids ...uint8) pred {
	same := func(m map[uint8]bool) bool {
		if len(m) != len(ids) {
			return false
		}
		for _, id := range ids {
			if !m[id] {
				return false
			}
		}
		return true
	}
	return pred{est: func(v sockView) bool { return same(v.ids) && v.haveCur && v.current == current }, lis: same}
}

// clean: the key id gone from the peer's sockets and from the listener.
func clean(id uint8) pred {
	return pred{est: func(v sockView) bool { return !v.ids[id] }, lis: func(l map[uint8]bool) bool { return !l[id] }}
}

// socketRolled: the established socket alone rolled (old key gone, new
// current); listenerRolled: the listener's keys for the peer alone.
func socketRolled(oldID, newID uint8) pred {
	return pred{est: func(v sockView) bool { return !v.ids[oldID] && v.haveCur && v.current == newID }}
}

func listenerRolled(oldID, newID uint8) pred {
	return pred{lis: func(l map[uint8]bool) bool { return !l[oldID] && l[newID] }}
}

// quantile is the q-quantile of the times (0: the first, 1: the last).
func quantile(at map[netip.Addr]time.Duration, q float64) time.Duration {
	if len(at) == 0 {
		return 0
	}
	ds := make([]time.Duration, 0, len(at))
	for _, d := range at {
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[int(q*float64(len(ds)-1)+0.5)]
}

// last is the latest of the times.
func last(at map[netip.Addr]time.Duration) time.Duration {
	var m time.Duration
	for _, d := range at {
		m = max(m, d)
	}
	return m
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// stuck describes up to limit peers whose session is not up: gobgpd's and
// BIRD's view of it, the keys gobgpd's listener holds for it (IDs and
// counters, from the kernel) and both ends' sockets to it (ss), for a
// set-up that did not finish.
func (f *bench) stuck(limit int) string {
	ss, err := f.sessions()
	if err != nil {
		return "sessions: " + err.Error()
	}
	// gobgpd's listeners' keys, read once (thousands of them).
	type lisKey struct {
		local netip.AddrPort
		k     tcpao.KeyInfo
	}
	var lisKeys []lisKey
	var lisErrs []string
	lis, err := sockets.System{}.Listeners(f.gobgp.PID, 179)
	if err != nil {
		lisErrs = append(lisErrs, fmt.Sprintf("listeners: %v", err))
	}
	for _, ref := range lis {
		_ = sockets.System{}.With(ref, func(fd int) error {
			ks, err := tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true})
			for _, k := range ks {
				lisKeys = append(lisKeys, lisKey{ref.Local, k})
			}
			if err != nil {
				lisErrs = append(lisErrs, fmt.Sprintf("listener %s: %v", ref.Local, err))
			}
			return nil
		})
	}
	var out []string
	for _, p := range f.all() {
		if s, ok := ss[p]; !ok || s.up || len(out) >= limit {
			continue
		}
		if len(out) == 0 {
			out = append(out, f.wire(p, 8*time.Second))
		}
		var b strings.Builder
		fmt.Fprintf(&b, "peer %s: BIRD %s %s\n", p, ss[p].birdState, ss[p].birdSince)
		for _, lk := range lisKeys {
			if k := lk.k; k.Peer.Contains(p) {
				fmt.Fprintf(&b, "  listener %s: key %d/%d %s good=%d bad=%d\n", lk.local, k.SendID, k.RecvID, k.Peer, k.PktGood, k.PktBad)
			}
		}
		for _, e := range lisErrs {
			fmt.Fprintf(&b, "  %s\n", e)
		}
		a, _ := f.a.Run("ss", "-tanoimH", "dst", p.String())
		bs, _ := f.b.Run("ss", "-tanoimH", "src", p.String())
		proto, _ := f.bird.birdc("show", "protocols", "all", protoName(p))
		fmt.Fprintf(&b, "  A's sockets to it:\n%s\n  B's sockets from it:\n%s\n  BIRD:\n%s", a, bs, proto)
		out = append(out, b.String())
	}
	return strings.Join(out, "\n")
}
