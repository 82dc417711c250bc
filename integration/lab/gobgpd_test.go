package lab

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestGobgpdConfigTOML(t *testing.T) {
	c := GobgpdConfig{
		AS: 65001, RouterID: addr("10.0.0.1"), LocalAddrs: []netip.Addr{addr("10.0.0.1")},
		Neighbors: []Neighbor{{Addr: addr("10.0.0.2"), AS: 65002, Passive: true, Password: "pw"}, {Addr: addr("10.0.0.3"), AS: 65003, ConnectRetry: 3}},
		HoldTime:  3, Keepalive: 1,
	}
	want := `[global.config]
  as = 65001
  router-id = "10.0.0.1"
  port = 179
  local-address-list = ["10.0.0.1"]

[[neighbors]]
  [neighbors.config]
    neighbor-address = "10.0.0.2"
    peer-as = 65002
    auth-password = "pw"
  [neighbors.transport.config]
    passive-mode = true
  [neighbors.timers.config]
    connect-retry = 1
    hold-time = 3
    keepalive-interval = 1
    idle-hold-time-after-reset = 1

[[neighbors]]
  [neighbors.config]
    neighbor-address = "10.0.0.3"
    peer-as = 65003
  [neighbors.transport.config]
    passive-mode = false
  [neighbors.timers.config]
    connect-retry = 3
    hold-time = 3
    keepalive-interval = 1
    idle-hold-time-after-reset = 1
`
	if got := c.TOML(); got != want {
		t.Errorf("TOML:\n%s\nwant:\n%s", got, want)
	}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// gobgpd's environment always says multipathtcp=0, whatever GODEBUG held:
// the other settings are kept, a multipathtcp one is replaced, and the
// rest of the environment is untouched.
func TestNoMPTCP(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, out []string
	}{
		{"no GODEBUG", []string{"PATH=/bin"}, []string{"PATH=/bin", "GODEBUG=multipathtcp=0"}},
		{"empty GODEBUG", []string{"GODEBUG="}, []string{"GODEBUG=multipathtcp=0"}},
		{"other settings kept", []string{"GODEBUG=http2client=0,netdns=go", "HOME=/root"},
			[]string{"GODEBUG=http2client=0,netdns=go,multipathtcp=0", "HOME=/root"}},
		{"multipathtcp replaced", []string{"GODEBUG=multipathtcp=1,netdns=go"}, []string{"GODEBUG=netdns=go,multipathtcp=0"}},
		{"a name that only starts alike", []string{"GODEBUGX=1"}, []string{"GODEBUGX=1", "GODEBUG=multipathtcp=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			if got := NoMPTCP(in); !slices.Equal(got, tc.out) {
				t.Errorf("NoMPTCP(%q) = %q, want %q", tc.in, got, tc.out)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("NoMPTCP changed its argument to %q", in)
			}
		})
	}
}

// The example unit that runs gobgpd under aokeyd exec says what the lab
// says (NoMPTCP): gobgpd v4 is built with go 1.25 and would listen with
// Multipath TCP on Debian's kernels, where TCP-AO cannot be set on its
// listener.
func TestGobgpdUnitNoMPTCP(t *testing.T) {
	b, err := os.ReadFile("../../deploy/debian/gobgpd-aokeyd.service")
	if err != nil {
		t.Fatal(err)
	}
	section := ""
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = line
		}
		if section == "[Service]" && line == "Environment=GODEBUG=multipathtcp=0" {
			found = true
		}
	}
	if !found {
		t.Errorf("gobgpd-aokeyd.service has no Environment=GODEBUG=multipathtcp=0 in [Service]:\n%s", b)
	}
}
