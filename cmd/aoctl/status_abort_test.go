package main

import (
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// aoctl status shows the last abort's reason word (the metric's label) and
// its text.
func TestStatusShowsAbortReason(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	renderPeer(&b, control.PeerStatus{Rotation: control.Rotation{State: "backoff",
		LastAbortReason: "session-down", LastAbort: "announce failed: session guard after announce: bgp session dropped"}}, now)
	if want := "\n  Last abort: session-down: announce failed: session guard after announce: bgp session dropped\n"; !strings.Contains(b.String(), want) {
		t.Errorf("status:\n%s\nwant the line %q", b.String(), strings.TrimSpace(want))
	}
}

// aoctl status says when the BGP daemon's own connects to a peer carry keys.
func TestStatusShowsActiveOpensKeyed(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, keyed := range []bool{false, true} {
		var b strings.Builder
		renderPeer(&b, control.PeerStatus{Peer: "192.0.2.3", SessionState: "established", ActiveOpensKeyed: keyed}, now)
		want := "Peer 192.0.2.3: session established, up 0s, passive no\n"
		if keyed {
			want = "Peer 192.0.2.3: session established, up 0s, passive no, active opens keyed\n"
		}
		if !strings.HasPrefix(b.String(), want) {
			t.Errorf("keyed %t: status:\n%s\nwant it to start %q", keyed, b.String(), want)
		}
	}
}

// A peer's migration from TCP-MD5 to TCP-AO is one line of its status:
// the step, the prefix, the switch and roll-back times, and why it rolled
// back.
func TestRenderPeerMigration(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	var b strings.Builder
	renderPeer(&b, control.PeerStatus{Peer: "192.0.2.2", SessionState: "established", Auth: control.AuthMD5,
		Migration: &control.Migration{Peer: "192.0.2.2", Step: "rolled-back", Prefix: "192.0.2.0/30", Since: now.Add(-time.Minute),
			At: now.Add(-6 * time.Minute), Deadline: now.Add(-time.Minute), Reason: "no TCP-AO session from 192.0.2.2 within 5m0s"}}, now)
	for _, want := range []string{"auth tcp-md5", "Migration to TCP-AO: rolled-back since 2026-12-04T08:59:00Z, TCP-AO at 192.0.2.0/30",
		"no TCP-AO session from 192.0.2.2 within 5m0s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status does not say %q:\n%s", want, b.String())
		}
	}
}
