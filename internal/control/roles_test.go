package control

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// The read group may read; only the admin group (and root, the daemon's
// uid, AllowUIDs) may change state. Every state-changing call, allowed or
// refused, leaves an audit line with the caller's uid and pid, the command
// and its arguments.
func TestRolesAndAudit(t *testing.T) {
	const readGID, adminGID = 4242, 4343
	reader := Cred{PID: 501, UID: 4005, GID: readGID}
	suppReader := Cred{PID: 502, UID: 4006, GID: 100, Groups: []uint32{7, readGID}}
	admin := Cred{PID: 503, UID: 4007, GID: 100, Groups: []uint32{adminGID}}
	stranger := Cred{PID: 504, UID: 4008, GID: 100, Groups: []uint32{7}}
	root := Cred{PID: 505}
	revoke := func(c *Client) error {
		_, err := c.Revoke(context.Background(), RevokeRequest{Chain: "core", Key: "k1", Peer: "192.0.2.2"})
		return err
	}
	rotate := func(c *Client) error {
		_, err := c.Rotate(context.Background(), RotateRequest{All: true})
		return err
	}
	status := func(c *Client) error {
		_, err := c.Status(context.Background(), "")
		return err
	}
	tests := []struct {
		name    string
		cred    Cred
		call    func(*Client) error
		refused bool
		audit   string // "" for no audit line
	}{
		{"reader status", reader, status, false, ""},
		{"reader revoke", reader, revoke, true, "command=revoke chain=core key=k1 peer=192.0.2.2"},
		{"reader rotate", reader, rotate, true, "command=rotate"},
		{"supplementary reader status", suppReader, status, false, ""},
		{"supplementary reader revoke", suppReader, revoke, true, "command=revoke"},
		{"admin revoke", admin, revoke, false, "command=revoke chain=core key=k1 peer=192.0.2.2"},
		{"admin rotate", admin, rotate, false, "command=rotate"},
		{"admin status", admin, status, false, ""},
		{"root revoke", root, revoke, false, "command=revoke"},
		{"stranger status", stranger, status, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testkit.SyncBuffer
			c := serveAs(t, tt.cred, ServerOptions{Backend: &fakeBackend{}, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				AllowGID: readGID, HaveGID: true, AdminGID: adminGID, HaveAdminGID: true, OwnUID: 999})
			err := tt.call(c)
			if tt.refused != errors.Is(err, ErrRefused) || (!tt.refused && err != nil) {
				t.Fatalf("call: %v, want refused %t", err, tt.refused)
			}
			lines := auditLines(logs.String())
			switch {
			case tt.audit == "" && len(lines) > 0:
				t.Errorf("audit lines for a read: %q", lines)
			case tt.audit != "" && (len(lines) != 1 || !strings.Contains(lines[0], tt.audit) ||
				!strings.Contains(lines[0], "uid="+itoa(tt.cred.UID)) || !strings.Contains(lines[0], "pid="+itoa(uint32(tt.cred.PID))) ||
				strings.Contains(lines[0], "outcome=ok") == tt.refused):
				t.Errorf("audit lines %q, want one with %q, the uid, pid and outcome", lines, tt.audit)
			}
		})
	}
}

func auditLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "control audit") {
			out = append(out, l)
		}
	}
	return out
}

func itoa(n uint32) string { b, _ := json.Marshal(n); return string(b) }

// serveAs serves o on a fresh socket where every connection presents
// cred, as SO_PEERCRED and SO_PEERGROUPS would report it.
func serveAs(t *testing.T, cred Cred, o ServerOptions) *Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "control.sock")
	l, err := Listen(path, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(o)
	s.credOf = func(net.Conn) (Cred, error) { return cred, nil }
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return NewClient(path, 10*time.Second)
}
