package chaos

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var topo = Topology{Aokeyd: []string{"g1", "g2", "g3"}, Speakers: []string{"g1", "g2", "g3", "b1"}, Links: []int{1, 2, 3}}

func TestPlanReplays(t *testing.T) {
	a := Plan(42, time.Hour, topo, Params{})
	b := Plan(42, time.Hour, topo, Params{})
	if a.String() != b.String() {
		t.Fatal("the same seed drew two schedules")
	}
	if c := Plan(43, time.Hour, topo, Params{}); c.String() == a.String() {
		t.Fatal("two seeds drew the same schedule")
	}
}

func TestPlanShape(t *testing.T) {
	s := Plan(7, time.Hour, topo, Params{})
	counts := s.Counts()
	for _, k := range Kinds {
		if counts[k] == 0 {
			t.Errorf("an hour's schedule has no %s fault:\n%s", k, s)
		}
	}
	overlap := 0
	quiet := time.Hour - 45*time.Second
	for i, f := range s.Faults {
		if f.At < 10*time.Second || f.At+f.Dur > quiet {
			t.Errorf("fault %s outside [10s, %s]", f, quiet)
		}
		if i > 0 && f.At < s.Faults[i-1].At {
			t.Errorf("faults out of order: %s after %s", f, s.Faults[i-1])
		}
		if i > 0 && s.Faults[i-1].At+s.Faults[i-1].Dur > f.At {
			overlap++
		}
	}
	if overlap == 0 {
		t.Error("no two faults overlap")
	}
	if n := len(s.Rotations); n < 60 || n > 600 {
		t.Errorf("%d rotations in an hour, want one every 6s to 60s", n)
	}
	for i := 1; i < len(s.Rotations); i++ {
		if g := s.Rotations[i] - s.Rotations[i-1]; g < 6*time.Second || g > 60*time.Second {
			t.Errorf("rotation gap %s", g)
		}
	}
}

func TestPlanKinds(t *testing.T) {
	s := Plan(1, 10*time.Minute, topo, Params{Kinds: []Kind{Revoke, KillAokeyd}})
	c := s.Counts()
	if c[Revoke] == 0 || c[KillAokeyd] == 0 || len(c) != 2 {
		t.Fatalf("kinds drawn %v, want revoke and aokeyd-kill only", c)
	}
}

// The checker's verdicts on made-up histories: it must flag what it is
// there to flag, and only that.
func TestChecker(t *testing.T) {
	up := func(e string) Session { return Session{Up: true, Epoch: e} }
	down := Session{}
	type step struct {
		at    time.Duration
		fault string // start ("+kind:scope:excuses") or end ("-kind") a fault, or revoke ("!key") or keys ("?router:key")
		s     *Session
	}
	ptr := func(s Session) *Session { return &s }
	for _, tc := range []struct {
		name  string
		steps []step
		want  map[Invariant]int
	}{
		{"steady", []step{{0, "", ptr(up("a"))}, {time.Second, "", ptr(up("a"))}, {2 * time.Second, "", ptr(up("a"))}}, nil},
		{"unexplained flap", []step{{0, "", ptr(up("a"))}, {time.Second, "", ptr(down)}, {2 * time.Second, "", ptr(up("b"))}},
			map[Invariant]int{UnexplainedFlap: 1}},
		{"unseen flap: a new session", []step{{0, "", ptr(up("a"))}, {time.Second, "", ptr(up("b"))}},
			map[Invariant]int{UnexplainedFlap: 1}},
		{"flap under an aokeyd kill is not excused", []step{{0, "", ptr(up("a"))}, {time.Second, "+aokeyd:router:g1:false", nil},
			{2 * time.Second, "", ptr(down)}, {3 * time.Second, "", ptr(up("b"))}},
			map[Invariant]int{UnexplainedFlap: 1}},
		{"speaker kill excuses", []step{{0, "", ptr(up("a"))}, {time.Second, "+speaker:router:g1:true", nil},
			{2 * time.Second, "", ptr(down)}, {5 * time.Second, "-speaker", nil}, {8 * time.Second, "", ptr(up("b"))}}, nil},
		{"link down excuses its link only", []step{{0, "", ptr(up("a"))}, {time.Second, "+link:L9:true", nil},
			{2 * time.Second, "", ptr(down)}, {3 * time.Second, "-link", nil}, {4 * time.Second, "", ptr(up("b"))}},
			map[Invariant]int{UnexplainedFlap: 1}},
		{"flap just after the fault ended is excused", []step{{0, "", ptr(up("a"))}, {time.Second, "+link:L:true", nil},
			{2 * time.Second, "-link", nil}, {20 * time.Second, "", ptr(down)}, {25 * time.Second, "", ptr(up("b"))}}, nil},
		{"flap long after the fault ended", []step{{0, "", ptr(up("a"))}, {time.Second, "+link:L:true", nil},
			{2 * time.Second, "-link", nil}, {60 * time.Second, "", ptr(up("a"))}, {70 * time.Second, "", ptr(down)}, {71 * time.Second, "", ptr(up("b"))}},
			map[Invariant]int{UnexplainedFlap: 1}},
		{"stranded after the fault", []step{{0, "", ptr(up("a"))}, {time.Second, "+speaker:router:g2:true", nil},
			{2 * time.Second, "", ptr(down)}, {3 * time.Second, "-speaker", nil}, {40 * time.Second, "", ptr(down)},
			{70 * time.Second, "", ptr(down)}, {80 * time.Second, "", ptr(down)}},
			map[Invariant]int{Stranded: 1}},
		{"held down by a later fault is not stranded", []step{{0, "", ptr(up("a"))}, {time.Second, "+speaker:router:g2:true", nil},
			{2 * time.Second, "", ptr(down)}, {3 * time.Second, "-speaker", nil}, {30 * time.Second, "+aokeyd:router:g1:false", nil},
			{70 * time.Second, "", ptr(down)}, {90 * time.Second, "-aokeyd", nil}, {100 * time.Second, "", ptr(up("b"))}}, nil},
		{"revoked key gone in time", []step{{0, "!k1", nil}, {time.Second, "?g1:k1", nil}, {5 * time.Second, "?g1:k2", nil}}, nil},
		{"revoked key left", []step{{0, "!k1", nil}, {time.Second, "?g1:k1", nil}, {5 * time.Second, "?g1:k1", nil}, {6 * time.Second, "?g1:k1", nil}},
			map[Invariant]int{RevokedLeft: 1}},
		{"revoked at another router only", []step{{0, "!g2:k1", nil}, {time.Second, "?g1:k1", nil}, {10 * time.Second, "?g1:k1", nil}}, nil},
		{"revoked key left while its aokeyd is down", []step{{0, "+aokeyd:router:g1:false", nil}, {time.Second, "!k1", nil},
			{10 * time.Second, "?g1:k1", nil}, {11 * time.Second, "-aokeyd", nil}, {12 * time.Second, "?g1:k1", nil}, {20 * time.Second, "?g1:k1", nil}},
			map[Invariant]int{RevokedLeft: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				c := NewChecker(start, 30*time.Second, 3*time.Second)
				ends := map[string]func(){}
				for _, st := range tc.steps {
					time.Sleep(time.Until(start.Add(st.at)))
					switch {
					case strings.HasPrefix(st.fault, "+"):
						p := strings.Split(st.fault[1:], ":")
						scope, excuses := p[1], p[len(p)-1] == "true"
						if scope == "router" {
							scope = "router:" + p[2]
						}
						ends[p[0]] = c.Fault(p[0], excuses, scope)
					case strings.HasPrefix(st.fault, "-"):
						ends[st.fault[1:]]()
					case strings.HasPrefix(st.fault, "!"):
						var at []string
						k := st.fault[1:]
						if r, key, ok := strings.Cut(k, ":"); ok {
							at, k = []string{r}, key
						}
						c.Revoked(k, at, time.Now())
					case strings.HasPrefix(st.fault, "?"):
						r, k, _ := strings.Cut(st.fault[1:], ":")
						c.Keys(r, "listener", time.Now(), []string{k})
					}
					if st.s != nil {
						c.Observe("L", []string{"g1", "g2"}, time.Now(), *st.s)
					}
				}
				rep := c.Report()
				for _, inv := range []Invariant{UnexplainedFlap, Stranded, RevokedLeft} {
					if rep.ByInvariant[inv] != tc.want[inv] {
						t.Errorf("%s: %d, want %d; violations %v", inv, rep.ByInvariant[inv], tc.want[inv], rep.Violations)
					}
				}
			})
		})
	}
}
