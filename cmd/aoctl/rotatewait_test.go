package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// scripted is one roll step a scriptedAPI peer takes, after the rotate
// request.
type scripted struct {
	after time.Duration
	step  control.RollStepKind
	key   string
	why   string
}

// scriptedAPI is a daemon whose rolls take their scripted steps on the
// bubble's clock once rotated; Rolls holds a request as aokeyd does.
type scriptedAPI struct {
	mu      sync.Mutex
	script  map[string][]scripted
	started time.Time
	noRolls bool // an aokeyd before GET /v1/rolls
}

func (f *scriptedAPI) Status(context.Context, string) (control.StatusReport, error) {
	return control.StatusReport{}, nil
}

func (f *scriptedAPI) Rotate(_ context.Context, req control.RotateRequest) (control.RotateResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = time.Now()
	var res control.RotateResult
	for _, p := range []string{"192.0.2.2", "192.0.2.3"} {
		if req.All || req.Peer == p {
			_, started := f.script[p]
			res.Peers = append(res.Peers, control.RotateOutcome{Seq: 7, Peer: p, Started: started, State: "steady", Detail: "rolling to core/k2"})
		}
	}
	return res, nil
}

// taken is p's steps taken by now, numbered after the rotate's seq 7.
func (f *scriptedAPI) taken(p string, after uint64) (steps []control.RollStep, next time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.script[p] {
		at := f.started.Add(s.after)
		seq := uint64(8 + i)
		if at.After(time.Now()) {
			if next.IsZero() {
				next = at
			}
			continue
		}
		if seq > after {
			rs := control.RollStep{Seq: seq, At: at, Step: s.step, State: "steady", Reason: s.why}
			if s.key != "" {
				rs.Key = &control.KeyName{Chain: "core", Name: s.key, SendID: 2, RecvID: 102}
			}
			if s.step == control.RollAborted {
				rs.Detail = "peer did not send with key recv=102 within 2m0s (its pkt_good stayed at 0); kept current send=1"
			}
			steps = append(steps, rs)
		}
	}
	return steps, next
}

func (f *scriptedAPI) Rolls(ctx context.Context, req control.RollsRequest) (control.RollsReport, error) {
	if f.noRolls {
		return control.RollsReport{}, fmt.Errorf("%w: Not Found", control.ErrNotFound)
	}
	deadline := time.Now().Add(req.Wait)
	for {
		steps, next := f.taken(req.Peer, req.After)
		if len(steps) > 0 || req.Wait == 0 || !time.Now().Before(deadline) {
			rep := control.RollsReport{Peer: req.Peer, Steps: steps, Last: req.After}
			if len(steps) > 0 {
				rep.Last = steps[len(steps)-1].Seq
			}
			return rep, nil
		}
		wake := deadline
		if !next.IsZero() && next.Before(wake) {
			wake = next
		}
		select {
		case <-ctx.Done():
			return control.RollsReport{}, ctx.Err()
		case <-time.After(time.Until(wake)):
		}
	}
}

var (
	fullRoll = []scripted{{0, control.RollStarted, "", ""}, {time.Second, control.RollAnnounced, "k2", ""},
		{40 * time.Second, control.RollSwitched, "k2", ""}, {100 * time.Second, control.RollCompleted, "k2", ""}}
	abortedRoll = []scripted{{0, control.RollStarted, "", ""}, {time.Second, control.RollAnnounced, "k2", ""},
		{121 * time.Second, control.RollAborted, "", "switch-timeout"}}
	droppedRoll = []scripted{{0, control.RollStarted, "", ""}, {time.Second, control.RollAnnounced, "k2", ""},
		{5 * time.Second, control.RollSessionDown, "", "Hold timer expired"}}
)

// shifted is script with every step d later.
func shifted(script []scripted, d time.Duration) []scripted {
	out := make([]scripted, len(script))
	for i, s := range script {
		s.after += d
		out[i] = s
	}
	return out
}

// aoctl rotate --wait prints each step as the peer takes it and exits when
// every roll ended: 0 when each completed, 1 when one aborted, lost its
// session or outlasted --timeout. It runs on the bubble's clock.
func TestRotateWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  map[string][]scripted
		noRolls bool
		args    []string
		code    int
		golden  string
		want    []string // in stdout (stderr for an old daemon)
	}{
		{name: "completes", script: map[string][]scripted{"192.0.2.2": fullRoll}, args: []string{"rotate", "192.0.2.2", "--wait"},
			code: exitOK, golden: "rotate-wait.golden"},
		{name: "aborts", script: map[string][]scripted{"192.0.2.2": abortedRoll}, args: []string{"rotate", "192.0.2.2", "--wait"},
			code: exitError, golden: "rotate-wait-abort.golden"},
		{name: "all: one completes, one loses its session", script: map[string][]scripted{"192.0.2.2": fullRoll, "192.0.2.3": droppedRoll},
			args: []string{"rotate", "--all", "--wait"}, code: exitError, golden: "rotate-wait-all.golden"},
		{name: "outlasts --timeout", script: map[string][]scripted{"192.0.2.2": fullRoll}, args: []string{"rotate", "192.0.2.2", "--wait", "--timeout", "30s"},
			code: exitError, want: []string{"192.0.2.2: roll did not end within 30s; it goes on (aoctl status 192.0.2.2)"}},
		{name: "an earlier roll ends after the request", script: map[string][]scripted{"192.0.2.2": append([]scripted{{0, control.RollCompleted, "k1", ""}},
			shifted(abortedRoll, 80*time.Millisecond)...)}, args: []string{"rotate", "192.0.2.2", "--wait"},
			code: exitError, want: []string{"aborted"}},
		{name: "nothing started", script: map[string][]scripted{}, args: []string{"rotate", "192.0.2.2", "--wait"},
			code: exitOK, want: []string{"No roll started: nothing to wait for."}},
		{name: "json", script: map[string][]scripted{"192.0.2.2": fullRoll}, args: []string{"rotate", "192.0.2.2", "--wait", "--json"},
			code: exitOK, want: []string{`"result": "completed"`, `"step": "switched"`}},
		{name: "an aokeyd without roll steps", script: map[string][]scripted{"192.0.2.2": fullRoll}, noRolls: true, args: []string{"rotate", "192.0.2.2", "--wait"},
			code: exitError, want: []string{"does not report the steps of its rolls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &scriptedAPI{script: tc.script, noRolls: tc.noRolls}
				var out, errb bytes.Buffer
				a := &app{stdout: &out, stderr: &errb, now: time.Now, getenv: func(string) string { return "" }, api: f}
				start := time.Now()
				code := a.run(context.Background(), tc.args)
				if code != tc.code {
					t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errb.String())
				}
				if took := time.Since(start); took > 10*time.Minute {
					t.Errorf("took %s", took)
				}
				if tc.golden != "" {
					golden(t, tc.golden, out.String())
				}
				for _, w := range tc.want {
					if !strings.Contains(out.String()+errb.String(), w) {
						t.Errorf("output lacks %q:\n%s%s", w, out.String(), errb.String())
					}
				}
				if strings.Contains(strings.Join(tc.args, " "), "--json") {
					var rep rotateWaitReport
					if err := json.Unmarshal(out.Bytes(), &rep); err != nil || len(rep.Rolls) != 1 || len(rep.Rolls[0].Steps) != 4 {
						t.Errorf("--json: %v %+v", err, rep)
					}
				}
			})
		})
	}
}

// A step is printed as the peer takes it, not when the roll ends.
func TestRotateWaitPrintsAsItGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &scriptedAPI{script: map[string][]scripted{"192.0.2.2": fullRoll}}
		var out lockedBuffer
		a := &app{stdout: &out, stderr: &out, now: time.Now, getenv: func(string) string { return "" }, api: f}
		done := make(chan int)
		go func() { done <- a.run(context.Background(), []string{"rotate", "192.0.2.2", "--wait"}) }()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if s := out.String(); !strings.Contains(s, "announced") || strings.Contains(s, "switched") {
			t.Errorf("30s in: want the announce and not yet the switch:\n%s", s)
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		if s := out.String(); !strings.Contains(s, "switched") || strings.Contains(s, "completed") {
			t.Errorf("45s in: want the switch and not yet the end:\n%s", s)
		}
		if code := <-done; code != exitOK {
			t.Errorf("exit %d", code)
		}
	})
}

// lockedBuffer is a bytes.Buffer safe to read while aoctl writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
