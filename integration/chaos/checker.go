package chaos

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Invariant names one of the run's invariants.
type Invariant string

// The invariants the checker holds the fleet to.
const (
	// UnexplainedFlap: a session went down (or came back as a new
	// session) while no fault that may take it down (its speaker
	// killed, its link down) was in force or had just ended.
	UnexplainedFlap Invariant = "unexplained-flap"
	// Stranded: a session down for longer than the bound after every
	// fault that may hold it down ended, or down at the end of the run.
	Stranded Invariant = "stranded"
	// RevokedLeft: a revoked key still on a socket of an aokeyd-managed
	// speaker one refresh plus the bound after the revoke took effect
	// (and its aokeyd was up to apply it).
	RevokedLeft Invariant = "revoked-left"
	// KeyInLog: a key's bytes (hex or base64) in a log.
	KeyInLog Invariant = "key-in-log"
	// Disagreement: after the quiet period, a socket's keys differ from
	// the desired set, or a fleet document from its router.
	Disagreement Invariant = "disagreement"
	// Leak: aokeyd's RSS or goroutines grew from the first to the last
	// quarter of the run.
	Leak Invariant = "leak"
)

// Violation is one breach, with the events that led to it.
type Violation struct {
	Invariant Invariant
	At        time.Duration // since the run's start
	What      string
	Last      []string // the last events before it
}

func (v Violation) String() string {
	return fmt.Sprintf("%s at %s: %s\n  last events:\n    %s", v.Invariant, fmtOffset(v.At), v.What, strings.Join(v.Last, "\n    "))
}

// Session is one sample of a link's BGP session, from one end.
type Session struct {
	// Up: established.
	Up bool
	// Epoch names the established session (for instance the speaker's
	// pid, the session's uptime and flap count): a different epoch
	// between two up samples is a flap the samples did not see.
	Epoch string
}

// window is a span in which a fault was in force; zero to: still is.
type window struct {
	from, to time.Time
	why      string
	excuses  bool // may take the sessions down (not only delay them)
}

func (w window) overlaps(a, b time.Time, grace time.Duration) bool {
	return !w.from.After(b) && (w.to.IsZero() || !w.to.Add(grace).Before(a))
}

type linkState struct {
	seen      bool
	up        bool
	epoch     string
	at        time.Time // last sample
	downSince time.Time // zero: up
	reported  bool      // this down period was reported stranded
}

type revoke struct {
	key       string
	routers   []string // where it is revoked; nil: everywhere
	effective time.Time
}

// Checker holds the invariants over what the scenario samples. Its
// methods are safe for concurrent use; a Checker's clock is the
// scenario's (monotonic) time.Now.
type Checker struct {
	// Start is the run's start (offsets in reports are from it).
	Start time.Time
	// Bound is how long a session may take to come back after the last
	// fault that may hold it down ended.
	Bound time.Duration
	// RevokeBound is how long after a revoke took effect (and the
	// router's aokeyd could act) its key may still be seen: one refresh
	// plus the promised bound.
	RevokeBound time.Duration
	// Log, when set, gets every event, one line each, as it happens.
	Log io.Writer

	mu         sync.Mutex
	links      map[string]*linkState
	windows    map[string][]window // by link ("" for every link) and by "router:NAME"
	revokes    []revoke
	events     []string
	violations []Violation
	flaps      int // excused ones
	seen       map[string]bool
}

// NewChecker returns a checker with the run's start and bounds.
func NewChecker(start time.Time, bound, revokeBound time.Duration) *Checker {
	return &Checker{Start: start, Bound: bound, RevokeBound: revokeBound, links: map[string]*linkState{},
		windows: map[string][]window{}, seen: map[string]bool{}}
}

const lastEvents = 25

// Event records something that happened, for the violations' context.
func (c *Checker) Event(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.event(time.Now(), fmt.Sprintf(format, args...))
}

func (c *Checker) event(at time.Time, s string) {
	line := fmtOffset(at.Sub(c.Start)) + " " + s
	if c.Log != nil {
		_, _ = io.WriteString(c.Log, line+"\n")
	}
	c.events = append(c.events, line)
	if len(c.events) > 4*lastEvents {
		c.events = slices.Delete(c.events, 0, len(c.events)-lastEvents)
	}
}

func (c *Checker) violate(at time.Time, inv Invariant, what string) {
	last := c.events[max(0, len(c.events)-lastEvents):]
	c.violations = append(c.violations, Violation{Invariant: inv, At: at.Sub(c.Start), What: what, Last: slices.Clone(last)})
	c.event(at, fmt.Sprintf("VIOLATION %s: %s", inv, what))
}

// Fault records a fault from now until the returned func is called.
// scopes are the links it touches and "router:NAME" for the routers it
// holds back ("" for all of them); excuses says it may take the
// sessions of those links down (a killed speaker, a downed link), not
// only delay their recovery or a revoke (a killed aokeyd, Vault down).
func (c *Checker) Fault(why string, excuses bool, scopes ...string) (end func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.event(now, "fault "+why)
	idx := map[string]int{}
	for _, s := range scopes {
		c.windows[s] = append(c.windows[s], window{from: now, why: why, excuses: excuses})
		idx[s] = len(c.windows[s]) - 1
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			now := time.Now()
			c.event(now, "fault over "+why)
			for s, i := range idx {
				c.windows[s][i].to = now
			}
		})
	}
}

// scopes are the window lists that apply to link l with routers rs.
func (c *Checker) scopes(l string, rs []string) [][]window {
	out := [][]window{c.windows[l], c.windows[""]}
	for _, r := range rs {
		out = append(out, c.windows["router:"+r])
	}
	return out
}

// excused reports whether a fault that may take link l (between routers
// rs) down overlapped [a, b], or ended less than Bound before a.
func (c *Checker) excused(l string, rs []string, a, b time.Time) (string, bool) {
	for _, ws := range c.scopes(l, rs) {
		for _, w := range ws {
			if w.excuses && w.overlaps(a, b, c.Bound) {
				return w.why, true
			}
		}
	}
	return "", false
}

// deadline is when a session of l down since from must be back: Bound
// after the last fault touching it that overlapped its down time ended;
// zero when one is still in force.
func (c *Checker) deadline(l string, rs []string, from, now time.Time) time.Time {
	return after(c.scopes(l, rs), from, now, c.Bound)
}

// after is bound after the last of the windows that overlapped [from,
// now] ended (from if none did); zero while one is still in force.
func after(scopes [][]window, from, now time.Time, bound time.Duration) time.Time {
	end := from
	for _, ws := range scopes {
		for _, w := range ws {
			if !w.overlaps(from, now, 0) {
				continue
			}
			if w.to.IsZero() {
				return time.Time{}
			}
			if w.to.After(end) {
				end = w.to
			}
		}
	}
	return end.Add(bound)
}

// Observe records a sample of link l's session, whose ends are routers
// rs, taken at at.
func (c *Checker) Observe(l string, rs []string, at time.Time, s Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.links[l]
	if st == nil {
		st = &linkState{}
		c.links[l] = st
	}
	defer func() { st.seen, st.up, st.at = true, s.Up, at }()
	if st.seen && st.up && (!s.Up || s.Epoch != st.epoch) {
		what := fmt.Sprintf("link %s: session %s went down between %s and %s", l, st.epoch, fmtOffset(st.at.Sub(c.Start)), fmtOffset(at.Sub(c.Start)))
		if s.Up {
			what = fmt.Sprintf("link %s: session %s replaced by %s between %s and %s", l, st.epoch, s.Epoch, fmtOffset(st.at.Sub(c.Start)), fmtOffset(at.Sub(c.Start)))
		}
		if why, ok := c.excused(l, rs, st.at, at); ok {
			c.flaps++
			c.event(at, what+" (caused by "+why+")")
		} else {
			c.violate(at, UnexplainedFlap, what)
		}
		if !s.Up {
			st.downSince, st.reported = st.at, false
		}
	}
	if !st.seen && !s.Up {
		st.downSince = at
	}
	if s.Up {
		if !st.downSince.IsZero() {
			c.event(at, fmt.Sprintf("link %s: up again (%s), down %s", l, s.Epoch, at.Sub(st.downSince).Round(time.Second)))
		}
		st.epoch, st.downSince = s.Epoch, time.Time{}
		return
	}
	if st.reported {
		return
	}
	if d := c.deadline(l, rs, st.downSince, at); !d.IsZero() && at.After(d) {
		st.reported = true
		c.violate(at, Stranded, fmt.Sprintf("link %s: down since %s, past its bound (%s after the last fault holding it ended)", l, fmtOffset(st.downSince.Sub(c.Start)), c.Bound))
	}
}

// Revoked records that key was revoked at routers (nil: at every router,
// a fleet revoke) at effective (for a fleet revoke: once its record was
// written).
func (c *Checker) Revoked(key string, routers []string, effective time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revokes = append(c.revokes, revoke{key: key, routers: slices.Clone(routers), effective: effective})
	where := "fleet-wide"
	if routers != nil {
		where = "at " + strings.Join(routers, ",")
	}
	c.event(effective, "revoked "+key+" "+where)
}

// revokeDeadline is when router r must have removed a key revoked at
// eff: RevokeBound after eff or after the last fault holding r back
// (its aokeyd killed, its Vault path failing) that overlapped it.
func (c *Checker) revokeDeadline(r string, eff, now time.Time) time.Time {
	return after([][]window{c.windows["router:"+r], c.windows[""]}, eff, now, c.RevokeBound)
}

// Keys records the key names seen at at on a socket (where) of router
// r's speaker.
func (c *Checker) Keys(r, where string, at time.Time, keys []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rv := range c.revokes {
		if !slices.Contains(keys, rv.key) || at.Before(rv.effective) || (rv.routers != nil && !slices.Contains(rv.routers, r)) {
			continue
		}
		if d := c.revokeDeadline(r, rv.effective, at); d.IsZero() || !at.After(d) {
			continue
		}
		id := r + "|" + where + "|" + rv.key
		if c.seen[id] {
			continue
		}
		c.seen[id] = true
		c.violate(at, RevokedLeft, fmt.Sprintf("router %s %s: revoked key %s still there %s after the revoke", r, where, rv.key, at.Sub(rv.effective).Round(time.Millisecond)))
	}
}

// Violate records a violation found by the scenario itself (a key in a
// log, a final disagreement, a leak).
func (c *Checker) Violate(inv Invariant, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.violate(time.Now(), inv, what)
}

// Report is the run's outcome.
type Report struct {
	Violations []Violation
	// ByInvariant counts the violations of each invariant.
	ByInvariant map[Invariant]int
	// Flaps is how many flaps the faults caused (excused).
	Flaps int
	// Links is how many links were sampled.
	Links int
}

// Report returns what the checker found so far.
func (c *Checker) Report() Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Report{Violations: slices.Clone(c.violations), ByInvariant: map[Invariant]int{}, Flaps: c.flaps, Links: len(c.links)}
	for _, v := range c.violations {
		r.ByInvariant[v.Invariant]++
	}
	return r
}

// Down lists the links whose last sample was down.
func (c *Checker) Down() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for l, st := range c.links {
		if !st.up {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}
