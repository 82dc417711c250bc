package config

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/keystore"
)

const vaultBase = "key_source:\n  type: vault\npolicy:\n  path: p.yaml\n"

func TestFleetConfig(t *testing.T) {
	c, err := Parse("aokeyd.yaml", []byte(vaultBase+"fleet:\n  vault_path: secret/aokeyd/fleet\n  router_id: edge-1.fra\n  addresses: [\"::ffff:192.0.2.1\", 2001:db8::1]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Fleet == nil || c.Fleet.VaultPath != "secret/aokeyd/fleet" || c.Fleet.RouterID != "edge-1.fra" ||
		!slices.Equal(c.Fleet.Addresses, []string{"192.0.2.1", "2001:db8::1"}) {
		t.Errorf("fleet = %+v", c.Fleet)
	}
	if c, err := Parse("aokeyd.yaml", []byte(vaultBase)); err != nil || c.Fleet != nil {
		t.Errorf("no fleet section: %+v, %v", c, err)
	}
}

func TestFleetConfigErrors(t *testing.T) {
	const fileBase = "key_source:\n  type: file\n  file: {path: k}\npolicy:\n  path: p.yaml\n"
	tests := []struct {
		name, yaml string
		line       int
		field      string
		sentinel   error
		msg        string
	}{
		{"file key source", fileBase + "fleet:\n  vault_path: secret/f\n  router_id: r1\n", 7, "fleet", keystore.ErrInvalid, "needs key_source.type vault"},
		{"no path", vaultBase + "fleet:\n  router_id: r1\n", 6, "fleet.vault_path", keystore.ErrMissingField, "secret/aokeyd/fleet"},
		{"path without prefix", vaultBase + "fleet:\n  vault_path: secret\n  router_id: r1\n", 6, "fleet.vault_path", keystore.ErrInvalid, "MOUNT/PREFIX"},
		{"relative path", vaultBase + "fleet:\n  vault_path: secret/../x\n  router_id: r1\n", 6, "fleet.vault_path", keystore.ErrInvalid, "relative"},
		{"no router id", vaultBase + "fleet:\n  vault_path: secret/f\n", 6, "fleet.router_id", keystore.ErrMissingField, "this router's name"},
		{"router id with a slash", vaultBase + "fleet:\n  vault_path: secret/f\n  router_id: a/b\n", 7, "fleet.router_id", keystore.ErrInvalid, "letters, digits"},
		{"bad address", vaultBase + "fleet:\n  vault_path: secret/f\n  router_id: r1\n  addresses: [r2.example]\n", 8, "fleet.addresses", keystore.ErrInvalid, "entry 1 is not an IP address"},
		{"unknown field", vaultBase + "fleet:\n  vault_path: secret/f\n  router: r1\n", 7, "fleet", keystore.ErrUnknownField, "unknown field (its name is not shown) in fleet; allowed: vault_path, router_id, addresses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("aokeyd.yaml", []byte(tt.yaml))
			var es keystore.FieldErrors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v is not keystore.FieldErrors", err)
			}
			e := es[0]
			if e.Line != tt.line || e.Field != tt.field || !errors.Is(e, tt.sentinel) || !strings.Contains(e.Error(), tt.msg) {
				t.Errorf("got %q (line %d, field %q), want line %d field %q %v containing %q",
					e.Error(), e.Line, e.Field, tt.line, tt.field, tt.sentinel, tt.msg)
			}
		})
	}
}
