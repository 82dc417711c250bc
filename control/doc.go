// Package control is aokeyd's control API: HTTP with JSON bodies over a unix
// socket, spoken by aoctl (Client) and served by the daemon (Server over a
// Backend the daemon implements).
//
// Routes (all bodies JSON, field names snake_case and stable):
//
//	GET  /v1/health              HealthReport
//	GET  /v1/status[?peer=P]     StatusReport (every peer, or one)
//	GET  /v1/plan                PlanReport: what the controller would do now
//	POST /v1/rotate              RotateRequest  -> RotateResult
//	POST /v1/revoke              RevokeRequest  -> RevokeResult
//
// Errors are {"error": "...", "code": "..."} with status 400 (ErrInvalid),
// 404 (ErrNotFound), 403 (ErrRefused) or 500; Client turns them back into
// errors that wrap the same sentinels, and a socket it cannot reach into
// ErrUnreachable.
//
// Access: Listen creates the socket with mode 0660 and owner root:group.
// On top of the file mode, Server reads every connection's peer credentials
// (SO_PEERCRED) and refuses, with 403 and a log line, requests from a process
// that is not root, not the daemon's own uid, not in AllowUIDs, and whose
// primary or supplementary groups do not include AllowGID.
//
// Debug with curl: curl --unix-socket /run/aokeyd/control.sock http://aokeyd/v1/status
//
// No DTO field can carry key bytes: keys are named by chain, name and IDs.
package control
