package conformance

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Differential runs seeded random operation sequences through two Stacks,
// the model (tcpaotest) and the reference (the real kernel), and compares
// every result and, after every step, the TCP-AO state of every socket: the
// errno (or binding error) of each call, the INFO answer and the GET_KEYS
// list, counters compared as zero / non-zero like the table does.
//
// A sequence makes sockets on IPv4 and IPv6 loopback, listens, connects
// (often a pair with matching keys, sometimes whatever keys it has), and
// exchanges data; it adds keys for IPv4, IPv6 and v4-mapped peers, hosts,
// prefixes and the any address, with VRF ifindexes, bad prefixes, oversized
// MACs and colliding ids; it deletes keys sync and async, with and without
// replacement Current/RNext keys; it sets and reads INFO and reads GET_KEYS
// with every kind of filter, on closed, listening and established sockets.
//
// A connect or exchange that fails closes the sockets involved (their
// retransmissions would change counters behind the sequence's back); a
// connect(2) error does the same.
type Differential struct {
	// New returns fresh stacks for one sequence.
	New func() (model, real Stack, err error)
	// VRF is the ifindex of an L3 master device both stacks know (0: none).
	VRF int
	// Ops is the number of operations per sequence (default 30).
	Ops int
}

// Divergence is the first step of a sequence where the stacks disagree.
type Divergence struct {
	Seed  uint64
	Seq   int
	Steps []string // the steps run, the diverging one last
	Model string
	Real  string
}

func (d *Divergence) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "differential: seed=%d sequence=%d diverged at step %d:\n", d.Seed, d.Seq, len(d.Steps))
	for i, s := range d.Steps {
		fmt.Fprintf(&b, "  %3d %s\n", i+1, s)
	}
	fmt.Fprintf(&b, "model:\n%s\nkernel:\n%s", indent(d.Model), indent(d.Real))
	return b.String()
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

// Sequence runs sequence i of seed; it returns the number of operations run
// and the first divergence, if any. err is a failure of the harness itself.
func (d Differential) Sequence(seed uint64, i int) (ops int, div *Divergence, err error) {
	m, r, err := d.New()
	if err != nil {
		return 0, nil, err
	}
	defer func() {
		err = errors.Join(err, m.Close(), r.Close())
	}()
	n := d.Ops
	if n <= 0 {
		n = 30
	}
	q := &seq{rng: rand.New(rand.NewPCG(seed, uint64(i))), m: m, r: r, vrf: d.VRF}
	for q.ops < n && q.div == nil {
		q.step()
	}
	if q.div != nil {
		q.div.Seed, q.div.Seq = seed, i
	}
	return q.ops, q.div, q.err
}

type sockState int

const (
	stClosed sockState = iota
	stListen
	stEstablished
)

func (s sockState) String() string { return [...]string{"closed", "listen", "established"}[s] }

// dsock is one socket made on both stacks.
type dsock struct {
	id    int
	m, r  tcpao.Socket
	local netip.Addr
	st    sockState
	peer  *dsock // the other end, once established
	// accepted marks the listener's end of a connection.
	accepted bool
}

func (s *dsock) String() string { return fmt.Sprintf("s%d(%s %s)", s.id, s.st, s.local) }
func (s *dsock) v6() bool       { return !s.local.Is4() }

type seq struct {
	rng   *rand.Rand
	m, r  Stack
	vrf   int
	socks []*dsock
	next  int
	steps []string
	res   []string // each step's outcome, for coverage counts
	ops   int
	div   *Divergence
	err   error
}

// Timeouts the reference gets for a connect or an exchange: long when the
// model says it completes, short when the model says the segments are
// dropped (the kernel then retransmits only after a second).
const (
	diffLong  = 3 * time.Second
	diffShort = 100 * time.Millisecond
)

// timeoutSetter is a Stack whose Connect and Exchange timeout can change.
type timeoutSetter interface{ SetTimeout(time.Duration) }

// socketCloser is a Stack that can close one of its sockets.
type socketCloser interface{ CloseSocket(tcpao.Socket) error }

// do runs one step: f on the model, then on the reference, compares the
// outcomes and then the state of every socket.
func (q *seq) do(desc string, f func(st Stack, side func(*dsock) tcpao.Socket) string) string {
	q.ops++
	q.steps = append(q.steps, desc)
	om := f(q.m, func(s *dsock) tcpao.Socket { return s.m })
	or := f(q.r, func(s *dsock) tcpao.Socket { return s.r })
	q.res = append(q.res, om)
	if om != or {
		q.div = &Divergence{Steps: q.steps, Model: om, Real: or}
		return om
	}
	sm, sr := q.snapshot(func(s *dsock) tcpao.Socket { return s.m }), q.snapshot(func(s *dsock) tcpao.Socket { return s.r })
	if sm != sr {
		q.div = &Divergence{Steps: q.steps, Model: "result " + om + "\n" + sm, Real: "result " + or + "\n" + sr}
	}
	return om
}

func (q *seq) snapshot(side func(*dsock) tcpao.Socket) string {
	var b strings.Builder
	for _, s := range q.socks {
		in, err := side(s).Info()
		fmt.Fprintf(&b, "%s info=%s keys=", s, fmtInfo(in, err))
		ks, err := side(s).Keys(tcpao.KeyFilter{})
		b.WriteString(fmtKeys(ks, err))
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// errClass is what the comparison sees of an error: the errno, one of the
// binding's sentinels, ErrTimeout, or "error" for anything else.
func errClass(err error) string {
	var en syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &en):
		return "errno " + errnoName(en)
	case errors.Is(err, ErrTimeout):
		return "timeout"
	}
	for _, s := range []error{tcpao.ErrAddress, tcpao.ErrFilter, tcpao.ErrAlgorithm, tcpao.ErrKeyLength} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "error"
}

func nz(v uint64) string {
	if v == 0 {
		return "0"
	}
	return "+"
}

func fmtInfo(in tcpao.Info, err error) string {
	if err != nil {
		return errClass(err)
	}
	s := fmt.Sprintf("{req=%v icmps=%v good=%s bad=%s knf=%s aoreq=%s icmp=%s", in.AORequired, in.AcceptICMPs,
		nz(in.PktGood), nz(in.PktBad), nz(in.PktKeyNotFound), nz(in.PktAORequired), nz(in.PktDroppedICMP))
	if in.HaveCurrent {
		s += fmt.Sprintf(" cur=%d", in.CurrentKey)
	}
	if in.HaveRNext {
		s += fmt.Sprintf(" rnext=%d", in.RNextKey)
	}
	return s + "}"
}

func fmtKeys(ks []tcpao.KeyInfo, err error) string {
	if err != nil {
		return errClass(err)
	}
	parts := make([]string, 0, len(ks))
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("{%v alg=%s mac=%d xopt=%v fp=%x cur=%v rnext=%v good=%s bad=%s}",
			k.KeyRef, k.Algorithm, k.MACLen, k.ExcludeOptions, k.Fingerprint[:4], k.IsCurrent, k.IsRNext, nz(k.PktGood), nz(k.PktBad)))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
