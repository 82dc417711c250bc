// Package policy is aokeyd's rotation policy: which peers use which TCP-AO
// key chain, and how the keys of a chain roll over.
//
// A policy is a YAML file (see Load and Parse). Decoding is strict: an
// unknown field, a duplicate mapping key or a value of the wrong type is an
// error, and every problem names the file, line and field. Parse reports all
// problems at once as a Problems value. Problem is keystore.FieldError, the
// positioned-error type every decoder of operator input shares, and the
// shared sentinels (ErrSyntax, ErrUnknownField, ErrMissingField, ErrInvalid,
// ErrDuplicate) are keystore's, so one errors.Is or errors.As classifies a
// problem in a policy, a key source or aokeyd's config alike.
//
// The policy never holds key bytes. Keys (MKTs) come from a key source as a
// keystore.Snapshot; a policy key chain references a source chain by name.
// Three pure functions answer the controller's questions:
//
//   - Policy.Desired(snap, peer, vrf, t): the keys the peer's socket should
//     have at t, which of them may be sent with, the preferred send key,
//     ao_required, and the next instant at which the answer changes.
//   - Policy.Validate(snap, now, horizon): everything wrong with the policy
//     together with the snapshot over the coming horizon.
//   - Schedule (Policy.Schedule(chain)): the plan of generated rotations,
//     with per-peer jitter from a seed (WithJitterSeed).
//
// # Schema
//
// Every setting, its default and an example are in aokeyd-policy.yaml(5)
// (docs/reference/aokeyd-policy.yaml.md), generated from the raw types of
// schema.go, the schema the decoder reads, and the table of reference.go
// (Reference): a field without its entry fails the reference test.
//
// Bindings in one VRF must not overlap (a host inside another binding's
// prefix is an error). Policy.BindingFor finds a peer's binding through an
// index built at parse time (host addresses, then one lookup per prefix
// length in use), so a lookup does not grow with the number of bindings.
// An MKT whose Peers or VRF are set in the key source applies only to
// those peers or that VRF.
//
// # Desired keys
//
// At instant t a key of the peer's chain is desired when it applies to the
// peer, is not revoked, and is send-valid at t or accept-valid within
// t ± accept_tolerance. The preferred send key is the send-valid key with
// the latest send start (ties: later send end, then greater name).
//
// # Example
//
// A complete policy (policy/testdata/example.yaml):
//
//	# aokeyd rotation policy: which peers use which TCP-AO key chain, and how
//	# keys roll. Keys themselves (secrets, IDs, algorithms) come from the key
//	# source (Vault or a YAML key file); this file only references them.
//	version: 1
//
//	defaults:
//	  # Widen every accept lifetime by this much on both ends (clock skew
//	  # between the two routers). RFC 8177 accept-tolerance; default 0.
//	  accept_tolerance: 5m
//	  # Drop segments without TCP-AO from managed peers (default true).
//	  ao_required: true
//
//	safety:
//	  # Wait this long for the peer to be seen sending with the new key.
//	  switch_timeout: 5m
//	  # Then: retry (announce the new key again every retry_after) or alert.
//	  on_switch_timeout: retry
//	  retry_after: 1m
//	  # Revoking the only key of a peer: keep it installed and alert, or reset
//	  # the session.
//	  on_revoke_only_key: keep
//
//	key_chains:
//	  # Hand-managed chain: two MKTs of the source chain "core", with lifetimes
//	  # set here (RFC 8177 style). The next key is accepted a day before anyone
//	  # sends with it, the old one is kept a day after.
//	  - name: core
//	    source_chain: core
//	    keys:
//	      - name: "2026-10"
//	        send_lifetime: {start: 2026-10-01T00:00:00Z, end: 2026-11-02T00:00:00Z}
//	        accept_lifetime: {start: 2026-09-30T00:00:00Z, end: 2026-11-02T00:00:00Z}
//	      - name: "2026-11"
//	        send_lifetime: {start: 2026-11-01T00:00:00Z}
//	        accept_lifetime: {start: 2026-10-31T00:00:00Z}
//
//	  # Chain whose MKTs carry their own lifetimes in the key source: every MKT
//	  # of source chain "ix" is used.
//	  - name: ix
//	    accept_tolerance: 2m
//
//	  # Generated rotation: aokeyd creates a new key every 30 days; it is
//	  # accepted 24h before it is sent with and the old one is kept 24h after.
//	  # Peers are spread over 6h so that not every session switches at once.
//	  - name: customers
//	    source_chain: customers-generated
//	    rotation:
//	      start: 2026-01-01T00:00:00Z
//	      interval: 30d
//	      lead: 24h
//	      grace: 24h
//	      jitter: 6h
//	      algorithm: hmac(sha256)
//	      key_length: 32
//	      mac_length: 12
//
//	peers:
//	  - neighbor: 192.0.2.1
//	    key_chain: core
//	  - neighbor: 2001:db8::1
//	    key_chain: core
//	    include_tcp_options: false
//	  # A prefix of peers (for a listening socket), in a VRF.
//	  - neighbor: 198.51.100.0/24
//	    vrf: vrf-ix
//	    key_chain: ix
//	    ao_required: false
//	  - neighbor: 203.0.113.7
//	    key_chain: customers
//	    safety:
//	      on_switch_timeout: alert
//	      on_revoke_only_key: reset
package policy
