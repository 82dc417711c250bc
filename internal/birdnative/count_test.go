package birdnative

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/policy"
)

// TestExecutorCountsCommands: every command Run sends BIRD is counted by
// its kind (OnCommand, which the daemon turns into
// aokeyd_speaker_rpcs_total), a configure BIRD refuses too; the plans of
// three peers submitted together cost one configure; and each configure
// BIRD took is logged once, "BIRD reconfigured", with its files and the
// count since the start, which the bench's bird-fleet item reads.
func TestExecutorCountsCommands(t *testing.T) {
	e, fb := newTestExecutor(t)
	var mu sync.Mutex
	counted := map[string]int{}
	e.o.OnCommand = func(kind string) {
		mu.Lock()
		counted[kind]++
		mu.Unlock()
	}
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	e.log = slog.New(slog.NewJSONHandler(&lockedWriter{w: &logBuf, mu: &logMu}, nil))
	in := input{Desired: []policy.ScheduledKey{sk(1, true), sk(2, false)}, Preferred: 0}
	var plans []daemon.ExecPlan
	for _, a := range []string{"192.0.2.2", "192.0.2.3", "192.0.2.4"} {
		plans = append(plans, execPlan(peer.KeyOf(netip.MustParseAddr(a), ""), in, 1))
	}
	if o := runOnce(t, e, plans...); o.ConfigureErr != nil || len(o.Failed) != 0 {
		t.Fatalf("outcome %+v", o)
	}
	// A change BIRD refuses: counted, not logged as reconfigured.
	fb.setRefuse(true)
	in.Desired, in.Preferred = []policy.ScheduledKey{sk(1, true), sk(2, true)}, 1
	in.Written = writtenKeys(t, e.fileOfPeer(plans[0].Peer))
	if o := runOnce(t, e, execPlan(plans[0].Peer, in, 2)); o.ConfigureErr == nil {
		t.Fatalf("outcome %+v, want a configure error", o)
	}
	mu.Lock()
	defer mu.Unlock()
	if counted[CommandConfigure] != 2 || fb.count() != 2 {
		t.Errorf("configures counted %d, BIRD saw %d; want 2 and 2 (%v)", counted[CommandConfigure], fb.count(), counted)
	}
	if counted[CommandShow] < 2 {
		t.Errorf("show protocols counted %d, want one per application at least (%v)", counted[CommandShow], counted)
	}
	logMu.Lock()
	defer logMu.Unlock()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logBuf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "BIRD reconfigured" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 1 || lines[0]["files"] != 3.0 || lines[0]["configures"] != 1.0 {
		t.Fatalf("\"BIRD reconfigured\" lines %v, want one with files=3 configures=1:\n%s", lines, logBuf.String())
	}
}

// lockedWriter serializes writes to w (Run logs from its goroutine).
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
