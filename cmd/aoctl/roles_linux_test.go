package main

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"

	"github.com/aokeyd/aokeyd/internal/control"
)

const cliEnv = "AOCTL_TEST_AS_CLI"

// TestMain doubles as aoctl itself: with cliEnv set the test binary runs
// one aoctl command from its arguments and exits with its code, so a test
// can run aoctl as another uid.
func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) != "" {
		a := &app{stdout: os.Stdout, stderr: os.Stderr, now: time.Now, getenv: os.Getenv}
		os.Exit(a.run(context.Background(), os.Args[1:]))
	}
	os.Exit(m.Run())
}

// A member of the read group gets status but is refused revoke and rotate
// with exit code 5; a member of the admin group may revoke. The daemon
// logs an audit line for each state-changing call with the caller's uid.
func TestReadAndAdminGroups(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run aoctl as other uids")
	}
	const readGID, adminGID = 4242, 4343
	// A copy of the test binary and the socket in a directory everyone
	// may traverse (t.TempDir and the go build dir are 0700).
	dir, exe := testkit.SharedTestBinary(t, "aoctl-roles-", "aoctl.test")
	sock := filepath.Join(dir, "control.sock")
	l, err := control.Listen(sock, control.ListenOptions{Mode: 0o660, GID: readGID, HaveGID: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	s := control.NewServer(control.ServerOptions{Backend: newTestDaemon(t), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		AllowGID: readGID, HaveGID: true, AdminGID: adminGID, HaveAdminGID: true})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	reader := &syscall.Credential{Uid: 4011, Gid: 65534, Groups: []uint32{readGID}}
	admin := &syscall.Credential{Uid: 4012, Gid: 65534, Groups: []uint32{readGID, adminGID}}
	tests := []struct {
		name  string
		cred  *syscall.Credential
		args  []string
		code  int
		audit string
	}{
		{"reader status", reader, []string{"status"}, exitOK, ""},
		{"reader plan", reader, []string{"plan"}, exitOK, ""},
		{"reader revoke", reader, []string{"revoke", "core/2026-10"}, exitRefused, "uid=4011"},
		{"reader rotate", reader, []string{"rotate", "--all"}, exitRefused, "uid=4011"},
		{"outsider status", &syscall.Credential{Uid: 4013, Gid: 65534}, []string{"status"}, exitUnreachable, ""},
		{"admin revoke", admin, []string{"revoke", "core/2026-10"}, exitOK, "uid=4012"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := strings.Count(logs.String(), "control audit")
			cmd := exec.Command(exe, append([]string{"--socket", sock}, tt.args...)...)
			cmd.Env = append(os.Environ(), cliEnv+"=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tt.cred}
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tt.code {
				t.Errorf("aoctl %v as uid %d: exit %d, want %d\n%s", tt.args, tt.cred.Uid, code, tt.code, out)
			}
			if tt.code == exitRefused && !strings.Contains(string(out), "admin group") {
				t.Errorf("refusal %q does not say what is missing", out)
			}
			lines := strings.Split(logs.String(), "\n")
			var audit []string
			for _, l := range lines {
				if strings.Contains(l, "control audit") {
					audit = append(audit, l)
				}
			}
			switch {
			case tt.audit == "" && len(audit) != before:
				t.Errorf("audit lines for a read: %q", audit[before:])
			case tt.audit != "" && (len(audit) != before+1 || !strings.Contains(audit[before], tt.audit) ||
				!strings.Contains(audit[before], "pid=") || !strings.Contains(audit[before], "command="+tt.args[0])):
				t.Errorf("audit lines %q, want one naming %s and the command", audit[before:], tt.audit)
			}
		})
	}
}
