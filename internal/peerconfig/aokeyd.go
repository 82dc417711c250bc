package peerconfig

import (
	"encoding/hex"
	"strconv"

	"github.com/aokeyd/aokeyd/keystore"
)

const aokeydDoc = "aokeyd docs/keys.md (the YAML key file; the orientation rule) and internal/config/default.yaml"

const gobgpDoc = "GoBGP v3.37 configuration (docs/sources/configuration.md: [[neighbors]], transport passive-mode; its only authentication is auth-password, TCP MD5); TCP-AO for gobgpd is installed by aokeyd (docs/speakers.md: gobgpd neighbors with TCP-AO are passive-mode = true)"

func yamlLifetime(l keystore.Lifetime) string {
	switch {
	case l.IsAlways():
		return "always"
	case l.End.IsZero():
		return "{start: " + fmtTime(l.Start) + "}"
	case l.Start.IsZero():
		return "{end: " + fmtTime(l.End) + "}"
	}
	return "{start: " + fmtTime(l.Start) + ", end: " + fmtTime(l.End) + "}"
}

// aokeyd renders the far end as a second aokeyd: its key file (the mirror
// image of this chain) and the config and policy lines that bind it.
func (r *renderer) aokeyd() {
	r.header("#", aokeydDoc)
	r.aokeydFiles()
}

func (r *renderer) aokeydFiles() {
	l := r.l
	r.placeholderNote("#", "aokeyd")
	r.printf("# --- keys.yaml of the far end (mode 0600) ---\nchains:\n  %s:\n", l.Chain)
	peers := r.local()
	if r.l.Unnumbered && r.l.Local == "" {
		// aokeyd's router's link-local address, learned at run time (it
		// follows the MAC): the link's prefix.
		peers = "fe80::/64"
	}
	r.printf("    peers: [%s]\n", strconv.Quote(peers))
	if l.VRF != "" {
		r.printf("    vrf: %s\n", strconv.Quote(l.VRF))
	}
	r.printf("    keys:\n")
	for _, k := range l.Keys {
		opt := "include"
		if !k.IncludeTCPOptions {
			opt = "exclude"
		}
		r.printf("      - name: %s\n", strconv.Quote(k.Name))
		r.printf("        send_id: %d\n        recv_id: %d\n", k.SendID, k.RecvID)
		r.printf("        algorithm: %s\n", k.Algorithm)
		// The placeholder is the value: a plain scalar holding ": ",
		// which YAML refuses ("mapping values are not allowed in this
		// context"), so the key file does not load (quoted, aokeyd would
		// still refuse it as no hex).
		r.printf("        secret_hex: %s\n", r.notRendered(r.secret(k, func(b []byte) string { return strconv.Quote(hex.EncodeToString(b)) })))
		r.printf("        maclen: %d\n        tcp_options: %s\n", k.MACLen, opt)
		r.printf("        send_lifetime: %s\n        accept_lifetime: %s\n", yamlLifetime(k.Send), yamlLifetime(k.Accept))
	}
	r.printf("# --- policy.yaml of the far end ---\n")
	r.printf("# version: 1\n# key_chains:\n#   - name: %s\n", l.Chain)
	if l.AcceptTolerance > 0 {
		r.printf("#     accept_tolerance: %s\n", fmtDur(l.AcceptTolerance))
	}
	if l.Unnumbered {
		// The far end peers with aokeyd's router as an interface
		// neighbour too: FRR's `neighbor IFACE interface`, bound by
		// interface.
		r.printf("# peers:\n#   - neighbor_interface: %s\n#     key_chain: %s\n", r.iface(), l.Chain)
	} else {
		r.printf("# peers:\n#   - neighbor: %s\n#     key_chain: %s\n", r.local(), l.Chain)
	}
	if l.VRF != "" {
		r.printf("#     vrf: %s\n", l.VRF)
	}
	r.printf("# --- aokeyd.yaml of the far end ---\n")
	r.printf("# key_source: {type: file, file: {path: keys.yaml}}\n# policy: {path: policy.yaml}\n")
	if l.Unnumbered {
		r.printf("# speaker: {type: frr}\n# --- bgpd.conf of the far end (FRR under aokeyd) ---\n")
		vrf := ""
		if l.VRF != "" {
			vrf = " vrf " + l.VRF
		}
		r.printf("# router bgp <asn>%s\n#  neighbor %s interface remote-as <asn>\n", vrf, r.iface())
	}
}

// gobgp renders the far end as gobgpd with aokeyd beside it: GoBGP itself
// cannot configure TCP-AO.
func (r *renderer) gobgp() {
	r.header("#", gobgpDoc)
	r.refuse("", "GoBGP v3.37 has no TCP-AO setting (auth-password is TCP MD5, RFC 2385, which cannot share a socket with TCP-AO): run aokeyd beside gobgpd with the files below")
	r.printf("# REFUSED: %s\n", r.refused[0].Reason)
	r.printf("# --- gobgpd.toml of the far end: the neighbor, passive, without auth-password ---\n")
	r.printf("[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %s\n    peer-as = <asn>\n", strconv.Quote(r.local()))
	if r.l.VRF != "" {
		// A VRF peer: the neighbor in gobgpd's VRF of that name (one that
		// [[vrfs]] defines).
		r.printf("    vrf = %s\n", strconv.Quote(r.l.VRF))
	}
	r.printf("  [neighbors.transport.config]\n")
	r.printf("    # aokeyd keys only sockets it can reach before connect(): passive, unless this gobgpd\n")
	r.printf("    # runs under `aokeyd exec`. Two passive ends never connect: one of them opens actively.\n")
	r.printf("    passive-mode = true\n")
	r.aokeydFiles()
}
