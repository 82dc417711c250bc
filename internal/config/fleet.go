package config

import (
	"net/netip"

	"github.com/aokeyd/aokeyd/internal/fleet"
	"github.com/aokeyd/aokeyd/keystore"
)

func (p *parser) checkFleet(c *Config) {
	f := c.Fleet
	if f == nil {
		return
	}
	if c.KeySource.Type != SourceVault {
		p.at("fleet", keystore.ErrInvalid, "needs key_source.type %s: the fleet documents live in the key source's Vault", SourceVault)
	}
	if f.VaultPath == "" {
		p.at("fleet.vault_path", keystore.ErrMissingField, "the KV v2 mount and prefix, e.g. secret/aokeyd/fleet")
	} else if _, _, err := fleet.ParsePath(f.VaultPath); err != nil {
		p.at("fleet.vault_path", keystore.ErrInvalid, "want MOUNT/PREFIX without empty or relative segments, e.g. secret/aokeyd/fleet")
	}
	switch {
	case f.RouterID == "":
		p.at("fleet.router_id", keystore.ErrMissingField, "this router's name in the fleet (letters, digits, . - _)")
	case !fleet.ValidRouterID(f.RouterID):
		p.at("fleet.router_id", keystore.ErrInvalid, "use letters, digits, '.', '-' and '_' only (at most 128)")
	}
	for i, a := range f.Addresses {
		x, err := netip.ParseAddr(a)
		if err != nil {
			p.at("fleet.addresses", keystore.ErrInvalid, "entry %d is not an IP address", i+1)
			continue
		}
		f.Addresses[i] = x.Unmap().WithZone("").String()
	}
}
