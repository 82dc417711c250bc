package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Backend is what the daemon provides to the control API. Errors wrapping
// ErrNotFound or ErrInvalid become 404 and 400, others 500.
type Backend interface {
	// Status reports every peer, or only peer when it is not "".
	Status(ctx context.Context, peer string) (StatusReport, error)
	// Plan is a dry run: what the controller would do now.
	Plan(ctx context.Context) (PlanReport, error)
	// Rotate starts a rotation now on one peer or all.
	Rotate(ctx context.Context, req RotateRequest) (RotateResult, error)
	// Revoke removes a key everywhere at once.
	Revoke(ctx context.Context, req RevokeRequest) (RevokeResult, error)
	// Replace applies new material held back under an installed key's
	// IDs (an edit in place), resetting sessions that cannot take it.
	Replace(ctx context.Context, req ReplaceRequest) (ReplaceResult, error)
	// Adopt hands the keys another agent installed for a peer to aokeyd.
	Adopt(ctx context.Context, req AdoptRequest) (AdoptResult, error)
	// Migrate starts (or aborts) TCP-MD5 peers' move to TCP-AO.
	Migrate(ctx context.Context, req MigrateRequest) (MigrateResult, error)
}

// ServerOptions configure a Server.
type ServerOptions struct {
	Backend Backend
	// Logger receives refusals and request errors; nil discards them.
	Logger *slog.Logger
	// AllowUIDs may use the socket besides root and the daemon's own uid.
	AllowUIDs []uint32
	// AllowGID, when HaveGID, is the read group: its members (primary or
	// supplementary group) may read (health, status, plan). It is the
	// socket file's group.
	AllowGID uint32
	HaveGID  bool
	// AdminGID, when HaveAdminGID, is the admin group: its members may
	// also change state (rotate, revoke). Root, the daemon's own uid and
	// AllowUIDs are admins.
	AdminGID     uint32
	HaveAdminGID bool
	// ReadTimeout bounds reading a request, headers and body (default
	// DefaultReadTimeout); WriteTimeout its handling and answer (default
	// DefaultWriteTimeout); IdleTimeout a connection between requests
	// (default DefaultIdleTimeout).
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxConns caps the connections served at once (default
	// DefaultMaxConns), and AdminConns (default DefaultAdminConns) is
	// how many more admins may have: however many connections others
	// hold, an admin's is served. One more is answered 503 and closed.
	MaxConns, AdminConns int
	// Refused is called for every refused request (a metrics hook).
	Refused func()
	// Version and Started fill /v1/health.
	Version string
	Started time.Time
	// OwnUID is the daemon's uid; 0 means os.Getuid().
	OwnUID uint32
}

// Defaults of ServerOptions.
const (
	DefaultReadTimeout  = 10 * time.Second
	DefaultWriteTimeout = 2 * time.Minute // covers the handler: a revoke on thousands of sockets
	DefaultIdleTimeout  = 30 * time.Second
	DefaultMaxConns     = 32
	DefaultAdminConns   = 4
)

// Server serves the control API.
type Server struct {
	credOf func(net.Conn) (Cred, error) // SO_PEERCRED and SO_PEERGROUPS; tests replace it
	o      ServerOptions
	log    *slog.Logger
	mux    *http.ServeMux
	hs     *http.Server
}

// MaxBody bounds request bodies.
const MaxBody = 64 << 10

// NewServer returns a Server over o.Backend.
func NewServer(o ServerOptions) *Server {
	if o.OwnUID == 0 {
		o.OwnUID = uint32(os.Getuid())
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.AdminConns <= 0 {
		o.AdminConns = DefaultAdminConns
	}
	s := &Server{o: o, log: o.Logger, credOf: peerCred}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /v1/health", s.health)
	s.mux.HandleFunc("GET /v1/status", s.status)
	s.mux.HandleFunc("GET /v1/plan", s.plan)
	s.mux.HandleFunc("GET /v1/rolls", s.rolls)
	s.mux.HandleFunc("POST /v1/rotate", s.rotate)
	s.mux.HandleFunc("POST /v1/revoke", s.revoke)
	s.mux.HandleFunc("POST /v1/replace", s.replace)
	s.mux.HandleFunc("POST /v1/adopt", s.adopt)
	s.mux.HandleFunc("POST /v1/migrate", s.migrate)
	s.hs = &http.Server{
		Handler: s.Handler(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			lc, ok := c.(*limitedConn)
			if !ok { // Serve wraps every connection; this is a backstop
				cred, err := s.credOf(c)
				return context.WithValue(ctx, credKey{}, credResult{cred, err})
			}
			return context.WithValue(ctx, credKey{}, lc.cred)
		},
		ReadHeaderTimeout: o.ReadTimeout,
		ReadTimeout:       o.ReadTimeout,
		WriteTimeout:      o.WriteTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s
}

// Handler is the API with the credential and role checks. Requests must
// carry the peer credentials that Serve's ConnContext hook stores; others
// are refused. A state-changing request needs the admin role.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, err := credFrom(r.Context())
		role := roleNone
		if err == nil {
			role, err = s.roleOf(cred)
		}
		need := neededRole(r)
		if err == nil && role < need {
			err = errNotAdmin
		}
		if err != nil {
			s.log.Warn("control request refused", "method", r.Method, "path", r.URL.Path,
				"uid", cred.UID, "gid", cred.GID, "pid", cred.PID, "reason", err.Error())
			if need == roleAdmin {
				s.audit(r, cred, commandOf(r), refusedArgs(r), err)
			}
			if s.o.Refused != nil {
				s.o.Refused()
			}
			msg := fmt.Errorf("%w: uid %d may not use the aokeyd control socket", ErrRefused, cred.UID)
			if role == roleRead {
				msg = fmt.Errorf("%w: uid %d may read but not %s: not root and not in the admin group (control.admin_group)",
					ErrRefused, cred.UID, commandOf(r))
			}
			writeErr(w, msg)
			return
		}
		s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), auditKey{}, cred)))
	})
}

// Serve accepts connections on l until Shutdown, at most MaxConns at once
// and AdminConns more from admins.
func (s *Server) Serve(l net.Listener) error {
	if err := s.hs.Serve(newLimitListener(l, s.admit, s.o.MaxConns, s.o.AdminConns, s.log)); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("control: serve: %w", err)
	}
	return nil
}

// Shutdown stops the server gracefully.
func (s *Server) Shutdown(ctx context.Context) error { return s.hs.Shutdown(ctx) }

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, HealthReport{Status: "ok", Version: s.o.Version, Started: s.o.Started})
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	peer := r.URL.Query().Get("peer")
	err := checkStatusPeer(peer)
	var rep StatusReport
	if err == nil {
		rep, err = s.o.Backend.Status(r.Context(), peer)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rep.Complete()
	writeJSON(w, rep)
}

func (s *Server) plan(w http.ResponseWriter, r *http.Request) {
	rep, err := s.o.Backend.Plan(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, rep)
}

func (s *Server) rotate(w http.ResponseWriter, r *http.Request) {
	change(s, w, r, "rotate", rotateArgs, func(req RotateRequest) error {
		if req.All == (req.Peer != "") {
			return fmt.Errorf("%w: name a peer or all, not both or neither", ErrInvalid)
		}
		return nil
	}, s.o.Backend.Rotate)
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	change(s, w, r, "revoke", revokeArgs, func(req RevokeRequest) error { return needKey(req.Chain, req.Key) }, s.o.Backend.Revoke)
}

func (s *Server) replace(w http.ResponseWriter, r *http.Request) {
	change(s, w, r, "replace", replaceArgs, func(req ReplaceRequest) error {
		if req.MD5 {
			if req.Chain == "" || req.Key != "" {
				return fmt.Errorf("%w: a TCP-MD5 replace names a chain and no key", ErrInvalid)
			}
			return nil
		}
		return needKey(req.Chain, req.Key)
	}, s.o.Backend.Replace)
}

func (s *Server) adopt(w http.ResponseWriter, r *http.Request) {
	change(s, w, r, "adopt", adoptArgs, func(req AdoptRequest) error {
		if req.Peer == "" {
			return fmt.Errorf("%w: peer is required", ErrInvalid)
		}
		return nil
	}, s.o.Backend.Adopt)
}

func (s *Server) migrate(w http.ResponseWriter, r *http.Request) {
	change(s, w, r, "migrate", migrateArgs, func(req MigrateRequest) error {
		if req.All == (req.Peer != "") {
			return fmt.Errorf("%w: name a peer or all, not both or neither", ErrInvalid)
		}
		if req.Bound < 0 {
			return fmt.Errorf("%w: bound must not be negative", ErrInvalid)
		}
		return nil
	}, s.o.Backend.Migrate)
}

// needKey is the check of a request that names a chain's key.
func needKey(chain, key string) error {
	if chain == "" || key == "" {
		return fmt.Errorf("%w: chain and key are required", ErrInvalid)
	}
	return nil
}

// change serves one state-changing request: the body read into Req and
// checked, the backend called, one audit line whatever the outcome (args
// names the request's arguments, never key material), the answer or the
// error.
func change[Req, Res any](s *Server, w http.ResponseWriter, r *http.Request, command string, args func(Req) []any,
	check func(Req) error, call func(context.Context, Req) (Res, error)) {
	var req Req
	err := readJSON(r, &req)
	if err == nil {
		err = checkTarget(targetOf(req))
	}
	if err == nil {
		err = check(req)
	}
	var res Res
	if err == nil {
		res, err = call(r.Context(), req)
	}
	s.audit(r, auditCred(r), command, args(req), err)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, res)
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, _ := statusOf(err)
	lvl := slog.LevelInfo
	if code >= 500 {
		lvl = slog.LevelError
	}
	s.log.Log(r.Context(), lvl, "control request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	writeErr(w, err)
}

// Causes of readJSON's errors, each wrapped with ErrInvalid (400).
var (
	errTrailingData = errors.New("more follows the JSON object (send one object per request)")
	errBodyTooLarge = fmt.Errorf("larger than %d bytes", MaxBody)
)

// readJSON decodes r's body into v. The body must be exactly one JSON
// value with no unknown fields, optionally followed by white space, and
// at most MaxBody bytes; anything else is an error wrapping ErrInvalid,
// and v must then not be acted on (it may hold the first object of a
// body that carries two).
func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Past the value, only white space and then the end may follow.
		off := dec.InputOffset()
		if _, err = dec.Token(); err == io.EOF {
			return nil
		}
		if err == nil || !isTooLarge(err) {
			return fmt.Errorf("%w: request body: %w (at byte %d)", ErrInvalid, errTrailingData, off)
		}
	}
	if isTooLarge(err) {
		return fmt.Errorf("%w: request body: %w", ErrInvalid, errBodyTooLarge)
	}
	if strings.HasPrefix(err.Error(), "json: unknown field ") {
		// The name is not shown: it may be anything the caller sent.
		return fmt.Errorf("%w: request body: an unknown field (its name is not shown)", ErrInvalid)
	}
	return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
}

func isTooLarge(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	code, c := statusOf(err)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: err.Error(), Code: c})
}
