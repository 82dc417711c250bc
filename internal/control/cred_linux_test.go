package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

const helperEnv = "AOKEYD_CONTROL_TEST_HELPER"

func fileGID(fi fs.FileInfo) int { return int(fi.Sys().(*syscall.Stat_t).Gid) }

// TestMain doubles as the helper process of the credential tests: they
// re-exec the test binary as another uid with helperEnv set, and it makes
// one request and prints the outcome instead of running the tests.
func TestMain(m *testing.M) {
	if sock := os.Getenv(helperEnv); sock != "" {
		helper(sock)
		return
	}
	os.Exit(m.Run())
}

func helper(sock string) {
	_, err := NewClient(sock, 5*time.Second).Status(context.Background(), "")
	switch {
	case err == nil:
		fmt.Println("RESULT ok")
	case errors.Is(err, ErrRefused):
		fmt.Println("RESULT refused:", err)
	default:
		fmt.Println("RESULT error:", err)
	}
}

// TestPeerCredentials connects from child processes running as other uids
// and checks that only permitted ones get an answer.
func TestPeerCredentials(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a helper as another uid")
	}
	// A copy of the test binary that nobody can execute, in a directory
	// nobody can traverse: t.TempDir and the go build dir are 0700.
	dir, exe := testkit.SharedTestBinary(t, "aokeyd-control-cred-", "control.test")
	sock := filepath.Join(dir, "control.sock")
	l, err := Listen(sock, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The file mode lets everyone connect: this test is about SO_PEERCRED.
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	refused := 0
	var mu sync.Mutex
	s := NewServer(ServerOptions{
		Backend:   &fakeBackend{},
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		AllowUIDs: []uint32{4001},
		AllowGID:  4242, HaveGID: true,
		Refused: func() { mu.Lock(); refused++; mu.Unlock() },
	})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	tests := []struct {
		name   string
		cred   *syscall.Credential
		result string
	}{
		{"root", nil, "RESULT ok"},
		{"nobody", &syscall.Credential{Uid: 65534, Gid: 65534}, "RESULT refused"},
		{"allowed uid", &syscall.Credential{Uid: 4001, Gid: 65534}, "RESULT ok"},
		{"primary group", &syscall.Credential{Uid: 4002, Gid: 4242}, "RESULT ok"},
		{"supplementary group", &syscall.Credential{Uid: 4003, Gid: 65534, Groups: []uint32{100, 4242}}, "RESULT ok"},
		{"other groups", &syscall.Credential{Uid: 4004, Gid: 65534, Groups: []uint32{100, 4243}}, "RESULT refused"},
	}
	wantRefused := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), helperEnv+"="+sock)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: tt.cred}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tt.result) {
				t.Errorf("helper as %+v printed %q, want %q", tt.cred, out, tt.result)
			}
		})
		if strings.Contains(tt.result, "refused") {
			wantRefused++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if refused != wantRefused {
		t.Errorf("Refused hook called %d times, want %d", refused, wantRefused)
	}
	if n := strings.Count(logs.String(), "control request refused"); n != wantRefused || !strings.Contains(logs.String(), "uid=65534") {
		t.Errorf("refusal log lines = %d, want %d naming the uid:\n%s", n, wantRefused, logs.String())
	}
}
