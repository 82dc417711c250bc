package lab

import (
	"net/netip"
	"testing"
)

func TestGobgpdConfigTOML(t *testing.T) {
	c := GobgpdConfig{
		AS: 65001, RouterID: addr("10.0.0.1"), LocalAddrs: []netip.Addr{addr("10.0.0.1")},
		Neighbors: []Neighbor{{Addr: addr("10.0.0.2"), AS: 65002, Passive: true, Password: "pw"}},
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
`
	if got := c.TOML(); got != want {
		t.Errorf("TOML:\n%s\nwant:\n%s", got, want)
	}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }
