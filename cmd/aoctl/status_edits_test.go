package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// editsDaemon answers status with edits in place of every rule.
type editsDaemon struct{ *testDaemon }

func (d editsDaemon) Status(context.Context, string) (control.StatusReport, error) {
	edit := func(key string, send uint8, socket string, rule control.EditRule) control.EditStatus {
		return control.EditStatus{Chain: "core", Key: key, SendID: send, RecvID: send + 100, Socket: socket, Rule: rule, Applied: rule.Applied()}
	}
	return control.StatusReport{
		GeneratedAt: testNow,
		KeySource:   control.KeySourceStatus{Name: "file /etc/aokeyd/keys.yaml", LastSync: testNow.Add(-time.Second), Age: control.Duration(time.Second)},
		Peers: []control.PeerStatus{{
			Peer: "192.0.2.2", SessionState: "established", Auth: control.AuthAO, Passive: true,
			Edits: []control.EditStatus{
				edit("2026-10", 10, control.EditSession, control.EditHeldInUse),
				edit("2026-10", 10, control.EditListener, control.EditHeldInUse),
				edit("2026-11", 11, control.EditSession, control.EditHeldUnsettled),
				edit("2026-11", 11, control.EditListener, control.EditAppliedUnused),
			},
		}, {
			Peer: "192.0.2.3", SessionState: "active", Auth: control.AuthAO, Passive: true,
			Edits: []control.EditStatus{
				edit("2026-11", 11, control.EditListener, control.EditAppliedPeerDown),
				{SendID: 12, RecvID: 112, Socket: control.EditListener, Rule: control.EditHeldUnread},
			},
		}, {
			Peer: "192.0.2.4", SessionState: "established", Auth: control.AuthAO, Passive: true,
			Edits: []control.EditStatus{edit("2026-10", 10, control.EditSession, control.EditAppliedApproved)},
		}},
	}, nil
}

// TestStatusEdits: status says, for each edit in place of a peer's key on
// its session and on its listener entry, which rule applied or held it
// back, in words (text) and as a typed rule (--json).
func TestStatusEdits(t *testing.T) {
	sock := serveBackend(t, editsDaemon{newTestDaemon(t)})
	r := runAoctl(t, sock, "status")
	if r.code != exitOK {
		t.Fatalf("status: exit %d: %s", r.code, r.stderr)
	}
	golden(t, "status-edits.golden", r.stdout)
	for _, want := range []string{"edit applied: key authenticated nothing", "edit applied: peer down, its connections fail against the installed key", "edit held: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status does not say %q", want)
		}
	}
	j := runAoctl(t, sock, "--json", "status")
	if j.code != exitOK {
		t.Fatalf("status --json: exit %d: %s", j.code, j.stderr)
	}
	golden(t, "status-edits.json.golden", j.stdout)
}

// TestStatusStartUpGate: while the start-up gate holds, status says so
// and why, before the peers.
func TestStatusStartUpGate(t *testing.T) {
	var b strings.Builder
	for _, g := range []control.StartUpGate{{}, {Listed: true, Unread: 2}} {
		rep := control.StatusReport{GeneratedAt: testNow, StartUpGate: &g,
			KeySource: control.KeySourceStatus{Name: "file /etc/aokeyd/keys.yaml", LastSync: testNow.Add(-time.Second), Age: control.Duration(time.Second)}}
		renderStatus(&b, rep, testNow, false, false)
	}
	golden(t, "status-gate.golden", b.String())
}
