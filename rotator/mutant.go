//go:build !aokeyd_mutant_revoke_skips_listener

package rotator

// mutantRevokeSkipsListener is false in every real build. The chaos
// checker's own proof builds aokeyd with the tag
// aokeyd_mutant_revoke_skips_listener (make chaos-mutant): revoked keys
// then stay on listening sockets, and the run must fail on the
// revoked-left invariant.
const mutantRevokeSkipsListener = false
