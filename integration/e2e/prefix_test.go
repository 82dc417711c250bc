package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
	"github.com/aokeyd/aokeyd/tcpao"
)

const binding6 = "2001:db8:ab::/64"

// sessionAO reads gobgpd's established socket to B straight from the kernel
// (TCP_AO_INFO and TCP_AO_GET_KEYS through a pidfd_getfd duplicate),
// independently of aokeyd. ok is false when there is no such socket.
func (l *testbed) sessionAO() (info tcpao.Info, keys []tcpao.KeyInfo, ok bool, err error) {
	refs, err := sockets.System{}.Connections(l.gobgp.PID, l.ipB())
	if err != nil || len(refs) == 0 {
		return info, nil, false, err
	}
	err = sockets.System{}.With(refs[0], func(fd int) error {
		s := tcpao.FromFD(fd)
		var err error
		if info, err = s.Info(); err != nil {
			return err
		}
		keys, err = s.Keys(tcpao.KeyFilter{})
		return err
	})
	return info, keys, err == nil, err
}

// currentSampler reads the session's Current_key from the kernel every
// interval until finish, counting the samples in which it is the SendID
// watched while the peer does not hold that key yet. It prints its counts
// in one line when it finishes, also when the test stops early.
//
// A read (socket discovery, then TCP_AO_INFO) takes up to hundreds of
// milliseconds in the emulated guest, and the peer's RNext for its new key
// makes the kernel switch Current_key within that time once the peer has
// it: a read that the moment the peer got the key falls into is neither
// before nor after it (straddled), and only a read that ended before that
// moment counts as early.
type currentSampler struct {
	l         *testbed
	watch     uint8
	mu        sync.Mutex
	peerHas   bool
	peerSince time.Time
	samples   int // Current_key read
	misses    int // no session socket or a failed read
	early     int // Current_key == watch before the peer had it
	after     int // Current_key == watch once the peer had it
	straddled int // Current_key == watch in a read the peer got the key during
	firstBad  string
	stop      chan struct{}
	done      chan struct{}
	once      sync.Once
}

func (l *testbed) sampleCurrent(interval time.Duration, watch uint8) *currentSampler {
	c := &currentSampler{l: l, watch: watch, stop: make(chan struct{}), done: make(chan struct{})}
	l.t.Cleanup(func() { c.finish() })
	go func() {
		defer close(c.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-tick.C:
			}
			c.mu.Lock()
			hadBefore := c.peerHas
			c.mu.Unlock()
			start := time.Now()
			info, keys, ok, err := l.sessionAO()
			c.mu.Lock()
			switch {
			case err != nil || !ok || !info.HaveCurrent:
				c.misses++
			default:
				c.samples++
				if info.CurrentKey == watch {
					switch {
					case hadBefore:
						c.after++
					case c.peerHas:
						c.straddled++
					default:
						c.early++
						if c.firstBad == "" {
							c.firstBad = fmt.Sprintf("read %s-%s: current=%d rnext=%d keys %s", start.Format(time.StampMilli), time.Now().Format("15:04:05.000"), info.CurrentKey, info.RNextKey, listenerIDs(keys))
						}
					}
				}
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// peerGetsKey marks the moment from which the peer holds the watched key.
func (c *currentSampler) peerGetsKey() {
	c.mu.Lock()
	c.peerHas, c.peerSince = true, time.Now()
	c.mu.Unlock()
}

func (c *currentSampler) finish() (samples, misses, early, after int, firstBad string) {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		c.mu.Lock()
		fmt.Printf("prefix-v6: samples=%d missed=%d new_key_current_before_peer=%d new_key_current_after=%d straddled=%d\n", c.samples, c.misses, c.early, c.after, c.straddled)
		if c.firstBad != "" {
			since := "never"
			if c.peerHas {
				since = c.peerSince.Format("15:04:05.000")
			}
			fmt.Printf("prefix-v6: first sample with the new key current before the peer had it (peer has it since %s): %s\n", since, c.firstBad)
		}
		c.mu.Unlock()
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.samples, c.misses, c.early, c.after, c.firstBad
}

// aoctlPlan runs `aoctl --json plan` against the lab's daemon.
func (l *testbed) aoctlPlan() control.PlanReport {
	l.t.Helper()
	out, err := exec.Command(lab.MustBin(l.t, "aoctl"), "--socket", l.ctl.Socket(), "--json", "plan").Output()
	if err != nil {
		l.t.Fatalf("aoctl plan: %v: %s", err, out)
	}
	var rep control.PlanReport
	if err := json.Unmarshal(out, &rep); err != nil {
		l.t.Fatalf("aoctl --json plan: %v: %s", err, out)
	}
	return rep
}

func (l *testbed) aborts() int {
	b, _ := os.ReadFile(filepath.Join(l.dir, "aokeyd.log"))
	return strings.Count(string(b), "roll aborted; old key kept")
}

// TestPrefixBindingV6 runs B's session under a /64 binding over IPv6
// against BIRD 2.17. After take-over the session is steady: the kernel
// gives it the listener's keys with the /64 prefix, and `aoctl plan` has
// nothing to do. Then a new key arrives that BIRD does not have: the
// kernel's Current_key on gobgpd's session, sampled every 100 ms through
// the whole scenario, is never the new key before BIRD holds it; aokeyd
// aborts with its reason and retries; once BIRD has the key the roll
// completes. The session never flaps.
func TestPrefixBindingV6(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	k1 := key{i: 1, birdPreferred: true}
	l := newLabWith(t, []key{k1}, nil, labOptions{v6: true, binding: binding6})
	s := l.waitEstablished(60 * time.Second)
	lab.Eventually(t, 30*time.Second, "aokeyd steady on B's session with k1", func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		ok := st.Rotation.State == "steady" && len(st.Keys) == 1 && st.Keys[0].Current && st.Keys[0].PktGood > 0
		return ok, fmt.Sprintf("A keys %v (%s)", lab.KeyList(st.Keys), st.Rotation.State)
	})
	_, keys, ok, err := l.sessionAO()
	if !ok {
		t.Fatalf("gobgpd's session to %s not found: %v", l.ipB(), err)
	}
	for _, k := range append(keys, l.listenerKeys()...) {
		if k.Peer.String() != binding6 {
			t.Fatalf("key %d/%d for %s, want the binding's %s on the listener and the session", k.SendID, k.RecvID, k.Peer, binding6)
		}
	}
	// Steady means steady: the plan has nothing to do, now and after a
	// few of the session's re-reads.
	for range 3 {
		rep := l.aoctlPlan()
		peerLine := fmt.Sprintf("peer %s established ok", l.ipB())
		if !slices.Contains(rep.Plan, peerLine) || slices.ContainsFunc(rep.Plan, func(s string) bool { return !strings.HasSuffix(s, " ok") }) {
			// Go on: the roll below shows what such a plan does.
			t.Errorf("aoctl plan after take-over: %q, want every socket ok (%q)", rep.Plan, peerLine)
			break
		}
		time.Sleep(time.Second)
	}
	if !t.Failed() {
		t.Logf("after take-over: aoctl plan has nothing to do; session keys %s", listenerIDs(keys))
	}

	// BIRD lags: k2 arrives at A only.
	now := time.Now()
	old := k1
	old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(time.Hour)
	k2 := key{i: 2, sendStart: now.Add(-time.Second), acceptStart: now.Add(-time.Second)}
	smp := l.sampleCurrent(100*time.Millisecond, k2.sendID())
	l.writeKeys([]key{old, k2})
	lab.Eventually(t, 60*time.Second, "aokeyd gives up on k2 twice (abort, retry, abort)", func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		return st.Rotation.LastAbortReason != "" && l.aborts() >= 2, fmt.Sprintf("rotation %+v, aborts %d", st.Rotation, l.aborts())
	})
	st := l.status()
	if !strings.Contains(st.Rotation.LastAbort, fmt.Sprintf("did not send with key recv=%d", k2.recvID())) || st.Rotation.LastAbortReason != "switch-timeout" {
		t.Errorf("abort reason %q, want that B did not send with k2", st.Rotation.LastAbort)
	}
	t.Logf("B lags: status says %q after %d aborted attempts", st.Rotation.LastAbort, l.aborts())
	l.checkNoFlap(s, "while B lags")

	// BIRD gets k2 and prefers it: the roll completes.
	k1b, k2b := k1, k2
	k1b.birdPreferred, k2b.birdPreferred = false, true
	smp.peerGetsKey()
	if err := l.bird.Configure(l.birdConfig([]key{k1b, k2b})); err != nil {
		t.Fatal(err)
	}
	lab.Eventually(t, 60*time.Second, "roll to k2 completes once B has it", func() (bool, string) {
		st := l.status()
		ok := st.Rotation.State == "steady" && slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == k2.sendID() && k.Current && k.PktGood > 0 })
		return ok, fmt.Sprintf("A keys %v (%s)", lab.KeyList(st.Keys), st.Rotation.State)
	})
	time.Sleep(time.Second) // a few more samples with k2 current
	if _, keys, ok, err := l.sessionAO(); !ok || slices.ContainsFunc(keys, func(k tcpao.KeyInfo) bool { return k.Peer.String() != binding6 }) {
		t.Errorf("session keys after the roll %v (%v), want all for %s", keys, err, binding6)
	}
	samples, misses, early, after, firstBad := smp.finish()
	l.checkNoFlap(s, "after B caught up")
	if early != 0 {
		t.Fatalf("the new key was Current_key in %d of %d samples before BIRD had it (first: %s)", early, samples, firstBad)
	}
	if samples < 100 || after == 0 {
		t.Fatalf("%d samples (%d missed), %d with k2 current after B had it: the sampler did not watch the scenario", samples, misses, after)
	}
}
