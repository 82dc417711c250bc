package keystore

import (
	"fmt"

	"github.com/aokeyd/aokeyd/internal/refdoc"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Reference is the key file's reference page, aokeyd-keys.yaml(5): every
// field the decoders accept (the field lists of unknownfield.go, which
// are what they check against), so a new field without an entry in
// settingDocs fails the reference test.
func Reference() refdoc.Page {
	return refdoc.Page{
		Name:     "aokeyd-keys.yaml",
		Summary:  "aokeyd's TCP-AO keys: a YAML key file, or chain documents in Vault",
		Intro:    referenceIntro,
		Settings: withStringType(refdoc.MustBuild(schemaPaths(), settingDocs())),
		Example:  ReferenceExample,
		SeeAlso:  []string{"aokeyd(8)", "aokeyd.yaml(5)", "aokeyd-policy.yaml(5)", "aoctl-peer-config(8)", "aoctl-revoke(8)"},
	}
}

// withStringType gives a setting without a type the type string.
func withStringType(s []refdoc.Setting) []refdoc.Setting {
	for i := range s {
		if s[i].Type == "" {
			s[i].Type = "string"
		}
	}
	return s
}

// schemaPaths are the paths of every field the decoders accept.
func schemaPaths() []string {
	out := []string{"chains", "chains.NAME"}
	for _, f := range chainFields {
		out = append(out, "chains.NAME."+f)
		switch f {
		case "keys":
			for _, k := range keyFields {
				out = append(out, "chains.NAME.keys[]."+k)
				if k == "send_lifetime" || k == "accept_lifetime" {
					for _, l := range lifetimeFields {
						out = append(out, "chains.NAME.keys[]."+k+"."+l)
					}
				}
			}
		case "md5":
			for _, m := range md5Fields {
				out = append(out, "chains.NAME.md5."+m)
			}
		}
	}
	return out
}

const referenceIntro = `aokeyd reads TCP-AO Master Key Tuples (MKTs) from a YAML key file (aokeyd.yaml's key_source.file.path) or from HashiCorp Vault (key_source.vault). Both hold the same fields: the file maps each chain's name to its chain, and in Vault each chain is one KV version 2 secret at MOUNT/PREFIX/chains/NAME whose data is the chain as JSON (the fields below without chains.NAME).

Every key is written from the point of view of the router that loads it: send_id is the KeyID this router sends, recv_id the one it expects from the peer. The peer holds the mirror image (send_id and recv_id swapped); name, algorithm, secret, maclen and tcp_options are equal on both ends. aoctl peer-config PEER --for TARGET renders the far end's configuration from these keys.

A key that every far end takes (Junos, IOS-XR, EOS, BIRD, FRR, gobgpd): the same number as send_id and recv_id (an EOS secret has one key ID for both), algorithm hmac(sha1) or cmac(aes128) (the two aoctl peer-config renders for Junos and IOS-XR; EOS takes hmac(sha256) from 4.31.1F), the default maclen 12 (EOS's MACs are 96 bits) and tcp_options include, lifetimes with an end within 1993..2035 (IOS-XR's years; EOS lifetimes are infinite or have an end), and a secret that is printable text: Junos, IOS-XR and EOS take the secret as a string, so its bytes must be printable ASCII without spaces, quotes or backslashes. Make one, and give aokeyd its bytes:

	secret=$(head -c 24 /dev/urandom | base64 | tr -d '+/=')   # the far end's text
	printf %s "$secret" | base64                                # secret_b64 for this file

For cmac(aes128), which takes exactly 16 bytes: secret=$(head -c 8 /dev/urandom | xxd -p). Any other key (head -c 20 /dev/urandom | base64 as secret_b64) serves aokeyd, gobgpd, FRR and BIRD ends.

The file must not be readable by group or others (chmod 600), unless aokeyd.yaml's key_source.file.allow_group_readable says so. aokeyd reads it every key_source.refresh and applies what changed. A key that does not decode is rejected on its own, with a problem naming the file, line, column and field (aoctl validate, aoctl status), and the chain's other keys still load; a key that was good and is now rejected keeps its last good version. aokeyd refuses to start on any problem aoctl validate finds in the keys, in its words (a Vault that gives no answer at start is waited for instead), and a reload (SIGHUP) with one is refused, the keys read all the same. No problem, warning or log line shows a secret, its length, or any value of the key source: a secret pasted into the wrong field is named by its place.

To remove a compromised key everywhere: aoctl revoke CHAIN/KEY (it sets revoked: true here, or in Vault). Durations are seconds, a Go duration (90m, 36h) or days (30d); times are RFC 3339.`

// ReferenceExample is the reference page's complete key file, router A of
// docs/keys.md (its secrets are examples: generate your own).
const ReferenceExample = `chains:
  core:
    peers: [192.0.2.2, "2001:db8::2"]       # router B
    keys:
      - name: "2026-11"
        send_id: 1                          # A sends 1 ...
        recv_id: 101                        # ... and expects 101 from B
        algorithm: hmac(sha256)
        secret_b64: "bse66AbvmG8CkEv0lVDN6oRGUM4="
        send_lifetime: {start: "2026-11-01T00:00:00Z", end: "2026-12-01T00:00:00Z"}
        accept_lifetime: {start: "2026-10-31T00:00:00Z", end: "2026-12-02T00:00:00Z"}
      - name: "2026-12"
        send_id: 2
        recv_id: 102
        algorithm: cmac(aes128)
        secret_hex: "07d57a38c29a58c0c479f5224823bcf6"
        send_lifetime: {start: "2026-12-01T00:00:00Z", duration: 31d}
        accept_lifetime: {start: "2026-11-30T00:00:00Z", duration: 33d}
  edge:
    peers: [198.51.100.7]                   # still on TCP-MD5, until aoctl migrate
    md5: {secret_hex: "6d64352d50617373776f72642d31"}`

// settingDocs documents every field of a key source, by its path.
func settingDocs() map[string]refdoc.Doc {
	lifetime := func(which, what string) map[string]refdoc.Doc {
		p := "chains.NAME.keys[]." + which
		return map[string]refdoc.Doc{
			p:               {Type: "always | mapping", Default: "always", Text: what},
			p + ".start":    {Type: "time", Default: "since ever", Text: "Where the lifetime starts (RFC 3339)."},
			p + ".end":      {Type: "time", Default: "for ever", Text: "Where it ends, after start; or give duration."},
			p + ".duration": {Type: "duration", Text: "The lifetime's length from start (seconds, 90m, 36h, 30d), instead of end."},
		}
	}
	secret := func(which string) map[string]refdoc.Doc {
		return map[string]refdoc.Doc{
			which + ".secret_b64": {Type: "base64", Required: "this or secret_hex",
				Text: fmt.Sprintf("The secret's bytes in standard base64: 1..%d bytes (exactly 16 for cmac(aes128)).", tcpao.MaxKeyLen)},
			which + ".secret_hex": {Type: "hex", Required: "this or secret_b64", Text: "The secret's bytes in hex."},
		}
	}
	docs := map[string]refdoc.Doc{
		"chains":      {Type: "mapping of names to chains", Required: "yes (a file only)", Text: "The key file's chains, by name. A file without a chain is refused."},
		"chains.NAME": {Type: "mapping", Text: "One chain, named by 1..64 of A-Za-z0-9._-, starting with a letter or digit; the policy's key chains read it by this name (source_chain)."},
		"chains.NAME.peers": {Type: "list of addresses or prefixes", Required: "here or on every key",
			Text: fmt.Sprintf("The peers the chain's keys apply to: IPv4 or IPv6 addresses or prefixes without host bits, at most %d.", maxPeers)},
		"chains.NAME.vrf": {Default: "the default VRF", Text: "The VRF device the keys apply in (1..15 of A-Za-z0-9_.:-)."},
		"chains.NAME.keys": {Type: "list of keys", Required: "unless md5 is set",
			Text: fmt.Sprintf("The chain's keys, at most %d.", maxKeysPerChain)},
		"chains.NAME.keys[].name": {Required: "yes",
			Text:    "Unique in the chain; pairs a key across routers. A plain identifier: 1..64 of A-Za-z0-9._-, starting with a letter or digit, without a run of 24 letters and digits (key material looks like that), never the secret: status, plan and peer-config show it.",
			Example: `name: "2026-11"`},
		"chains.NAME.keys[].send_id": {Type: "integer", Required: "yes", Text: "0..255: the KeyID this router sends with this key."},
		"chains.NAME.keys[].recv_id": {Type: "integer", Required: "yes",
			Text: "0..255: the KeyID this router expects from the peer. A send_id or recv_id may not be used by another live key for an overlapping peer in the same VRF."},
		"chains.NAME.keys[].algorithm": {Type: "hmac(sha1) | hmac(sha256) | cmac(aes128)", Required: "yes",
			Text: "The MAC algorithm (also written sha1, sha256, aes-128-cmac). aoctl validate checks that this machine's kernel has it."},
		"chains.NAME.keys[].maclen": {Type: "integer", Default: fmt.Sprint(tcpao.DefaultMACLen), Text: fmt.Sprintf("The MAC length in bytes, 1..%d.", maxMACLen)},
		"chains.NAME.keys[].peers":  {Type: "list of addresses or prefixes", Default: "the chain's peers", Text: "The peers this key applies to."},
		"chains.NAME.keys[].vrf":    {Default: "the chain's vrf", Text: "The VRF this key applies in."},
		"chains.NAME.keys[].tcp_options": {Type: "include | exclude", Default: "include",
			Text: "Whether the MAC covers TCP options (RFC 5925); exclude sets TCP_AO_KEYF_EXCLUDE_OPT."},
		"chains.NAME.keys[].revoked": {Type: "true | false", Default: "false",
			Text: "true removes the key from every socket, and it is never installed again (aoctl revoke CHAIN/KEY sets it)."},
		"chains.NAME.md5": {Type: "mapping",
			Text: "A TCP-MD5 password (RFC 2385) for the chain's peers while they still run TCP-MD5, until aoctl migrate moves them to TCP-AO; it applies to the chain's peers and vrf, which it needs. 1..80 printable ASCII characters without space, quote or backslash."},
		"chains.NAME.md5.revoked": {Type: "true | false", Default: "false", Text: "true removes the password, never installed again."},
	}
	for _, m := range []map[string]refdoc.Doc{
		lifetime("send_lifetime", "When this router may send with the key: always, {start, end} or {start, duration}. It must lie within accept_lifetime."),
		lifetime("accept_lifetime", "When this router accepts the key."),
		secret("chains.NAME.keys[]"), secret("chains.NAME.md5"),
	} {
		for k, v := range m {
			docs[k] = v
		}
	}
	return docs
}
