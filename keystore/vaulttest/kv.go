package vaulttest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The KV version 2 engine: read, write (with check-and-set), metadata,
// list, and soft delete, undelete and destroy of versions. As in Vault, a
// deleted or destroyed version keeps its number (current_version does not
// go back) and a read of it answers 404 with its metadata and null data.

func readBody(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(http.MaxBytesReader(nil, r.Body, 32<<20))
	return b.Bytes(), err
}

func (s *Server) versionMeta(e *kvEntry, v int) map[string]any {
	x := e.versions[v-1]
	return map[string]any{
		"created_time":    rfc3339(x.created),
		"custom_metadata": nil,
		"deletion_time":   deletionTime(x),
		"destroyed":       x.destroyed,
		"version":         v,
	}
}

func deletionTime(x version) string {
	if x.deleted.IsZero() {
		return ""
	}
	return rfc3339(x.deleted)
}

func (s *Server) kvRead(r *http.Request, key string) reply {
	e, ok := s.kv[key]
	if !ok || len(e.versions) == 0 {
		return errReply(http.StatusNotFound)
	}
	v := len(e.versions)
	if q := r.URL.Query().Get("version"); q != "" && q != "0" {
		n, err := strconv.Atoi(q)
		if err != nil {
			return errReply(http.StatusBadRequest, "error converting input "+strconv.Quote(q)+" for field \"version\"")
		}
		if n < 1 || n > len(e.versions) {
			return errReply(http.StatusNotFound)
		}
		v = n
	}
	x := e.versions[v-1]
	if x.destroyed || !x.deleted.IsZero() {
		// Vault's answer: 404, the version's metadata, no data.
		env := s.envelope(map[string]any{"data": nil, "metadata": s.versionMeta(e, v)}, nil, nil)
		env["mount_type"] = "kv"
		return reply{http.StatusNotFound, env}
	}
	data := map[string]any{"data": x.data, "metadata": s.versionMeta(e, v)}
	env := s.envelope(data, nil, nil)
	env["mount_type"] = "kv"
	return reply{http.StatusOK, env}
}

func (s *Server) kvWrite(r *http.Request, key string) reply {
	body, err := readBody(r)
	if err != nil {
		return errReply(http.StatusBadRequest, err.Error())
	}
	var in struct {
		Data    json.RawMessage `json:"data"`
		Options struct {
			CAS *int `json:"cas"`
		} `json:"options"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errReply(http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
	}
	clear(body)
	if len(in.Data) == 0 || in.Data[0] != '{' {
		return errReply(http.StatusBadRequest, "no data provided")
	}
	e := s.kv[key]
	cur := 0
	if e != nil {
		cur = len(e.versions)
	}
	if in.Options.CAS != nil && *in.Options.CAS != cur {
		return errReply(http.StatusBadRequest, "check-and-set parameter did not match the current version")
	}
	now := time.Now()
	if e == nil {
		e = &kvEntry{created: now}
		s.kv[key] = e
	}
	e.versions = append(e.versions, version{data: bytes.Clone(in.Data), created: now})
	e.updated = now
	env := s.envelope(s.versionMeta(e, len(e.versions)), nil, nil)
	env["mount_type"] = "kv"
	return reply{http.StatusOK, env}
}

func (s *Server) kvMetadata(key string) reply {
	e, ok := s.kv[key]
	if !ok {
		return errReply(http.StatusNotFound)
	}
	versions := map[string]any{}
	for i, v := range e.versions {
		versions[strconv.Itoa(i+1)] = map[string]any{"created_time": rfc3339(v.created), "deletion_time": deletionTime(v), "destroyed": v.destroyed}
	}
	data := map[string]any{
		"cas_required":         false,
		"created_time":         rfc3339(e.created),
		"current_version":      len(e.versions),
		"custom_metadata":      nil,
		"delete_version_after": "0s",
		"max_versions":         0,
		"oldest_version":       0,
		"updated_time":         rfc3339(e.updated),
		"versions":             versions,
	}
	env := s.envelope(data, nil, nil)
	env["mount_type"] = "kv"
	return reply{http.StatusOK, env}
}

func (s *Server) kvList(dir string) reply {
	prefix := dir + "/"
	if strings.HasSuffix(dir, "/") {
		prefix = dir
	}
	seen := map[string]bool{}
	for k := range s.kv {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || rest == "" {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			seen[rest[:i+1]] = true
		} else {
			seen[rest] = true
		}
	}
	if len(seen) == 0 {
		return errReply(http.StatusNotFound)
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := s.envelope(map[string]any{"keys": keys}, nil, nil)
	env["mount_type"] = "kv"
	return reply{http.StatusOK, env}
}

// kvDeleteLatest is DELETE <mount>/data/<path>: a soft delete of the
// latest version.
func (s *Server) kvDeleteLatest(key string) reply {
	e, ok := s.kv[key]
	if ok && len(e.versions) > 0 {
		if x := &e.versions[len(e.versions)-1]; x.deleted.IsZero() && !x.destroyed {
			x.deleted = time.Now()
		}
	}
	return reply{http.StatusNoContent, nil}
}

// kvVersions is POST|PUT <mount>/{delete,undelete,destroy}/<path> with
// {"versions":[…]}. A destroyed version cannot be undeleted; unknown
// versions are ignored, as Vault does.
func (s *Server) kvVersions(r *http.Request, op, key string) reply {
	body, err := readBody(r)
	if err != nil {
		return errReply(http.StatusBadRequest, err.Error())
	}
	var in struct {
		Versions []int `json:"versions"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errReply(http.StatusBadRequest, "failed to parse JSON input: "+err.Error())
	}
	if len(in.Versions) == 0 {
		return errReply(http.StatusBadRequest, "no version number provided")
	}
	e, ok := s.kv[key]
	if !ok {
		return reply{http.StatusNoContent, nil}
	}
	now := time.Now()
	for _, n := range in.Versions {
		if n < 1 || n > len(e.versions) {
			continue
		}
		x := &e.versions[n-1]
		switch {
		case x.destroyed:
		case op == "delete" && x.deleted.IsZero():
			x.deleted = now
		case op == "undelete":
			x.deleted = time.Time{}
		case op == "destroy":
			clear(x.data)
			x.data, x.destroyed = nil, true
		}
	}
	return reply{http.StatusNoContent, nil}
}
