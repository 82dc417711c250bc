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
	"slices"
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
}

// ServerOptions configure a Server.
type ServerOptions struct {
	Backend Backend
	// Logger receives refusals and request errors; nil discards them.
	Logger *slog.Logger
	// AllowUIDs may use the socket besides root and the daemon's own uid.
	AllowUIDs []uint32
	// AllowGID, when HaveGID, is the group (primary or supplementary) whose
	// members may use the socket: the socket's group.
	AllowGID uint32
	HaveGID  bool
	// Refused is called for every refused request (a metrics hook).
	Refused func()
	// Version and Started fill /v1/health.
	Version string
	Started time.Time
	// OwnUID is the daemon's uid; 0 means os.Getuid().
	OwnUID uint32
	// Groups returns the supplementary groups of a process; nil reads
	// /proc/<pid>/status.
	Groups func(pid int32) ([]uint32, error)
}

// Server serves the control API.
type Server struct {
	o   ServerOptions
	log *slog.Logger
	mux *http.ServeMux
	hs  *http.Server
}

// MaxBody bounds request bodies.
const MaxBody = 64 << 10

// NewServer returns a Server over o.Backend.
func NewServer(o ServerOptions) *Server {
	if o.OwnUID == 0 {
		o.OwnUID = uint32(os.Getuid())
	}
	if o.Groups == nil {
		o.Groups = procGroups
	}
	s := &Server{o: o, log: o.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /v1/health", s.health)
	s.mux.HandleFunc("GET /v1/status", s.status)
	s.mux.HandleFunc("GET /v1/plan", s.plan)
	s.mux.HandleFunc("POST /v1/rotate", s.rotate)
	s.mux.HandleFunc("POST /v1/revoke", s.revoke)
	s.hs = &http.Server{
		Handler:           s.Handler(),
		ConnContext:       connContext,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s
}

// Handler is the API with the credential check. Requests must carry the
// peer credentials that Serve's ConnContext hook stores; others are refused.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, err := credFrom(r.Context())
		if err == nil {
			err = s.permit(cred)
		}
		if err != nil {
			s.log.Warn("control request refused", "method", r.Method, "path", r.URL.Path,
				"uid", cred.UID, "gid", cred.GID, "pid", cred.PID, "reason", err.Error())
			if s.o.Refused != nil {
				s.o.Refused()
			}
			writeErr(w, fmt.Errorf("%w: uid %d may not use the aokeyd control socket", ErrRefused, cred.UID))
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// Serve accepts connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	if err := s.hs.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("control: serve: %w", err)
	}
	return nil
}

// Shutdown stops the server gracefully.
func (s *Server) Shutdown(ctx context.Context) error { return s.hs.Shutdown(ctx) }

// permit decides whether the peer with cred may use the API.
func (s *Server) permit(c Cred) error {
	if c.UID == 0 || c.UID == s.o.OwnUID || slices.Contains(s.o.AllowUIDs, c.UID) {
		return nil
	}
	if !s.o.HaveGID {
		return errors.New("uid not allowed")
	}
	if c.GID == s.o.AllowGID {
		return nil
	}
	groups, err := s.o.Groups(c.PID)
	if err != nil {
		return fmt.Errorf("uid not allowed; supplementary groups unknown: %w", err)
	}
	if slices.Contains(groups, s.o.AllowGID) {
		return nil
	}
	return fmt.Errorf("uid not allowed and not in group %d", s.o.AllowGID)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, HealthReport{Status: "ok", Version: s.o.Version, Started: s.o.Started})
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	rep, err := s.o.Backend.Status(r.Context(), r.URL.Query().Get("peer"))
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
	var req RotateRequest
	if err := readJSON(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.All == (req.Peer != "") {
		s.fail(w, r, fmt.Errorf("%w: name a peer or all, not both or neither", ErrInvalid))
		return
	}
	s.log.Info("control rotate", "peer", req.Peer, "vrf", req.VRF, "all", req.All)
	res, err := s.o.Backend.Rotate(r.Context(), req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, res)
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	var req RevokeRequest
	if err := readJSON(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Chain == "" || req.Key == "" {
		s.fail(w, r, fmt.Errorf("%w: chain and key are required", ErrInvalid))
		return
	}
	s.log.Warn("control revoke", "chain", req.Chain, "key", req.Key, "peer", req.Peer, "vrf", req.VRF)
	res, err := s.o.Backend.Revoke(r.Context(), req)
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

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	return nil
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
