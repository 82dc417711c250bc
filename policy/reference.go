package policy

import (
	_ "embed"
	"fmt"
	"reflect"

	"github.com/aokeyd/aokeyd/internal/refdoc"
	"github.com/aokeyd/aokeyd/tcpao"
)

// Reference is the policy's reference page, aokeyd-policy.yaml(5): every
// field of rawFile, the schema the decoder reads (refdoc.Fields, so a new
// field without an entry in settingDocs fails the reference test), with
// the defaults Parse applies.
func Reference() refdoc.Page {
	t := reflect.TypeFor[rawFile]()
	return refdoc.Page{
		Name:     "aokeyd-policy.yaml",
		Summary:  "aokeyd's rotation policy: which peers use which TCP-AO key chain, and how its keys roll",
		Intro:    referenceIntro,
		Settings: refdoc.WithTypes(refdoc.MustBuild(refdoc.Fields(t), settingDocs()), refdoc.Types(t)),
		Example:  exampleFile,
		SeeAlso:  []string{"aokeyd(8)", "aokeyd.yaml(5)", "aokeyd-keys.yaml(5)", "aoctl-plan(8)", "aoctl-validate(8)"},
	}
}

const referenceIntro = `The policy (aokeyd.yaml's policy.path, by default /etc/aokeyd/policy.yaml) binds peers to key chains and says how each chain's keys roll. It never holds key material: a key chain names a chain of the key source (aokeyd-keys.yaml(5)), and the keys' secrets, IDs and algorithms stay there.

Decoding is strict: an unknown field, a field given twice or a value of the wrong type is a problem; aoctl validate lists each as FILE:LINE:COL: FIELD: PROBLEM. A value that could be key material is never shown. aokeyd refuses to start on a problem, and systemctl reload aokeyd (SIGHUP) keeps the running policy when the new one has one.

Durations are a number with a unit, combinable: 30d, 24h, 90s, 1w, 1d12h (units w, d, h, m, s, ms, us, ns; a bare 0 is zero). Times are RFC 3339 (2026-11-01T00:00:00Z) or a date (2026-11-01, midnight UTC). A lifetime is always, or a mapping with an optional start (absent: since ever) and at most one of end and duration (neither: for ever); the interval is [start, end).

At an instant t a key of a peer's chain is installed when it applies to the peer, is not revoked, and is send-valid at t or accept-valid within t ± accept_tolerance. The key sent with is the send-valid key with the latest send start. aoctl plan shows what aokeyd would do, and when.`

// exampleFile is testdata/example.yaml, the complete example the tests
// parse (TestParseExample).
//
//go:embed testdata/example.yaml
var exampleFile string

// settingDocs documents every setting of the policy, by its path.
func settingDocs() map[string]refdoc.Doc {
	d := FormatDuration
	safety := func(what string) map[string]refdoc.Doc {
		p := what + "."
		return map[string]refdoc.Doc{
			p + "switch_timeout": {Default: d(DefaultSwitchTimeout),
				Text: "How long to wait for the peer to be seen sending with the new key before on_switch_timeout applies. At most the grace of a rotated chain."},
			p + "on_switch_timeout": {Type: string(SwitchRetry) + " | " + string(SwitchAlert), Default: string(DefaultOnSwitchTimeout),
				Text: "retry: announce the new key again every retry_after, for as long as the old key stays send-valid; alert: keep sending with the old key, stop announcing the new one, and alert."},
			p + "retry_after": {Default: d(DefaultRetryAfter), Text: "The pause between announcements with on_switch_timeout retry."},
			p + "on_revoke_only_key": {Type: string(RevokeKeep) + " | " + string(RevokeReset), Default: string(DefaultOnRevokeOnlyKey),
				Text: "When the only installed key of a peer is revoked and no other key is desired: keep leaves it installed and alerts (the session survives until a new key arrives); reset removes it, which resets the session."},
			p + "on_key_expiry": {Type: string(ExpiryKeep) + " | " + string(ExpiryRemove), Default: string(DefaultOnKeyExpiry),
				Text: "When a key's lifetime ends while a session still uses it and no successor took over: keep leaves it on the session and the listener and alerts at once (the session and its next reconnect survive); remove treats it as revoked at its end."},
		}
	}
	docs := map[string]refdoc.Doc{
		"version":  {Default: "1", Text: "The schema's version; only 1 is supported."},
		"defaults": {Text: "Defaults of every key chain and peer binding."},
		"defaults.accept_tolerance": {Default: d(DefaultAcceptTolerance),
			Text: "Widen every accept lifetime by this much on both ends (RFC 8177 accept-tolerance): the clock skew between the two routers."},
		"defaults.ao_required": {Default: fmt.Sprint(DefaultAORequired),
			Text: "Managed peers' segments without TCP-AO are dropped (the kernel's ao_required). A peer without a key to send with never gets it."},
		"defaults.include_tcp_options": {Default: "each key's own tcp_options",
			Text: "Override the keys' TCP option flag (RFC 5925's include/exclude) for every binding."},
		"safety": {Text: "How cautious a roll is; a peer binding may override each field."},
		"key_chains": {Required: "yes",
			Text: "The key chains peers are bound to, each reading a chain of the key source."},
		"key_chains[].name":         {Required: "yes", Text: "The chain's name, unique; peers name it in key_chain."},
		"key_chains[].source_chain": {Default: "the name", Text: "The chain of the key source this chain reads."},
		"key_chains[].accept_tolerance": {Default: "defaults.accept_tolerance",
			Text: "This chain's accept tolerance."},
		"key_chains[].keys": {Default: "every key of the source chain",
			Text: "The keys of the source chain this chain uses, with lifetimes that override the keys' own."},
		"key_chains[].keys[].name": {Required: "yes", Text: "The key's name in the source chain.", Example: `name: "2026-11"`},
		"key_chains[].keys[].lifetime": {Type: "lifetime",
			Text: "Sets both send_lifetime and accept_lifetime (RFC 8177 send-accept-lifetime)."},
		"key_chains[].keys[].send_lifetime": {Type: "lifetime", Default: "the key's own",
			Text: "When the key may be sent with.", Example: "send_lifetime: {start: 2026-11-01T00:00:00Z, end: 2026-12-01T00:00:00Z}"},
		"key_chains[].keys[].accept_lifetime": {Type: "lifetime", Default: "the key's own",
			Text: "When the key is accepted; it must cover the send lifetime."},
		"key_chains[].rotation": {Text: "aokeyd generates the chain's keys: a new one every interval, accepted lead before it is sent with, the old one kept grace after. lead, grace and jitter must be shorter than interval."},
		"key_chains[].rotation.start": {Type: "time", Default: "1970-01-01T00:00:00Z",
			Text: "The anchor of rotation 0."},
		"key_chains[].rotation.interval": {Required: "with rotation", Text: "A new key every interval.", Example: "interval: 30d"},
		"key_chains[].rotation.lead":     {Required: "with rotation", Text: "Accept the new key this long before sending with it."},
		"key_chains[].rotation.grace":    {Required: "with rotation", Text: "Keep the old key this long after the switch."},
		"key_chains[].rotation.jitter": {Default: "0",
			Text: "Spread the peers' switches over [0, jitter), so that not every session switches at once (seeded by aokeyd.yaml's policy.jitter_seed)."},
		"key_chains[].rotation.algorithm": {Type: "hmac(sha1) | hmac(sha256) | cmac(aes128)", Default: string(DefaultRotationAlgorithm)},
		"key_chains[].rotation.key_length": {Default: fmt.Sprint(DefaultRotationKeyLength),
			Text: fmt.Sprintf("The generated keys' length in bytes, 1..%d (16 for cmac(aes128)).", tcpao.MaxKeyLen)},
		"key_chains[].rotation.mac_length": {Default: fmt.Sprint(tcpao.DefaultMACLen),
			Text: fmt.Sprintf("The MAC length in bytes, 1..%d.", MaxMACLength)},
		"peers": {Required: "yes", Text: "The peer bindings. Bindings in one VRF must not overlap."},
		"peers[].neighbor": {Type: "address or prefix", Required: "yes, or neighbor_interface",
			Text: "The peer's address, or a prefix of peers (no host bits set).", Example: "neighbor: 192.0.2.1"},
		"peers[].neighbor_interface": {Type: "interface name, \"*\" or a list of names", Required: "instead of neighbor",
			Text:    "Interface neighbours (BGP unnumbered: FRR's neighbor swp1 interface), by the interface they peer on; \"*\" binds every interface neighbour of the VRF. A name is bound once per VRF, and \"*\" alone.",
			Example: `neighbor_interface: "*"`},
		"peers[].vrf":       {Default: "the default VRF", Text: "The VRF device the session is in."},
		"peers[].key_chain": {Required: "yes", Text: "A name of key_chains."},
		"peers[].include_tcp_options": {Default: "defaults.include_tcp_options",
			Text: "Override the keys' TCP option flag for this peer."},
		"peers[].ao_required": {Default: "defaults.ao_required", Text: "This peer's ao_required."},
		"peers[].safety":      {Text: "Overrides of safety for this peer."},
	}
	for k, v := range safety("safety") {
		docs[k] = v
	}
	for k, v := range safety("peers[].safety") {
		v.Default = "safety's"
		docs[k] = v
	}
	return docs
}
