package control

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// role is what a caller may do; roles are ordered.
type role int

const (
	roleNone  role = iota
	roleRead       // health, status, plan
	roleAdmin      // also rotate, revoke, replace, adopt and migrate
)

var errNotAdmin = errors.New("not in the admin group")

// neededRole is the role a request needs: a state-changing method needs
// admin, everything else read.
func neededRole(r *http.Request) role {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return roleRead
	}
	return roleAdmin
}

// commandOf names a request for logs and refusals ("revoke").
func commandOf(r *http.Request) string {
	return strings.TrimPrefix(r.URL.Path, "/v1/")
}

// roleOf decides what the peer with c may do. Root, the daemon's own uid
// and AllowUIDs are admins; otherwise the primary group and the
// supplementary groups as of connect() (SO_PEERGROUPS) are checked against
// the admin group, then the read group.
func (s *Server) roleOf(c Cred) (role, error) {
	if c.UID == 0 || c.UID == s.o.OwnUID || slices.Contains(s.o.AllowUIDs, c.UID) {
		return roleAdmin, nil
	}
	in := func(gid uint32) bool { return c.GID == gid || slices.Contains(c.Groups, gid) }
	switch {
	case s.o.HaveAdminGID && in(s.o.AdminGID):
		return roleAdmin, nil
	case s.o.HaveGID && in(s.o.AllowGID):
		return roleRead, nil
	case !s.o.HaveGID && !s.o.HaveAdminGID:
		return roleNone, errors.New("uid not allowed")
	}
	return roleNone, fmt.Errorf("uid not allowed and not in the read or admin group")
}

// admit reads c's peer credentials when it is accepted and tells whether
// it is an admin's, so that a slot is chosen by role. The credentials go
// with the connection to Handler, which checks each request's role.
func (s *Server) admit(c net.Conn) (credResult, bool) {
	cred, err := s.credOf(c)
	if err != nil {
		return credResult{cred, err}, false
	}
	r, _ := s.roleOf(cred)
	return credResult{cred, nil}, r == roleAdmin
}

type auditKey struct{}

// auditCred is the caller's credentials Handler put in r's context.
func auditCred(r *http.Request) Cred {
	c, _ := r.Context().Value(auditKey{}).(Cred)
	return c
}

// audit logs one state-changing call: who (uid, gid, pid), what (the
// command and its arguments: names and addresses, never key material) and
// how it ended. Allowed or not, every such call leaves one line.
func (s *Server) audit(r *http.Request, c Cred, command string, args []any, err error) {
	attrs := []any{"uid", c.UID, "gid", c.GID, "pid", c.PID, "command", command}
	attrs = append(attrs, args...)
	if err != nil {
		attrs = append(attrs, "outcome", "error", "err", err.Error())
	} else {
		attrs = append(attrs, "outcome", "ok")
	}
	s.log.Log(r.Context(), slog.LevelWarn, "control audit", attrs...)
}

// refusedArgs reads a refused state-changing request's arguments for its
// audit line (bounded by MaxBody and the read timeout; never acted on).
func refusedArgs(r *http.Request) []any {
	switch commandOf(r) {
	case "revoke":
		var req RevokeRequest
		if readJSON(r, &req) == nil {
			return revokeArgs(req)
		}
	case "rotate":
		var req RotateRequest
		if readJSON(r, &req) == nil {
			return rotateArgs(req)
		}
	case "replace":
		var req ReplaceRequest
		if readJSON(r, &req) == nil {
			return replaceArgs(req)
		}
	case "adopt":
		var req AdoptRequest
		if readJSON(r, &req) == nil {
			return adoptArgs(req)
		}
	case "migrate":
		var req MigrateRequest
		if readJSON(r, &req) == nil {
			return migrateArgs(req)
		}
	}
	return nil
}

func revokeArgs(req RevokeRequest) []any {
	return []any{"chain", req.Chain, "key", req.Key, "peer", shownPeer(req.Peer), "vrf", shownVRF(req.VRF)}
}

func replaceArgs(req ReplaceRequest) []any {
	return []any{"chain", req.Chain, "key", req.Key, "md5", req.MD5}
}

func adoptArgs(req AdoptRequest) []any {
	return []any{"peer", shownPeer(req.Peer), "vrf", shownVRF(req.VRF), "prefix", shownPrefix(req.Prefix)}
}

func migrateArgs(req MigrateRequest) []any {
	return []any{"peer", shownPeer(req.Peer), "vrf", shownVRF(req.VRF), "all", req.All, "at", req.At, "bound", time.Duration(req.Bound), "abort", req.Abort}
}

func rotateArgs(req RotateRequest) []any {
	return []any{"peer", shownPeer(req.Peer), "vrf", shownVRF(req.VRF), "all", req.All}
}
