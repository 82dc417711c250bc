package integration

import (
	"bufio"
	"compress/gzip"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// TestGuestKernel proves the harness boots what it claims: the bundled
// kernel with CONFIG_TCP_AO=y, the requested vCPUs and the trixie root with
// BIRD 2.17.
func TestGuestKernel(t *testing.T) {
	kerneltest.Require(t)
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	t.Logf("guest kernel %s, %d CPUs", unix.ByteSliceToString(u.Release[:]), runtime.NumCPU())
	if !strings.HasPrefix(unix.ByteSliceToString(u.Release[:]), "6.12") {
		t.Errorf("guest runs %q, want the bundled 6.12 kernel", unix.ByteSliceToString(u.Release[:]))
	}
	if runtime.NumCPU() < 2 {
		t.Errorf("guest has %d CPUs, want 2 (SMP config)", runtime.NumCPU())
	}
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"CONFIG_TCP_AO=y": false, "CONFIG_TCP_MD5SIG=y": false, "CONFIG_NET_VRF=y": false,
		"CONFIG_SECCOMP_FILTER=y": false, "CONFIG_INET_DIAG=y": false, "CONFIG_VETH=y": false}
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		if _, ok := want[sc.Text()]; ok {
			want[sc.Text()] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("guest kernel config lacks %s", k)
		}
	}
	b, err := os.ReadFile("/.bird-version")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "2.17") {
		t.Errorf("guest root has %q, want BIRD 2.17", strings.TrimSpace(string(b)))
	}
}
