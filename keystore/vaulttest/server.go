package vaulttest

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configure a Server.
type Options struct {
	// KVMounts are the KV v2 mount paths; nil means ["secret"].
	KVMounts []string
	// RootToken is the token that never expires; "" means "root".
	RootToken string
	// TLS serves HTTPS with a self-signed certificate for 127.0.0.1 (see
	// CACertPEM), for tests of VAULT_CACERT and friends.
	TLS bool
	// InMemory serves connections made with DialContext (net.Pipe) instead
	// of a TCP port. Every wait of the server and its client is then on a
	// channel, so both can run in a testing/synctest bubble, token TTLs
	// and renewals on the bubble's clock.
	InMemory bool
}

// TokenOptions describe a token issued with IssueToken or by an AppRole login.
type TokenOptions struct {
	// TTL is the token's lease; 0 means no expiry.
	TTL time.Duration
	// MaxTTL caps renewals (measured from issue); 0 means no cap.
	MaxTTL    time.Duration
	Renewable bool
	Policies  []string
	// DisplayName is what `vault token create -display-name` sets: the
	// token's display_name is then "token-<DisplayName>" ("token" without
	// one), as Vault reports it.
	DisplayName string
}

type token struct {
	id, accessor string
	opts         TokenOptions
	issued       time.Time
	expires      time.Time // zero: never
	path         string
	meta         map[string]string
	display      string
}

type appRole struct {
	name, roleID, secretID string
	opts                   TokenOptions
}

type version struct {
	data      json.RawMessage // nil once destroyed
	created   time.Time
	deleted   time.Time // zero: not (soft) deleted
	destroyed bool
}

type kvEntry struct {
	versions []version // index i is version i+1
	created  time.Time
	updated  time.Time
}

// Request is one request the server answered.
type Request struct {
	Method    string // LIST for list requests
	Path      string // without /v1/
	Namespace string
	Status    int
}

// Server is a Vault-compatible test server. See the package doc.
type Server struct {
	opts Options
	srv  *http.Server
	addr string
	tls  *tls.Config
	ca   []byte

	mu       sync.Mutex
	ln       net.Listener
	sealed   bool
	tokens   map[string]*token
	roles    map[string]*appRole // by role_id
	kv       map[string]*kvEntry // namespace + "\x00" + mount + "/" + path
	deny     []string
	fails    map[string]int           // path prefix -> HTTP status answered instead
	delays   map[string]time.Duration // path prefix -> how long it takes
	requests []Request
	seq      int
}

// New starts a Server on 127.0.0.1 with a random port.
func New(o Options) (*Server, error) {
	if len(o.KVMounts) == 0 {
		o.KVMounts = []string{"secret"}
	}
	if o.RootToken == "" {
		o.RootToken = "root"
	}
	s := &Server{opts: o, tokens: map[string]*token{}, roles: map[string]*appRole{}, kv: map[string]*kvEntry{}}
	s.tokens[o.RootToken] = &token{id: o.RootToken, accessor: "root-accessor", issued: time.Now(),
		opts: TokenOptions{Policies: []string{"root"}}, path: "auth/token/root", display: "root"}
	if o.TLS {
		cert, ca, err := selfSigned(time.Now())
		if err != nil {
			return nil, err
		}
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		s.ca = ca
	}
	if o.InMemory {
		if o.TLS {
			return nil, errors.New("vaulttest: InMemory serves plain HTTP only")
		}
		s.addr = pipeHost
		s.serve(newPipeListener())
		return s, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("vaulttest: listen: %w", err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	return s, nil
}

func (s *Server) serve(ln net.Listener) {
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	s.srv = &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	srv := s.srv
	go func() { _ = srv.Serve(ln) }()
}

// URL is the server's address for VAULT_ADDR.
func (s *Server) URL() string {
	if s.tls != nil {
		return "https://" + s.addr
	}
	return "http://" + s.addr
}

// CACertPEM is the PEM certificate to trust with Options.TLS (nil without).
func (s *Server) CACertPEM() []byte { return bytes.Clone(s.ca) }

// RootToken is the token that never expires.
func (s *Server) RootToken() string { return s.opts.RootToken }

// Close stops the server for good.
func (s *Server) Close() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Stop closes the listener and all connections, as if the Vault process
// died; the state is kept for Start.
func (s *Server) Stop() { s.Close() }

// Start listens again on the same address after Stop.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("vaulttest: already running")
	}
	if s.opts.InMemory {
		s.serve(newPipeListener())
		return nil
	}
	var ln net.Listener
	var err error
	for range 50 { // the old socket may linger briefly
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("vaulttest: listen again on %s: %w", s.addr, err)
	}
	s.serve(ln)
	return nil
}

// Seal makes every request fail with 503 "Vault is sealed".
func (s *Server) Seal() { s.mu.Lock(); s.sealed = true; s.mu.Unlock() }

// Unseal undoes Seal.
func (s *Server) Unseal() { s.mu.Lock(); s.sealed = false; s.mu.Unlock() }

// Deny makes requests whose path (without /v1/) starts with prefix fail with
// 403 "permission denied", as a policy without that path would.
func (s *Server) Deny(prefix string) { s.mu.Lock(); s.deny = append(s.deny, prefix); s.mu.Unlock() }

// Delay makes requests whose path (without /v1/) starts with prefix take
// d before they are answered (0 removes it): a slow path, as a loaded or
// distant Vault answers. Other requests are not held up.
func (s *Server) Delay(prefix string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.delays == nil {
		s.delays = map[string]time.Duration{}
	}
	if d <= 0 {
		delete(s.delays, prefix)
	} else {
		s.delays[prefix] = d
	}
}

// Undeny removes one Deny of prefix (others, and Denies of other
// prefixes, stay).
func (s *Server) Undeny(prefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(s.deny, prefix); i >= 0 {
		s.deny = slices.Delete(s.deny, i, i+1)
	}
}

// Fail makes requests whose path (without /v1/) starts with prefix fail
// with status (a 500 as a Vault whose storage backend errs answers);
// status 0 removes it.
func (s *Server) Fail(prefix string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails == nil {
		s.fails = map[string]int{}
	}
	if status == 0 {
		delete(s.fails, prefix)
	} else {
		s.fails[prefix] = status
	}
}

// AllowAll removes every Deny.
func (s *Server) AllowAll() { s.mu.Lock(); s.deny = nil; s.mu.Unlock() }

// IssueToken creates a token, as `vault token create` would.
func (s *Server) IssueToken(o TokenOptions) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newToken(o, "auth/token/create", nil).id
}

// ExpireToken makes the token invalid at once (as if its TTL ran out).
func (s *Server) ExpireToken(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, id)
}

// ExpireAllTokens invalidates every token except the root token.
func (s *Server) ExpireAllTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.tokens {
		if id != s.opts.RootToken {
			delete(s.tokens, id)
		}
	}
}

// AddAppRole registers an AppRole whose login issues tokens with o.
func (s *Server) AddAppRole(name, roleID, secretID string, o TokenOptions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roles[roleID] = &appRole{name: name, roleID: roleID, secretID: secretID, opts: o}
}

// Count returns how many answered requests had the method (GET, PUT, POST,
// LIST, DELETE; "" for any) and a path starting with prefix.
func (s *Server) Count(method, prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if (method == "" || r.Method == method) && strings.HasPrefix(r.Path, prefix) {
			n++
		}
	}
	return n
}

// Requests returns a copy of the request log.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) newToken(o TokenOptions, path string, meta map[string]string) *token {
	s.seq++
	now := time.Now()
	t := &token{id: fmt.Sprintf("hvs.vaulttest-%06d", s.seq), accessor: fmt.Sprintf("accessor-%06d", s.seq),
		opts: o, issued: now, path: path, meta: meta}
	if o.TTL > 0 {
		t.expires = now.Add(o.TTL)
	}
	switch {
	case path == "auth/approle/login":
		t.display = "approle"
	case o.DisplayName != "":
		t.display = "token-" + o.DisplayName
	default:
		t.display = "token"
	}
	s.tokens[t.id] = t
	return t
}

// lookup returns the valid token of the request, dropping expired ones.
func (s *Server) lookup(r *http.Request) *token {
	id := r.Header.Get("X-Vault-Token")
	if id == "" {
		id, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	t, ok := s.tokens[id]
	if !ok {
		return nil
	}
	if !t.expires.IsZero() && !time.Now().Before(t.expires) {
		delete(s.tokens, id)
		return nil
	}
	return t
}

type reply struct {
	status int
	body   any
}

func errReply(status int, msgs ...string) reply {
	if msgs == nil {
		msgs = []string{}
	}
	return reply{status, map[string]any{"errors": msgs}}
}

func (s *Server) envelope(data any, auth any, warnings []string) map[string]any {
	s.seq++
	var w any
	if len(warnings) > 0 {
		w = warnings
	}
	return map[string]any{
		"request_id":     fmt.Sprintf("00000000-0000-4000-8000-%012d", s.seq),
		"lease_id":       "",
		"renewable":      false,
		"lease_duration": 0,
		"data":           data,
		"wrap_info":      nil,
		"warnings":       w,
		"auth":           auth,
		"mount_type":     "",
	}
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	method := r.Method
	if method == http.MethodGet && r.URL.Query().Get("list") == "true" {
		method = "LIST"
	}
	ns := strings.Trim(r.Header.Get("X-Vault-Namespace"), "/")
	s.mu.Lock()
	var wait time.Duration
	for p, d := range s.delays {
		if strings.HasPrefix(path, p) {
			wait = max(wait, d)
		}
	}
	s.mu.Unlock()
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-r.Context().Done():
		}
	}
	s.mu.Lock()
	var rep reply
	if !ok {
		rep = errReply(http.StatusNotFound)
	} else {
		rep = s.route(r, method, path, ns)
	}
	s.requests = append(s.requests, Request{Method: method, Path: path, Namespace: ns, Status: rep.status})
	s.mu.Unlock()

	w.Header().Set("Cache-Control", "no-store")
	if rep.body == nil {
		w.WriteHeader(rep.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	_ = json.NewEncoder(w).Encode(rep.body)
}

func (s *Server) route(r *http.Request, method, path, ns string) reply {
	if path == "sys/health" {
		return reply{http.StatusOK, map[string]any{"initialized": true, "sealed": s.sealed, "standby": false,
			"version": "1.21.0-vaulttest", "server_time_utc": time.Now().Unix()}}
	}
	if s.sealed {
		return errReply(http.StatusServiceUnavailable, "Vault is sealed")
	}
	if path == "auth/approle/login" {
		if method != http.MethodPost && method != http.MethodPut {
			return errReply(http.StatusMethodNotAllowed, "1 error occurred:\n\t* unsupported operation\n\n")
		}
		return s.login(r)
	}
	tok := s.lookup(r)
	if tok == nil {
		return errReply(http.StatusForbidden, "permission denied")
	}
	for _, d := range s.deny {
		if strings.HasPrefix(path, d) {
			return errReply(http.StatusForbidden, "permission denied")
		}
	}
	for p, st := range s.fails {
		if strings.HasPrefix(path, p) {
			return errReply(st, "1 error occurred:\n\t* internal error (vaulttest.Fail)\n\n")
		}
	}
	switch path {
	case "auth/token/lookup-self":
		return reply{http.StatusOK, s.envelope(s.tokenData(tok), nil, nil)}
	case "auth/token/renew-self":
		return s.renew(r, tok)
	}
	mount, rest, _ := strings.Cut(path, "/")
	known := false
	for _, m := range s.opts.KVMounts {
		if m == mount {
			known = true
		}
	}
	if !known {
		return errReply(http.StatusNotFound, fmt.Sprintf("no handler for route %q. route entry not found.", path))
	}
	kind, p, _ := strings.Cut(rest, "/")
	key := ns + "\x00" + mount + "/" + strings.Trim(p, "/")
	switch {
	case kind == "data" && method == http.MethodGet:
		return s.kvRead(r, key)
	case kind == "data" && (method == http.MethodPost || method == http.MethodPut):
		return s.kvWrite(r, key)
	case kind == "metadata" && method == "LIST":
		return s.kvList(ns + "\x00" + mount + "/" + strings.Trim(p, "/"))
	case kind == "metadata" && method == http.MethodGet:
		return s.kvMetadata(key)
	case kind == "metadata" && method == http.MethodDelete:
		delete(s.kv, key)
		return reply{http.StatusNoContent, nil}
	case kind == "data" && method == http.MethodDelete:
		return s.kvDeleteLatest(key)
	case (kind == "delete" || kind == "undelete" || kind == "destroy") && (method == http.MethodPost || method == http.MethodPut):
		return s.kvVersions(r, kind, key)
	}
	return errReply(http.StatusMethodNotAllowed, "1 error occurred:\n\t* unsupported operation\n\n")
}
