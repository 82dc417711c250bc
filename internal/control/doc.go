// Package control is aokeyd's control API: HTTP with JSON bodies over a unix
// socket, spoken by aoctl (Client) and served by the daemon (Server over a
// Backend the daemon implements).
//
// Routes (all bodies JSON, field names snake_case and stable):
//
//	GET  /v1/health              HealthReport
//	GET  /v1/status[?peer=P]     StatusReport (every peer, or one)
//	GET  /v1/plan                PlanReport: what the controller would do now
//	GET  /v1/rolls?peer=P&after=N&wait=S
//	                             RollsReport: P's roll steps after N, waiting
//	                             up to S seconds for one (RollWatcher)
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
// (SO_PEERCRED) and supplementary groups (SO_PEERGROUPS), both as of
// connect(), and gives it a role: admin (root, the daemon's own uid,
// AllowUIDs, members of AdminGID) may do everything; read (members of
// AllowGID) the GET routes only. Anything else is refused with 403 and a
// log line. Every POST, allowed or refused, logs one "control audit" line:
// uid, gid, pid, command, arguments (names, never key material), outcome.
//
// Limits: ReadTimeout (a request's headers and body), IdleTimeout (between
// requests), WriteTimeout (handling and answer), MaxConns connections at
// once and AdminConns more for admins only (the role is read at accept,
// before a slot is taken; one more is answered 503 and closed, or closed
// unanswered while a few others are being refused), MaxBody per request.
// Out of descriptors, the accept loop retries with a backoff (at most
// 100ms) and logs the spell, not each retry.
// A request body is exactly one JSON object: trailing data other than
// white space is refused (400) before anything is done.
//
// Debug with curl: curl --unix-socket /run/aokeyd/control.sock http://aokeyd/v1/status
//
// No DTO field can carry key bytes: keys are named by chain, name and IDs.
package control
