// Package chaos is the fleet chaos run's pure half: the seeded fault
// schedule (Plan) and the invariant checker (Checker). The guest scenario
// (integration/e2e TestChaos) builds the fleet, injects what Plan drew,
// feeds what it samples to a Checker, and fails with its violations.
//
// Everything here is deterministic: the same seed and topology give the
// same schedule, byte for byte (Schedule.String), so `make chaos
// CHAOS_SEED=S` replays a failed run's faults in the same order at the
// same offsets. What the fleet does in between is not replayed: the guest
// is a real kernel on emulated CPUs.
package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is one kind of fault.
type Kind string

// The faults the schedule draws from.
const (
	KillAokeyd   Kind = "aokeyd-kill"   // SIGKILL a router's aokeyd; restarted after Dur
	KillSpeaker  Kind = "speaker-kill"  // SIGKILL a router's BGP speaker; restarted after Dur
	VaultDown    Kind = "vault-down"    // the Vault server stops (connections refused)
	VaultSlow    Kind = "vault-slow"    // every Vault answer delayed by Arg milliseconds
	VaultSealed  Kind = "vault-sealed"  // 503 sealed
	Vault403     Kind = "vault-403"     // one router's prefix denied
	Vault500     Kind = "vault-500"     // one router's prefix answers 500
	KeyInvalid   Kind = "key-invalid"   // a router's newest key edited into an invalid one, restored after Dur
	ChainEmptied Kind = "chain-emptied" // a router's chain written with no keys, restored after Dur
	ChainRenamed Kind = "chain-renamed" // a router's chain moved to another name, moved back after Dur
	Revoke       Kind = "revoke"        // aoctl revoke of the fleet's previous key at one router
	FleetRevoke  Kind = "fleet-revoke"  // aoctl fleet revoke of the fleet's previous key
	ClockStep    Kind = "clock-step"    // the guest's wall clock stepped by Arg ms, stepped back after Dur
	Netem        Kind = "netem"         // loss, delay and reordering on one link
	LinkDown     Kind = "link-down"     // one link's interfaces down, up after Dur
	DiskFull     Kind = "disk-full"     // a router's state directory full while a revoke is made there
	// KillLagging: a router's source drops the key its peers use for
	// one they lack, its aokeyd is SIGKILLed while they lag on the
	// dropped key and restarted; its source is restored after Dur.
	KillLagging Kind = "aokeyd-kill-lagging"
	// RecordLost: a router's aokeyd SIGKILLed, one of its state records
	// (Arg: 0 carried keys, 1 ownership, 2 migrations) deleted with its
	// backup while it is down, restarted after Dur.
	RecordLost Kind = "record-lost"
)

// Kinds lists every kind, in a fixed order.
var Kinds = []Kind{KillAokeyd, KillSpeaker, VaultDown, VaultSlow, VaultSealed, Vault403, Vault500,
	KeyInvalid, ChainEmptied, ChainRenamed, Revoke, FleetRevoke, ClockStep, Netem, LinkDown, DiskFull,
	KillLagging, RecordLost}

// weight is how often each kind is drawn, relative to the others.
var weight = map[Kind]int{
	KillAokeyd: 10, KillSpeaker: 6, VaultDown: 5, VaultSlow: 4, VaultSealed: 4, Vault403: 4, Vault500: 4,
	KeyInvalid: 5, ChainEmptied: 4, ChainRenamed: 3, Revoke: 6, FleetRevoke: 4, ClockStep: 3,
	Netem: 6, LinkDown: 5, DiskFull: 3, KillLagging: 4, RecordLost: 4,
}

// Topology is what the schedule may hit.
type Topology struct {
	// Aokeyd are the routers that run aokeyd (killed, their key source
	// edited, revoked at, their disk filled).
	Aokeyd []string
	// Speakers are the routers whose speaker may be killed (every router).
	Speakers []string
	// Links are the links' numbers.
	Links []int
}

// Fault is one scheduled fault: it starts At after the run's start and
// lasts Dur (0 for the instant ones: a revoke).
type Fault struct {
	At, Dur time.Duration
	Kind    Kind
	Router  string // the router hit ("" for Vault-wide faults and links)
	Link    int    // the link hit (Netem, LinkDown), else 0
	Arg     int    // a kind's parameter: VaultSlow's delay and ClockStep's step in ms, Netem's loss in percent
}

func (f Fault) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s+%s %s", fmtOffset(f.At), f.Dur, f.Kind)
	if f.Router != "" {
		fmt.Fprintf(&b, " router=%s", f.Router)
	}
	if f.Link != 0 {
		fmt.Fprintf(&b, " link=%d", f.Link)
	}
	if f.Arg != 0 {
		fmt.Fprintf(&b, " arg=%d", f.Arg)
	}
	return b.String()
}

func fmtOffset(d time.Duration) string { return d.Truncate(time.Millisecond).String() }

// Schedule is a run's plan: the faults in the order they start and the
// offsets of the fleet's rotations.
type Schedule struct {
	Seed      uint64
	Duration  time.Duration
	Faults    []Fault
	Rotations []time.Duration
}

// String is the schedule, one line per fault and one for the rotations:
// two runs with the same seed print the same text.
func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %s, %d faults, %d rotations\n", s.Seed, s.Duration, len(s.Faults), len(s.Rotations))
	for _, f := range s.Faults {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	r := make([]string, len(s.Rotations))
	for i, x := range s.Rotations {
		r[i] = fmtOffset(x)
	}
	fmt.Fprintf(&b, "rotations at %s\n", strings.Join(r, " "))
	return b.String()
}

// Counts is how many faults of each kind the schedule holds.
func (s Schedule) Counts() map[Kind]int {
	c := map[Kind]int{}
	for _, f := range s.Faults {
		c[f.Kind]++
	}
	return c
}

// Params tune Plan.
type Params struct {
	// MeanGap is the mean time between two faults' starts (exponential:
	// faults overlap); default 12s.
	MeanGap time.Duration
	// Rotation is the range of the gap between two rotations; default
	// 6s to 60s.
	RotationMin, RotationMax time.Duration
	// Quiet is the tail of the run with no fault starting and every
	// fault over (the final checks' quiet period); default 45s.
	Quiet time.Duration
	// Kinds, when set, are the only kinds drawn (a focused run: make
	// chaos-mutant draws revokes and aokeyd kills only).
	Kinds []Kind
}

func (p Params) withDefaults() Params {
	if p.MeanGap <= 0 {
		p.MeanGap = 12 * time.Second
	}
	if p.RotationMin <= 0 {
		p.RotationMin = 6 * time.Second
	}
	if p.RotationMax <= p.RotationMin {
		p.RotationMax = max(60*time.Second, p.RotationMin+time.Second)
	}
	if p.Quiet <= 0 {
		p.Quiet = 45 * time.Second
	}
	return p
}

// Plan draws the schedule of a run of length d over topo from seed. The
// faults start in [10s, d-Quiet) and end before d-Quiet; rotations run
// through the whole run but the quiet tail.
func Plan(seed uint64, d time.Duration, topo Topology, p Params) Schedule {
	p = p.withDefaults()
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := Schedule{Seed: seed, Duration: d}
	end := d - p.Quiet
	kinds := Kinds
	if len(p.Kinds) > 0 {
		kinds = p.Kinds
	}
	total := 0
	for _, k := range kinds {
		total += weight[k]
	}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(r.Int64N(int64(hi-lo)+1)) }
	for at := 10 * time.Second; ; {
		at += time.Duration(r.ExpFloat64() * float64(p.MeanGap))
		if at >= end {
			break
		}
		n := r.IntN(total)
		var k Kind
		for _, x := range kinds {
			if n < weight[x] {
				k = x
				break
			}
			n -= weight[x]
		}
		f := Fault{At: at, Kind: k}
		switch k {
		case KillAokeyd:
			f.Router, f.Dur = pick(topo.Aokeyd), between(time.Second, 20*time.Second)
		case KillSpeaker:
			f.Router, f.Dur = pick(topo.Speakers), between(time.Second, 10*time.Second)
		case VaultDown, VaultSealed:
			f.Dur = between(3*time.Second, 40*time.Second)
		case VaultSlow:
			f.Dur, f.Arg = between(5*time.Second, 40*time.Second), int(between(500*time.Millisecond, 8*time.Second)/time.Millisecond)
		case Vault403, Vault500:
			f.Router, f.Dur = pick(topo.Aokeyd), between(3*time.Second, 40*time.Second)
		case KeyInvalid, ChainEmptied, ChainRenamed:
			f.Router, f.Dur = pick(topo.Aokeyd), between(3*time.Second, 30*time.Second)
		case Revoke:
			f.Router = pick(topo.Aokeyd)
		case FleetRevoke:
		case ClockStep:
			// Within the policy's tolerance: never past a lifetime
			// boundary the fleet relies on (the rotations' keys start
			// at the moment they are written).
			step := between(time.Second, 20*time.Second)
			if r.IntN(2) == 0 {
				step = -step
			}
			f.Dur, f.Arg = between(5*time.Second, 30*time.Second), int(step/time.Millisecond)
		case Netem:
			f.Link, f.Dur, f.Arg = topo.Links[r.IntN(len(topo.Links))], between(5*time.Second, 40*time.Second), 1+r.IntN(8)
		case LinkDown:
			f.Link, f.Dur = topo.Links[r.IntN(len(topo.Links))], between(time.Second, 15*time.Second)
		case DiskFull:
			f.Router, f.Dur = pick(topo.Aokeyd), between(3*time.Second, 20*time.Second)
		case KillLagging:
			f.Router, f.Dur = pick(topo.Aokeyd), between(8*time.Second, 25*time.Second)
		case RecordLost:
			f.Router, f.Dur, f.Arg = pick(topo.Aokeyd), between(time.Second, 10*time.Second), r.IntN(3)
		}
		if f.At+f.Dur >= end {
			f.Dur = end - f.At
		}
		s.Faults = append(s.Faults, f)
	}
	for at := between(5*time.Second, p.RotationMin); at < end; at += between(p.RotationMin, p.RotationMax) {
		s.Rotations = append(s.Rotations, at)
	}
	return s
}
