//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Config sets up Run.
type Config struct {
	// Sizes are the peer counts N, Reps the repetitions at each (same
	// length; a missing entry means 1).
	Sizes []int
	Reps  []int
	// Sample is how many peers get synchronous deletes (default 256).
	Sample int
	// Turns is how many rotations the raw loop and SyncListener take in
	// turns on one listener at the largest N (turnsRun; 0: none).
	Turns int
	// PeersPerBatch is SyncListener's batch size (default 64).
	PeersPerBatch int
	// Algorithm of every MKT (default hmac(sha1)).
	Algorithm tcpao.Algorithm
	// PlanSizes are the fleet sizes of the planner sweep.
	PlanSizes []int
	// Rand supplies key bytes; Now is the clock every span is measured
	// with (default time.Now).
	Rand io.Reader
	Now  func() time.Time
	// OptMemPath is net.core.optmem_max (default tcpao.OptMemPath); Run
	// raises it for the large N and puts the old value back.
	OptMemPath string
	// RevokePeers is the emergency revoke's fleet size (0: not run);
	// DaemonPeers and DaemonKeys the daemon memory and idle-pass run's (0:
	// not run), IdlePasses how many idle reconcile passes it averages over
	// (default 100). Aoctl is the aoctl binary the revoke executes
	// (default: aoctl in PATH).
	RevokePeers int
	DaemonPeers int
	DaemonKeys  int
	IdlePasses  int
	Aoctl       string
	// CPUProfile, when set, receives a CPU profile of aokeyd's rotation at
	// the largest N.
	CPUProfile io.Writer
	// PassProfile, when set, receives a CPU profile of the daemon run's idle
	// reconcile passes; SteadyProfile one of its steady window (the daemon
	// as operators run it).
	PassProfile   io.Writer
	SteadyProfile io.Writer
	// HeapProfile, when set, receives the daemon run's heap profile where
	// its memory is measured (the daemon up over the fleet, after a GC).
	HeapProfile io.Writer
	Logger      *slog.Logger
}

func (c *Config) defaults() error {
	if len(c.Sizes) == 0 {
		return errors.New("bench: config: no sizes")
	}
	if c.Rand == nil {
		return errors.New("bench: config: no randomness (Rand)")
	}
	if c.Sample <= 0 {
		c.Sample = 256
	}
	if c.Turns > 250 {
		return errors.New("bench: config: more than 250 turns (each takes the next KeyID)")
	}
	if c.PeersPerBatch <= 0 {
		c.PeersPerBatch = 64
	}
	if c.Algorithm == "" {
		c.Algorithm = tcpao.HMACSHA1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.OptMemPath == "" {
		c.OptMemPath = tcpao.OptMemPath
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.DaemonKeys <= 0 {
		c.DaemonKeys = 4
	}
	if c.IdlePasses <= 0 {
		c.IdlePasses = 100
	}
	return nil
}

type runner struct {
	cfg    Config
	log    *slog.Logger
	limit  int // optmem_max while measuring
	maxN   int
	secret []byte // scratch for key bytes, zeroed after each use
}

// Run measures everything in the real TCP-AO kernel. It needs root (to
// raise net.core.optmem_max) and CONFIG_TCP_AO.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	r := &runner{cfg: cfg, log: cfg.Logger, secret: make([]byte, 20)}
	defer clear(r.secret)
	start := cfg.Now()
	res := &Results{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Algorithm: string(cfg.Algorithm),
		PeersPerBatch: cfg.PeersPerBatch, Started: start.UTC()}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		res.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	for _, n := range cfg.Sizes {
		r.maxN = max(r.maxN, n)
	}
	def, err := tcpao.OptMemMax()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if res.OptMem, err = r.optMemBoundary(ctx, def); err != nil {
		return nil, err
	}
	// Room for the largest listener twice over (a rotation holds a batch
	// of extra keys) plus slack, never below the default.
	// The daemon fleets' listeners hold every peer's keys.
	most := max(2*r.maxN, 2*2*cfg.RevokePeers, 2*cfg.DaemonPeers*cfg.DaemonKeys)
	r.limit = max(def, tcpao.OptMemNeeded(most, cfg.Algorithm)+1<<20)
	res.OptMem.Raised = r.limit
	if err := r.writeOptMem(r.limit); err != nil {
		return nil, err
	}
	defer func() {
		if err := r.writeOptMem(def); err != nil {
			r.log.Warn("restore optmem_max", "err", err)
		}
	}()
	// Warm-up, not recorded: first-use costs (crypto transforms, page
	// faults, heap growth) would otherwise land on the first measured run.
	warm := min(256, cfg.Sizes[0])
	for _, f := range []func(context.Context, int, int, *Size, *Results) error{r.rawRun, r.aokeydRun} {
		if err := f(ctx, warm, -1, &Size{}, res); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	for i, n := range cfg.Sizes {
		reps := 1
		if i < len(cfg.Reps) && cfg.Reps[i] > 0 {
			reps = cfg.Reps[i]
		}
		s := Size{N: n}
		for rep := range reps {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			// Alternate who goes first, so drift favours neither.
			first, second := r.rawRun, r.aokeydRun
			if rep%2 == 1 {
				first, second = second, first
			}
			for _, f := range []func(context.Context, int, int, *Size, *Results) error{first, second} {
				settle(n)
				if err := f(ctx, n, rep, &s, res); err != nil {
					return nil, err
				}
			}
		}
		if n == r.maxN && cfg.Turns > 0 {
			settle(n)
			if err := r.turnsRun(ctx, n, &s); err != nil {
				return nil, err
			}
		}
		res.Sizes = append(res.Sizes, s)
	}
	if res.SODomainNs, err = soDomainCost(ctx); err != nil {
		return nil, err
	}
	if err := r.daemonItems(ctx, res); err != nil {
		return nil, err
	}
	if len(cfg.PlanSizes) > 0 {
		r.log.Info("planner sweep", "sizes", cfg.PlanSizes)
		if res.Planner, err = PlanSweep(cfg.PlanSizes); err != nil {
			return nil, err
		}
	}
	res.Elapsed = int64(cfg.Now().Sub(start))
	return res, nil
}

func (r *runner) writeOptMem(v int) error {
	if err := os.WriteFile(r.cfg.OptMemPath, []byte(strconv.Itoa(v)+"\n"), 0o644); err != nil {
		return fmt.Errorf("bench: set net.core.optmem_max=%d: %w", v, err)
	}
	return nil
}

// listener is a fresh IPv4 listening socket on loopback.
type listener struct {
	ln   *net.TCPListener
	rc   syscall.RawConn
	sock tcpao.Socket
}

func listen(ctx context.Context) (*listener, error) {
	lc := net.ListenConfig{KeepAlive: -1} // accepted harness sockets send no keepalives (see fleet connect)
	lc.SetMultipathTCP(false)             // keys go on it: plain TCP (tcpao.ErrMPTCP)
	l, err := lc.Listen(ctx, "tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: listen: %w", err)
	}
	ln := l.(*net.TCPListener)
	rc, err := ln.SyscallConn()
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("bench: listener raw conn: %w", err)
	}
	return &listener{ln: ln, rc: rc, sock: tcpao.New(rc)}, nil
}

func (l *listener) close() { l.ln.Close() }

// settle lets the previous run's leftovers finish before the next one is
// timed: closing a listener and every del_async free their keys in RCU
// callbacks, which run in softirq on whatever the next run is doing, and
// the Go heap of the previous run is collected here, not in the middle of
// the next.
func settle(n int) {
	runtime.GC()
	time.Sleep(500*time.Millisecond + time.Duration(n)*100*time.Microsecond)
}

// timing is one timed run (raw, syncTimed): wall time, the system CPU of
// the one thread that made the calls (the kernel time, read with
// getrusage(RUSAGE_THREAD)), both in ns, and the Go collector cycles that
// ended meanwhile.
type timing struct{ el, sys, gc int64 }

// raw runs the pre-built steps on the listener's descriptor and times only
// the system calls.
func (r *runner) raw(l *listener, steps []rawStep) (t timing, err error) {
	var rerr error
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cerr := l.rc.Control(func(fd uintptr) {
		s0, g0 := threadSys(), gcCycles()
		t0 := r.cfg.Now()
		_, rerr = rawRun(int(fd), steps)
		t.el = int64(r.cfg.Now().Sub(t0))
		t.sys, t.gc = threadSys()-s0, gcCycles()-g0
	})
	wipeRaw(steps)
	if cerr != nil {
		return timing{}, fmt.Errorf("bench: raw conn control: %w", cerr)
	}
	return t, rerr
}

// syncTimed runs SyncListener and times it as raw times the raw loop.
func (r *runner) syncTimed(l *listener, d rotator.Desired, opts rotator.ListenerOptions) (t timing, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s0, g0 := threadSys(), gcCycles()
	t0 := r.cfg.Now()
	_, err = rotator.SyncListener(l.sock, d, opts)
	t.el, t.sys = int64(r.cfg.Now().Sub(t0)), threadSys()-s0
	t.gc = gcCycles() - g0
	return t, err
}

// gcCycles is how many Go collector cycles have ended so far.
func gcCycles() int64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// threadSys is the calling thread's system CPU time so far, in ns (the
// caller holds its OS thread). The guest accounts it by tick (250 Hz):
// exact enough over the seconds a rotation at thousands of peers takes.
func threadSys() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return ru.Stime.Nano()
}

// rawSteps appends the raw loop's pre-built requests for peers, in order:
// for each an add of IDs to/to and, unless from is 0, a del_async of its
// key with IDs from/from.
func (r *runner) rawSteps(steps []rawStep, peers []netip.Prefix, from, to uint8) ([]rawStep, error) {
	for _, p := range peers {
		b, err := r.fill()
		if err != nil {
			return steps, err
		}
		steps = append(steps, rawAddStep(p, string(r.cfg.Algorithm), to, to, b))
		clear(b)
		if from != 0 {
			steps = append(steps, rawDelStep(p, from, from, true))
		}
	}
	return steps, nil
}

// peersUp are peers 0 to n-1.
func peersUp(n int) []netip.Prefix {
	out := make([]netip.Prefix, n)
	for i := range out {
		out[i] = peer(i)
	}
	return out
}

// peer is the i-th peer's /32.
func peer(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
}

func (r *runner) fill() ([]byte, error) {
	if _, err := io.ReadFull(r.cfg.Rand, r.secret); err != nil {
		return nil, fmt.Errorf("bench: key bytes: %w", err)
	}
	return r.secret, nil
}

// desired is N peers with one key each, IDs id/id.
func (r *runner) desired(n int, id uint8) (rotator.Desired, error) {
	d := rotator.Desired{Socket: "bench", Kind: rotator.Listening, Keys: make([]rotator.DesiredKey, n)}
	for i := range n {
		b, err := r.fill()
		if err != nil {
			zeroDesired(d)
			return d, err
		}
		d.Keys[i] = rotator.DesiredKey{Key: tcpao.Key{KeyRef: tcpao.KeyRef{Peer: peer(i), SendID: id, RecvID: id},
			Algorithm: r.cfg.Algorithm, Secret: tcpao.NewSecret(b)}}
		clear(b)
	}
	return d, nil
}

func zeroDesired(d rotator.Desired) {
	for _, k := range d.Keys {
		k.Secret.Zero()
	}
}

// verify checks that the listener holds exactly n keys, all with SendID id.
func verify(l *listener, n int, id uint8, what string) error {
	keys, err := l.sock.Keys(tcpao.KeyFilter{})
	if err != nil {
		return fmt.Errorf("bench: %s: verify: %w", what, err)
	}
	bad := 0
	for _, k := range keys {
		if k.SendID != id {
			bad++
		}
	}
	if len(keys) != n || bad != 0 {
		return fmt.Errorf("bench: %s: listener holds %d keys (%d with another SendID than %d), want %d", what, len(keys), bad, id, n)
	}
	return nil
}

// rawInstalled is a fresh listener with peers 0 to n-1's keys (IDs 1/1)
// installed by the raw loop (timed), and the loop's steps for reuse.
func (r *runner) rawInstalled(ctx context.Context, n int, what string) (*listener, []rawStep, timing, error) {
	l, err := listen(ctx)
	if err != nil {
		return nil, nil, timing{}, err
	}
	steps, err := r.rawSteps(nil, peersUp(n), 0, 1)
	var t timing
	if err == nil {
		if t, err = r.raw(l, steps); err != nil {
			err = fmt.Errorf("bench: %s N=%d: %w", what, n, err)
		}
	}
	if err == nil {
		err = verify(l, n, 1, what)
	}
	if err != nil {
		l.close()
		return nil, nil, timing{}, err
	}
	return l, steps, t, nil
}

// rawRun: install N keys with a bare loop, then rotate them in the best
// raw order.
func (r *runner) rawRun(ctx context.Context, n, rep int, s *Size, _ *Results) error {
	l, steps, t, err := r.rawInstalled(ctx, n, "raw install")
	if err != nil {
		return err
	}
	defer l.close()
	s.InstallRaw = append(s.InstallRaw, t.el)
	r.log.Info("raw install", "n", n, "rep", rep, "took", time.Duration(t.el))

	// Best raw rotation: per peer add-new then del_async-old, most recently
	// installed peer first: the kernel adds at the head of its key list and
	// a delete walks from the head, so each old key is found early.
	down := slices.Clone(peersUp(n))
	slices.Reverse(down)
	if steps, err = r.rawSteps(steps[:0], down, 1, 2); err != nil {
		return err
	}
	settle(n) // as before aokeyd's rotation
	if t, err = r.raw(l, steps); err != nil {
		return fmt.Errorf("bench: raw rotate N=%d: %w", n, err)
	}
	if err := verify(l, n, 2, "raw rotate"); err != nil {
		return err
	}
	s.RotateRaw, s.RotateRawSys = append(s.RotateRaw, t.el), append(s.RotateRawSys, t.sys)
	s.RotateRawGC = append(s.RotateRawGC, t.gc)
	r.log.Info("raw rotate, newest installed first", "n", n, "rep", rep, "took", time.Duration(t.el))

	// The same rotation (IDs 2 to 3) in the other order: the previous pass
	// processed peers N-1..0, so peer N-1's key is now the oldest and the
	// same peer order retires the OLDEST installed first, each delete
	// walking past every other old key. Same listener, same list length.
	if steps, err = r.rawSteps(steps[:0], down, 2, 3); err != nil {
		return err
	}
	if t, err = r.raw(l, steps); err != nil {
		return fmt.Errorf("bench: raw rotate oldest first N=%d: %w", n, err)
	}
	if err := verify(l, n, 3, "raw rotate oldest first"); err != nil {
		return err
	}
	s.RotateOldestFirst = append(s.RotateOldestFirst, t.el)
	r.log.Info("raw rotate, oldest installed first", "n", n, "rep", rep, "took", time.Duration(t.el))
	return nil
}

// aokeydRun: SyncListener from empty, SyncListener to new IDs, and (first
// repetition only) the phase split and the sync-versus-async deletes.
func (r *runner) aokeydRun(ctx context.Context, n, rep int, s *Size, res *Results) error {
	l, err := listen(ctx)
	if err != nil {
		return err
	}
	defer l.close()
	opts := rotator.ListenerOptions{PeersPerBatch: r.cfg.PeersPerBatch, OptMemMax: func() (int, error) { return r.limit, nil }}
	d, err := r.desired(n, 1)
	if err != nil {
		return err
	}
	t0 := r.cfg.Now()
	_, err = rotator.SyncListener(l.sock, d, opts)
	el := int64(r.cfg.Now().Sub(t0))
	zeroDesired(d)
	if err != nil {
		return fmt.Errorf("bench: aokeyd install N=%d: %w", n, err)
	}
	if err := verify(l, n, 1, "aokeyd install"); err != nil {
		return err
	}
	s.InstallAokeyd = append(s.InstallAokeyd, el)
	r.log.Info("aokeyd install", "n", n, "rep", rep, "took", time.Duration(el))

	if d, err = r.desired(n, 2); err != nil {
		return err
	}
	// The install's garbage collected before the rotation is timed, as
	// every timed run starts (settle): at 16,384 peers the rotation right
	// after the install cost the kernel 50.5 s against the raw loop's
	// 36.2 s (kernel_ratio 1.39), settled 1.16 and 1.07 in two other
	// boots (the cross pass: 1.10 and 1.24 on lists either built).
	settle(n)
	profile := r.cfg.CPUProfile != nil && n == r.maxN && rep == 0
	if profile {
		if err := pprof.StartCPUProfile(r.cfg.CPUProfile); err != nil {
			return fmt.Errorf("bench: cpu profile: %w", err)
		}
	}
	t, err := r.syncTimed(l, d, opts)
	if profile {
		pprof.StopCPUProfile()
	}
	zeroDesired(d)
	if err != nil {
		return fmt.Errorf("bench: aokeyd rotate N=%d: %w", n, err)
	}
	if err := verify(l, n, 2, "aokeyd rotate"); err != nil {
		return err
	}
	s.RotateAokeyd, s.RotateAokeydSys = append(s.RotateAokeyd, t.el), append(s.RotateAokeydSys, t.sys)
	s.RotateAokeydGC = append(s.RotateAokeydGC, t.gc)
	r.log.Info("aokeyd rotate", "n", n, "rep", rep, "took", time.Duration(t.el))
	if rep != 0 {
		return nil
	}
	if err := r.aokeydOldestFirst(l, n, s); err != nil {
		return err
	}
	if n == r.maxN {
		if err := r.crossRun(ctx, n, s); err != nil {
			return err
		}
	}
	return r.deletes(l, n, res)
}

// aokeydOldestFirst times SyncListener's steps with the peers of its batches
// in reverse (oldest installed first, the order before ListenerBatches
// followed the kernel's list), rotating the listener from IDs 2 to 4.
func (r *runner) aokeydOldestFirst(l *listener, n int, s *Size) error {
	d, err := r.desired(n, 4)
	if err != nil {
		return err
	}
	defer zeroDesired(d)
	t0 := r.cfg.Now()
	obs, err := rotator.Observe(l.sock, rotator.ReadFull)
	if err != nil {
		return fmt.Errorf("bench: observe: %w", err)
	}
	sp := rotator.PlanSocket(d, obs)
	batches := reversePeers(rotator.ListenerBatches(sp, 1), r.cfg.PeersPerBatch)
	if _, err := rotator.CheckOptMem(d.Socket, obs, batches, r.limit); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, b := range batches {
		if _, err := rotator.Apply(l.sock, b); err != nil {
			return fmt.Errorf("bench: aokeyd oldest first N=%d: %w", n, err)
		}
	}
	el := int64(r.cfg.Now().Sub(t0))
	if err := verify(l, n, 4, "aokeyd rotate oldest first"); err != nil {
		return err
	}
	s.RotateAokeydOldestFirst = append(s.RotateAokeydOldestFirst, el)
	r.log.Info("aokeyd rotate, oldest installed first", "n", n, "took", time.Duration(el))
	return nil
}

// reversePeers takes one-peer batches, reverses their order and regroups
// them by per peers.
func reversePeers(one [][]rotator.Op, per int) [][]rotator.Op {
	var out [][]rotator.Op
	var cur []rotator.Op
	k := 0
	for i := len(one) - 1; i >= 0; i-- {
		if k == per {
			out, cur, k = append(out, cur), nil, 0
		}
		cur = append(cur, one[i]...)
		k++
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// plan runs SyncListener's steps one by one and returns the batches.
func (r *runner) plan(l *listener, d rotator.Desired, ph *Phases) ([][]rotator.Op, int, error) {
	t0 := r.cfg.Now()
	obs, err := rotator.Observe(l.sock, rotator.ReadFull)
	t1 := r.cfg.Now()
	if err != nil {
		return nil, 0, fmt.Errorf("bench: observe: %w", err)
	}
	sp := rotator.PlanSocket(d, obs)
	t2 := r.cfg.Now()
	if len(sp.Blocked) > 0 {
		return nil, 0, fmt.Errorf("bench: plan blocked: %s", sp.Blocked[0].Detail)
	}
	batches := rotator.ListenerBatches(sp, r.cfg.PeersPerBatch)
	t3 := r.cfg.Now()
	if ph == nil {
		// Untimed pass: the optmem check changes nothing in the plan and
		// is quadratic in keys today, so it is not repeated.
		return batches, 0, nil
	}
	peak, err := rotator.CheckOptMem(d.Socket, obs, batches, r.limit)
	t4 := r.cfg.Now()
	if err != nil {
		return nil, 0, fmt.Errorf("bench: %w", err)
	}
	ph.Observe, ph.Plan, ph.Batches, ph.CheckOptMem = int64(t1.Sub(t0)), int64(t2.Sub(t1)), int64(t3.Sub(t2)), int64(t4.Sub(t3))
	return batches, peak, nil
}

// applyTimed applies ops one at a time and returns the add and delete
// durations in plan order.
func (r *runner) applyTimed(l *listener, ops []rotator.Op) (adds, dels []int64, err error) {
	for i := range ops {
		t0 := r.cfg.Now()
		_, err := rotator.Apply(l.sock, ops[i:i+1])
		el := int64(r.cfg.Now().Sub(t0))
		if err != nil {
			return nil, nil, fmt.Errorf("bench: %w", err)
		}
		switch ops[i].Kind {
		case rotator.OpAdd:
			adds = append(adds, el)
		case rotator.OpDel:
			dels = append(dels, el)
		}
	}
	return adds, dels, nil
}
