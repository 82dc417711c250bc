package vaulttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Token login, lookup and renewal, as Vault's auth/token and auth/approle
// endpoints answer them.

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (s *Server) login(r *http.Request) reply {
	var in struct {
		RoleID   string `json:"role_id"`
		SecretID string `json:"secret_id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		return errReply(http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
	}
	if in.RoleID == "" {
		return errReply(http.StatusBadRequest, "missing role_id")
	}
	role, ok := s.roles[in.RoleID]
	if !ok || role.secretID != in.SecretID {
		return errReply(http.StatusBadRequest, "invalid role or secret ID")
	}
	t := s.newToken(role.opts, "auth/approle/login", map[string]string{"role_name": role.name})
	return reply{http.StatusOK, s.envelope(nil, s.authData(t), nil)}
}

func (s *Server) ttlLeft(t *token) time.Duration {
	if t.expires.IsZero() {
		return 0
	}
	return time.Until(t.expires)
}

func (s *Server) authData(t *token) map[string]any {
	pol := append([]string{"default"}, t.opts.Policies...)
	return map[string]any{
		"client_token":    t.id,
		"accessor":        t.accessor,
		"policies":        pol,
		"token_policies":  pol,
		"metadata":        t.meta,
		"lease_duration":  int(s.ttlLeft(t) / time.Second),
		"renewable":       t.opts.Renewable,
		"entity_id":       "",
		"token_type":      "service",
		"orphan":          true,
		"mfa_requirement": nil,
		"num_uses":        0,
	}
}

func (s *Server) tokenData(t *token) map[string]any {
	var expire any
	if !t.expires.IsZero() {
		expire = rfc3339(t.expires)
	}
	return map[string]any{
		"accessor":         t.accessor,
		"creation_time":    t.issued.Unix(),
		"creation_ttl":     int(t.opts.TTL / time.Second),
		"display_name":     t.display,
		"entity_id":        "",
		"expire_time":      expire,
		"explicit_max_ttl": int(t.opts.MaxTTL / time.Second),
		"id":               t.id,
		"issue_time":       rfc3339(t.issued),
		"meta":             t.meta,
		"num_uses":         0,
		"orphan":           true,
		"path":             t.path,
		"policies":         append([]string{"default"}, t.opts.Policies...),
		"renewable":        t.opts.Renewable,
		"ttl":              int(s.ttlLeft(t) / time.Second),
		"type":             "service",
	}
}

func (s *Server) renew(r *http.Request, t *token) reply {
	var in struct {
		Increment json.RawMessage `json:"increment"`
	}
	body, _ := readBody(r)
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return errReply(http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
		}
	}
	if !t.opts.Renewable || t.opts.TTL == 0 {
		return errReply(http.StatusBadRequest, "lease is not renewable")
	}
	inc := t.opts.TTL
	if len(in.Increment) > 0 {
		d, err := parseIncrement(in.Increment)
		if err != nil {
			return errReply(http.StatusBadRequest, err.Error())
		}
		if d > 0 {
			inc = d
		}
	}
	now := time.Now()
	exp := now.Add(inc)
	var warnings []string
	if t.opts.MaxTTL > 0 {
		if max := t.issued.Add(t.opts.MaxTTL); exp.After(max) {
			exp = max
			warnings = append(warnings, fmt.Sprintf("TTL of %q exceeded the effective max_ttl of %q; TTL value is capped accordingly",
				inc.String(), exp.Sub(now).Truncate(time.Second).String()))
		}
	}
	t.expires = exp
	return reply{http.StatusOK, s.envelope(nil, s.authData(t), warnings)}
}

func parseIncrement(raw json.RawMessage) (time.Duration, error) {
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		if i, err := n.Int64(); err == nil {
			return time.Duration(i) * time.Second, nil
		}
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return 0, fmt.Errorf("bad increment")
	}
	if i, err := strconv.ParseInt(str, 10, 64); err == nil {
		return time.Duration(i) * time.Second, nil
	}
	d, err := time.ParseDuration(str)
	if err != nil {
		return 0, fmt.Errorf("bad increment %q", str)
	}
	return d, nil
}
