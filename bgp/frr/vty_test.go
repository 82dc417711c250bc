package frr

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// fakeBgpd serves a vty socket like bgpd's: NUL-terminated commands,
// answers ending in "\0\0\0" and a status byte. answer maps a command to
// its output and status.
func fakeBgpd(t *testing.T, answer func(cmd string) (string, byte)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bgpd.vty")
	testkit.ServeUnix(t, path, func(c net.Conn) {
		r := bufio.NewReader(c)
		for {
			cmd, err := r.ReadString(0)
			if err != nil {
				return
			}
			out, st := answer(strings.TrimSuffix(cmd, "\x00"))
			// Split the answer in two writes, as a long one arrives.
			half := len(out) / 2
			_, _ = c.Write([]byte(out[:half]))
			_, _ = c.Write(append([]byte(out[half:]), 0, 0, 0, st))
		}
	})
	return path
}

func TestVtySocket(t *testing.T) {
	var seen []string
	path := fakeBgpd(t, func(cmd string) (string, byte) {
		seen = append(seen, cmd)
		switch {
		case cmd == "enable":
			return "", 0
		case strings.HasPrefix(cmd, "show bgp"):
			return string(fixture(t, "vrf-all-neighbors.json")), 0
		case strings.HasPrefix(cmd, "clear bgp"):
			return "% BGP: Unknown neighbor - \"10.0.0.9\"\n", 1
		}
		return "% [BGP] Unknown command: " + cmd + "\n", 2
	})
	v := VtySocket{Path: path}
	out, err := v.Vtysh(context.Background(), "show bgp vrf all neighbors json")
	if err != nil || !bytes.Equal(out, fixture(t, "vrf-all-neighbors.json")) {
		t.Fatalf("show: %d bytes, %v", len(out), err)
	}
	if strings.Join(seen, ",") != "enable,show bgp vrf all neighbors json" {
		t.Errorf("commands sent %q, want enable first", seen)
	}
	_, err = v.Vtysh(context.Background(), "clear bgp vrf default 10.0.0.9")
	if !errors.Is(err, ErrCommand) || !strings.Contains(err.Error(), "Unknown neighbor") {
		t.Fatalf("refused clear: %v, want ErrCommand with bgpd's message", err)
	}
	if _, err := v.Vtysh(context.Background(), "show\x00bgp"); err == nil {
		t.Fatal("a command with a NUL byte was sent")
	}
	if _, err := (VtySocket{Path: filepath.Join(t.TempDir(), "none.vty")}).Vtysh(context.Background(), "show bgp"); err == nil ||
		!strings.Contains(err.Error(), "is bgpd running") {
		t.Fatalf("no socket: %v", err)
	}
}

func TestReadAnswer(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		limit  int
		out    string
		status byte
		err    string
	}{
		{"empty output", "\x00\x00\x00\x00", 10, "", 0, ""},
		{"output and status", "hello\n\x00\x00\x00\x01", 10, "hello\n", 1, ""},
		{"too long", "hello world\x00\x00\x00\x00", 4, "", 0, "longer than 4"},
		{"cut short", "hello", 10, "", 0, "cut short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, st, err := readAnswer(strings.NewReader(tt.in), tt.limit)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || string(out) != tt.out || st != tt.status {
				t.Fatalf("got %q %d %v, want %q %d", out, st, err, tt.out, tt.status)
			}
		})
	}
}

func TestVtySocketIn(t *testing.T) {
	for _, tt := range []struct{ dir, ns, want string }{
		{"", "", "/run/frr/bgpd.vty"},
		{"/var/run/frr", "red", "/var/run/frr/red/bgpd.vty"},
		{"/tmp/a", "", "/tmp/a/bgpd.vty"},
	} {
		if got := VtySocketIn(tt.dir, tt.ns).Path; got != tt.want {
			t.Errorf("VtySocketIn(%q, %q) = %q, want %q", tt.dir, tt.ns, got, tt.want)
		}
	}
}
