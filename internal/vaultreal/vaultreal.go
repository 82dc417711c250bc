// Package vaultreal runs a real HashiCorp Vault server for tests: the binary
// that integration/tools/vault.sh builds (a test dependency only: Vault
// >= 1.15 is BUSL-1.1 and is never shipped with aokeyd).
//
// The binary is $AOKEYD_VAULT (a path, or a name looked up in PATH).
// Without it the tests that need it skip with a message; with
// AOKEYD_REQUIRE_VAULT=1 they fail instead, so that a run that was meant
// to use Vault cannot pass by skipping.
//
// Two kinds of server:
//
//   - StartDev: `vault server -dev`, in memory, unsealed, KV v2 at
//     "secret/" (where the keystore looks by default), a random root token.
//   - StartStored: a server that keeps its data on disk (one raft node),
//     initialised with one key share and unsealed, KV v2 mounted at
//     "secret/"; it can be sealed, unsealed, stopped and started again
//     on the same address, its data kept.
//
// Invariants: tokens and unseal keys never reach a log, an error or a
// command line (the root token goes to the dev server through its
// environment; the server's own output, which prints them, is kept in a
// file in the test's temporary directory and shown only with those lines
// removed). Each server runs with HOME in a temporary directory, so that
// the dev server's ~/.vault-token never lands in the user's home. The
// package is in the main module (not integration/) because the keystore's
// contract suite, which runs against it, may not import integration/; it
// links no Vault code, only the vault/api client aokeyd already uses.
package vaultreal

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
)

// Binary returns the path of the Vault binary ($AOKEYD_VAULT). It skips t
// when the variable is unset, or fails it when AOKEYD_REQUIRE_VAULT=1, and
// records t's top-level test as a suite that ran against real Vault (see
// Record).
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("AOKEYD_VAULT")
	if bin == "" {
		if os.Getenv("AOKEYD_REQUIRE_VAULT") == "1" {
			t.Fatal("AOKEYD_REQUIRE_VAULT=1 but AOKEYD_VAULT is unset: build Vault with integration/tools/vault.sh")
		}
		t.Skip("real Vault: set AOKEYD_VAULT to a vault binary (integration/tools/vault.sh, or make vault-real)")
	}
	if !strings.Contains(bin, "/") {
		// A bare name ("vault") is looked up in PATH: the guest VM's
		// binaries are in its PATH, not at the host's paths.
		p, err := exec.LookPath(bin)
		if err != nil {
			t.Fatalf("AOKEYD_VAULT=%s: %v", bin, err)
		}
		bin = p
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("AOKEYD_VAULT=%s: not an executable file (%v)", bin, err)
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	Record(t, "suite "+top)
	return bin
}

var reportMu sync.Mutex

// Record appends a line to the file $AOKEYD_VAULT_REPORT names, if it is
// set: "suite NAME" (written by Binary) or "COUNTER N" with COUNTER one of
// those of the vault-real proof line (sealed_ok, soft_delete_ok,
// approle_relogins, renewals) and N what the test observed. make
// vault-real adds them up; nothing in the line is a secret.
func Record(t testing.TB, line string) {
	t.Helper()
	p := os.Getenv("AOKEYD_VAULT_REPORT")
	if p == "" {
		return
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("vault report: %v", err)
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, line); err != nil {
		t.Fatalf("vault report: %v", err)
	}
}

// Count records "name n" (see Record).
func Count(t testing.TB, name string, n int) { t.Helper(); Record(t, fmt.Sprintf("%s %d", name, n)) }

// Server is a running Vault.
type Server struct {
	Addr      string // http://127.0.0.1:PORT, for VAULT_ADDR
	RootToken string
	Version   string // as /v1/sys/health reports it

	t       testing.TB
	bin     string
	dir     string
	args    []string
	env     []string
	logPath string
	unseal  string // StartStored only

	mu  sync.Mutex
	cmd *exec.Cmd
	end chan struct{} // closed when cmd has exited
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// newServer prepares a server on a free port of 127.0.0.1 (s.Addr), not
// yet started, and returns it with that port.
func newServer(t testing.TB) (*Server, int) {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, bin: bin, dir: dir, logPath: filepath.Join(dir, "vault.log"),
		// Only what Vault needs: no VAULT_* of the caller's shell.
		env: []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "VAULT_LOG_LEVEL=warn"}}
	t.Cleanup(s.kill)
	port := freePort(t)
	s.Addr = fmt.Sprintf("http://127.0.0.1:%d", port)
	return s, port
}

// StartDev starts `vault server -dev` on a random port.
func StartDev(t testing.TB) *Server {
	t.Helper()
	s, port := newServer(t)
	// Vault refuses a custom token ID with its own prefixes (hvs., s.).
	s.RootToken = "aokeyd-dev-" + randomHex(t, 12)
	s.args = []string{"server", "-dev", fmt.Sprintf("-dev-listen-address=127.0.0.1:%d", port), "-dev-no-store-token"}
	s.env = append(s.env, "VAULT_DEV_ROOT_TOKEN_ID="+s.RootToken)
	s.Start()
	s.waitReady(true)
	Record(t, "version "+s.Version)
	return s
}

// StartStored starts a server that keeps its data on disk (Vault's
// integrated storage, raft, with one node: the minimal build that
// vault.sh makes has no "file" backend), initialises it with one key
// share, unseals it and mounts KV v2 at "secret/".
func StartStored(t testing.TB) *Server {
	t.Helper()
	s, port := newServer(t)
	data := filepath.Join(s.dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cluster := freePort(t)
	cfg := fmt.Sprintf(`storage "raft" {
  path = %q
  node_id = "aokeyd-test"
}
listener "tcp" {
  address = "127.0.0.1:%d"
  cluster_address = "127.0.0.1:%d"
  tls_disable = true
}
api_addr = %q
cluster_addr = "https://127.0.0.1:%d"
disable_mlock = true
ui = false
`, data, port, cluster, s.Addr, cluster)
	p := filepath.Join(s.dir, "vault.hcl")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s.args = []string{"server", "-config=" + p}
	s.Start()
	s.waitReady(false)
	c := s.client("")
	init, err := c.Sys().Init(&api.InitRequest{SecretShares: 1, SecretThreshold: 1})
	if err != nil || init == nil || len(init.Keys) != 1 || init.RootToken == "" {
		t.Fatalf("vault operator init: %v", err)
	}
	s.unseal, s.RootToken = init.Keys[0], init.RootToken
	s.Unseal()
	c.SetToken(s.RootToken)
	if err := c.Sys().Mount("secret", &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatalf("mount kv v2 at secret/: %v", err)
	}
	// A new KV v2 mount answers 400 "upgrading" for a moment.
	s.until("KV v2 at secret/ ready", func() bool {
		_, err := c.Logical().Read("secret/config")
		return err == nil
	})
	Record(t, "version "+s.Version)
	return s
}

// Client returns an API client for the server with the root token.
func (s *Server) Client() *api.Client { return s.client(s.RootToken) }

// Config is a client configuration for the server: its address, no
// retries (a test sees Vault's first answer), a 10s timeout; no token.
func (s *Server) Config() *api.Config {
	cfg := api.DefaultConfig()
	cfg.Address = s.Addr
	cfg.MaxRetries = 0
	cfg.Timeout = 10 * time.Second
	return cfg
}

func (s *Server) client(token string) *api.Client {
	c, err := api.NewClient(s.Config())
	if err != nil {
		s.t.Fatal(err)
	}
	c.SetToken(token)
	return c
}

// Start (re)starts the server process with its first arguments. A stored
// server comes back sealed (see Unseal).
func (s *Server) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		s.t.Fatal("vaultreal: already running")
	}
	logf, err := os.OpenFile(s.logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env, cmd.Dir = s.env, s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		s.t.Fatalf("start vault: %v", err)
	}
	end := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(end) }()
	s.cmd, s.end = cmd, end
}

// Stop ends the server with SIGTERM (SIGKILL after 10s) and waits for it.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, end := s.cmd, s.end
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-end:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-end
	}
}

func (s *Server) kill() {
	s.mu.Lock()
	cmd, end := s.cmd, s.end
	s.cmd = nil
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-end
	}
}

// Restart stops the server and starts it again on the same address; a
// stored server is unsealed again. The dev server loses its data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.Start()
	s.waitReady(false)
	if s.unseal != "" {
		s.Unseal()
	}
}

// Seal seals the server, as `vault operator seal` does.
func (s *Server) Seal() {
	s.t.Helper()
	if err := s.Client().Sys().Seal(); err != nil {
		s.t.Fatalf("vault operator seal: %v", err)
	}
}

// Unseal unseals a stored server (StartStored) with its one key share.
func (s *Server) Unseal() {
	s.t.Helper()
	if s.unseal == "" {
		s.t.Fatal("vaultreal: only a stored server (StartStored) can be unsealed")
	}
	st, err := s.client("").Sys().Unseal(s.unseal)
	if err != nil || st == nil || st.Sealed {
		s.t.Fatalf("vault operator unseal: sealed=%v %v", st != nil && st.Sealed, err)
	}
	s.until("unsealed and active", func() bool {
		h, err := s.client("").Sys().Health()
		return err == nil && !h.Sealed && !h.Standby
	})
}

// waitReady waits until the server answers /v1/sys/health (unsealed and
// active when unsealed is true) and notes its version.
func (s *Server) waitReady(unsealed bool) {
	s.t.Helper()
	s.until("vault answering on "+s.Addr, func() bool {
		h, err := s.client("").Sys().Health()
		if err != nil || h == nil || (unsealed && (h.Sealed || !h.Initialized)) {
			return false
		}
		s.Version = h.Version
		return true
	})
}

func (s *Server) until(what string, ok func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		s.mu.Lock()
		end := s.end
		s.mu.Unlock()
		select {
		case <-end:
			s.t.Fatalf("vault exited while waiting for %s; its log without secrets:\n%s", what, s.Log())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s; vault's log without secrets:\n%s", what, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// secretLine is a line of the dev server's banner that shows a secret.
var secretLine = regexp.MustCompile(`(?i)^\s*(root token|unseal key( \d+)?)\s*:`)

// Log returns the server's output without the banner lines that show the
// root token or an unseal key, and with the known secrets masked wherever
// else they show.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if secretLine.MatchString(l) {
			continue
		}
		for _, secret := range []string{s.RootToken, s.unseal} {
			if secret != "" {
				l = strings.ReplaceAll(l, secret, "[redacted]")
			}
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
