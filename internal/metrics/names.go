package metrics

// Metric names. Every aokeyd metric is listed here.
//
// Per-peer families marked [per_key] are exported only with
// metrics.per_key (Options.PerKey, PerKeyFamilies): the per-key counters
// and per-peer detail that no shipped alert reads. The others are on by
// default, one series a peer each (the socket counters: of its
// established socket), at most MaxDefaultPerPeer (8) a peer.
const (
	// Per peer (labels peer, vrf).
	NamePeerCurrentKeyID = "aokeyd_peer_current_key_id" // SendID of Current_key; -1 when none
	NamePeerRNextKeyID   = "aokeyd_peer_rnext_key_id"   // [per_key] RecvID of RNext_key; -1 when none
	NamePeerKeys         = "aokeyd_peer_keys_installed" // [per_key] keys on the peer's established socket
	NameRotationState    = "aokeyd_rotation_state"      // 1 for the peer's state (label state)
	// 1 while the session is down and the peer's segments fail TCP-AO
	// verification on the listener (only keys no other peer shares count).
	NamePeerVerifyFailing = "aokeyd_peer_verify_failing"
	NamePeerKeyNotFound   = "aokeyd_peer_key_not_found"
	// Seconds since the peer's socket counters (the per-key and per-socket
	// series below) were read from the kernel: a scrape serves what the
	// rotation machine's last poll read, and reads the kernel itself only
	// when that is older than two steady periods (then the age is 0).
	// [per_key]
	NamePeerCountersAge = "aokeyd_peer_counters_age_seconds"

	// Per key (labels peer, vrf, key, send_id, recv_id): TCP_AO_GET_KEYS.
	// [per_key]
	NameKeyPktGood = "aokeyd_key_pkt_good_total"
	NameKeyPktBad  = "aokeyd_key_pkt_bad_total"

	// Per socket (labels peer, vrf, socket): TCP_AO_INFO.
	NameSocketPktGood        = "aokeyd_socket_pkt_good_total" // [per_key]
	NameSocketPktBad         = "aokeyd_socket_pkt_bad_total"
	NameSocketPktKeyNotFound = "aokeyd_socket_pkt_key_not_found_total"
	NameSocketPktAORequired  = "aokeyd_socket_pkt_ao_required_total" // [per_key]

	// Aborted attempts of the peer's roll since its last completed roll
	// (labels peer, vrf, reason: the last abort's); 0 when none.
	NameRotationFailedAttempts = "aokeyd_rotation_failed_attempts"
	// The instant from which the peer has no key to send with: the end of
	// continuous send-lifetime coverage from now (+Inf: never).
	NameSendCoverageEnd = "aokeyd_peer_send_coverage_end_timestamp_seconds"

	// Rotations (labels peer, vrf; aborted also reason). [per_key]
	NameRotationsStarted   = "aokeyd_rotations_started_total"
	NameRotationsCompleted = "aokeyd_rotations_completed_total"
	NameRotationsAborted   = "aokeyd_rotations_aborted_total"

	// Key source.
	NameKeySourceLastSync   = "aokeyd_key_source_last_sync_timestamp_seconds" // last successful read
	NameKeySourceSyncErrors = "aokeyd_key_source_sync_errors_total"

	// Revokes: per socket outcome (label action: deleted, forced-replaced,
	// reset, kept, error), and the wall time of each revoke request.
	NameRevokes        = "aokeyd_revokes_total"
	NameRevokeDuration = "aokeyd_revoke_duration_seconds"

	// Kernel socket option memory (net.core.optmem_max) and what the
	// largest key set needs.
	NameOptmemLimit  = "aokeyd_optmem_max_bytes"
	NameOptmemNeeded = "aokeyd_optmem_needed_bytes"

	// Chains and keys of the key source held back at their last good
	// version (last_good "true"), or whose loss no good version makes up
	// for, so that nothing of theirs is deleted (last_good "false"):
	// labels chain, key ("" for a whole chain), reason (key-rejected,
	// chain-missing, no-usable-key), last_good. Value 1.
	NameKeysHeldBack = "aokeyd_keys_held_back"

	// Keys the never-strand rule keeps on a socket although the desired
	// state would remove them (labels peer, vrf, socket: established or
	// listening, send_id, recv_id, reason: carried — no longer desired,
	// its lifetime ended or it left the key source, but it carries the
	// peer's session or is the key the peer last authenticated with —
	// or edited-in-place — new material under its IDs, held back). Value 1.
	NameKeysKept = "aokeyd_keys_kept"

	// Control socket requests refused by the SO_PEERCRED check.
	NameControlRefused = "aokeyd_control_refused_total"

	// Calls aokeyd made to the BGP speaker's API (label method: the
	// speaker's own method name, e.g. ListPeer).
	NameSpeakerRPCs = "aokeyd_speaker_rpcs_total"

	// The session guard's questions about a peer's session, by result:
	// "hit" answered from the session state aokeyd follows on the
	// speaker's event stream, "miss" asked the speaker about that one
	// neighbor (ListPeer with its address).
	NameSpeakerSessionCache = "aokeyd_speaker_session_cache_total"
)

// Label names.
const (
	LabelPeer     = "peer"
	LabelMethod   = "method"
	LabelVRF      = "vrf"
	LabelKey      = "key"
	LabelSendID   = "send_id"
	LabelRecvID   = "recv_id"
	LabelSocket   = "socket"
	LabelState    = "state"
	LabelReason   = "reason"
	LabelAction   = "action"
	LabelChain    = "chain"
	LabelLastGood = "last_good"
	LabelResult   = "result"
)
