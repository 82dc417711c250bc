package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// linkDaemon answers status with FRR's interface neighbours (issue 53):
// one that learned its address, one that has not yet.
type linkDaemon struct{ *testDaemon }

func (d linkDaemon) Status(context.Context, string) (control.StatusReport, error) {
	return control.StatusReport{
		GeneratedAt: testNow,
		KeySource:   control.KeySourceStatus{Name: "file /etc/aokeyd/keys.yaml", LastSync: testNow.Add(-time.Second), Age: control.Duration(time.Second)},
		Peers: []control.PeerStatus{
			{Peer: "fe80::b", Interface: "swp1", VRF: "red", SessionState: "established", Auth: control.AuthAO, Passive: true},
			{Interface: "swp2", SessionState: "active", Auth: control.AuthAO},
			{Peer: "192.0.2.2", SessionState: "established", Auth: control.AuthAO},
		},
	}, nil
}

// TestStatusInterfaceNeighbour: status shows an interface neighbour by its
// interface with the address it peers with, "swp1 (fe80::b)", or "(none)"
// before it learned one, in the table and the peer's own section; --json
// gives the two apart.
func TestStatusInterfaceNeighbour(t *testing.T) {
	sock := serveBackend(t, linkDaemon{newTestDaemon(t)})
	r := runAoctl(t, sock, "status")
	if r.code != exitOK {
		t.Fatalf("status: exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"swp1 (fe80::b)  red", "swp2 (none)", "192.0.2.2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status does not show %q:\n%s", want, r.stdout)
		}
	}
	for _, want := range []string{"Peer swp1 (fe80::b) vrf red: session established", "Peer swp2 (none): session active", "Peer 192.0.2.2: session established"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status's peer section does not say %q:\n%s", want, r.stdout)
		}
	}
	j := runAoctl(t, sock, "--json", "status")
	var rep control.StatusReport
	if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil || j.code != exitOK {
		t.Fatalf("--json: exit %d %v\n%s", j.code, err, j.stdout)
	}
	if p := rep.Peers[0]; p.Interface != "swp1" || p.Peer != "fe80::b" || rep.Peers[2].Interface != "" {
		t.Errorf("--json: %+v", rep.Peers)
	}
}
