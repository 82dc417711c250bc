package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// watchedAPI is a daemon whose one peer's counters and uptime change on
// every ask, whose rotation announces a new key 5s in, and which does not
// answer from 8s to 10s.
type watchedAPI struct {
	scriptedAPI
	start time.Time
	asks  int
}

func (f *watchedAPI) Status(context.Context, string) (control.StatusReport, error) {
	f.asks++
	in := time.Since(f.start)
	if in >= 8*time.Second && in < 10*time.Second {
		return control.StatusReport{}, fmt.Errorf("%w: control.sock: connection refused", control.ErrUnreachable)
	}
	p := control.PeerStatus{Peer: "192.0.2.2", SessionState: "established", Auth: control.AuthAO, Uptime: control.Duration(in + time.Hour),
		Counters: control.Counters{PktGood: uint64(f.asks)}, Rotation: control.Rotation{State: "steady", NextAt: time.Now().Add(30 * time.Second)},
		Keys: []control.Key{{Chain: "core", Name: "k1", SendID: 1, RecvID: 101, Current: true, RNext: true, PktGood: uint64(f.asks), State: control.KeyInstalled}}}
	if in >= 5*time.Second {
		p.Rotation.State, p.Rotation.PendingKey = "announced", "core/k2"
	}
	return control.StatusReport{GeneratedAt: time.Now(), KeySource: control.KeySourceStatus{Name: "file keys.yaml", LastSync: time.Now(),
		Age: control.Duration(in)}, Peers: []control.PeerStatus{p}}, nil
}

// status --watch prints the status again when what it shows changes, not
// when only counters and clocks move (--every: at each ask), says so once
// when the daemon stops answering, and ends without failure when stopped.
func TestStatusWatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		prints int
		want   []string
	}{
		// At 0s, at 6s (announced), at 8s (no answer), at 10s (answers again).
		{"on change", []string{"status", "--watch", "--brief"}, 4, []string{"announced", "aoctl status: daemon unreachable"}},
		{"every ask", []string{"status", "--watch", "--brief", "--every"}, 7, nil},
		// Asks at 0s, 5s (announced) and 10s (as at 5s): the outage
		// between two asks goes unseen.
		{"interval", []string{"status", "--watch", "--brief", "--interval", "5s"}, 2, nil},
		// Three objects on stdout, the outage on stderr.
		{"json lines", []string{"status", "--watch", "--json"}, 4, []string{`"state":"announced"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &watchedAPI{start: time.Now()}
				var out, errb bytes.Buffer
				a := &app{stdout: &out, stderr: &errb, now: time.Now, getenv: func(string) string { return "" }, api: f}
				ctx, stop := context.WithTimeout(context.Background(), 13*time.Second) // Ctrl-C at 13s
				defer stop()
				if code := a.run(ctx, tc.args); code != exitOK {
					t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
				}
				prints := strings.Count(out.String(), "=== ")
				if strings.Contains(strings.Join(tc.args, " "), "--json") {
					prints = strings.Count(out.String(), "\n") + strings.Count(errb.String(), "\n")
				}
				if prints != tc.prints {
					t.Errorf("printed %d times, want %d:\n%s%s", prints, tc.prints, out.String(), errb.String())
				}
				for _, w := range tc.want {
					if !strings.Contains(out.String()+errb.String(), w) {
						t.Errorf("output lacks %q:\n%s%s", w, out.String(), errb.String())
					}
				}
				if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
					t.Errorf("watch ended before it was stopped")
				}
			})
		})
	}
}
