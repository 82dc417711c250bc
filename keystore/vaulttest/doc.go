// Package vaulttest is a Vault-compatible HTTP server for tests, written for
// aokeyd: in memory, fast, with controls no real server has (Fail, Delay,
// ExpireToken) and able to run in a testing/synctest bubble. A real Vault
// (internal/vaultreal, make vault-real) runs the same contract suite; where
// the two differ, real Vault is right and this server is corrected.
//
// It implements only what aokeyd's keystore uses, following the HashiCorp
// Vault 1.21.x HTTP API documentation (developer.hashicorp.com/vault/api-docs):
//
//   - KV secrets engine version 2 at the mounts given in Options.KVMounts:
//     GET    /v1/<mount>/data/<path>[?version=N]
//     POST|PUT /v1/<mount>/data/<path> with {"data":{…},"options":{"cas":N}}
//     GET    /v1/<mount>/metadata/<path>
//     LIST   /v1/<mount>/metadata/<path>/ (also GET ?list=true)
//     DELETE /v1/<mount>/metadata/<path>
//   - AppRole: POST /v1/auth/approle/login with {"role_id","secret_id"}
//   - Tokens: GET /v1/auth/token/lookup-self, POST /v1/auth/token/renew-self
//     with optional {"increment"}; lookup-self's display_name is "root"
//     for the root token, "approle" after an AppRole login, and
//     "token-<name>" for a token issued with TokenOptions.DisplayName
//     ("token" without), as Vault names them; TTL and max TTL against time.Now (the
//     bubble's clock when a test runs the server InMemory in a
//     testing/synctest bubble).
//   - GET /v1/sys/health (no token needed).
//
// Responses use Vault's envelope (request_id, lease_id, renewable,
// lease_duration, data, wrap_info, warnings, auth, mount_type) and error
// shape ({"errors":[…]}): 403 {"errors":["permission denied"]} for a missing,
// unknown or expired token or a denied path, 503 {"errors":["Vault is
// sealed"]} while sealed, 404 {"errors":[]} for a missing KV path, 400 for a
// failed check-and-set or a bad AppRole login. The X-Vault-Token (or
// "Authorization: Bearer") and X-Vault-Namespace headers are honoured; each
// namespace has its own KV storage, tokens are valid in every namespace.
//
// Test controls: Seal/Unseal, Stop/Start (the listener goes away and comes
// back on the same address; in memory, DialContext is refused meanwhile), IssueToken, ExpireToken, AddAppRole, Deny, and
// request counters (Count). The contract test in package keystore runs the
// same suite against a real Vault to keep this server honest.
package vaulttest
