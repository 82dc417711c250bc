//go:build aokeyd_mutant_revoke_skips_listener

package rotator

// A deliberately broken build for the chaos checker's proof (see
// mutant.go): never shipped.
const mutantRevokeSkipsListener = true
