package deb

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit/netns"
)

// root is a throwaway Debian root: an overlay of the guest's root (lower,
// read-only) and a tmpfs (upper), with /proc, /dev, /sys, /run and /tmp,
// in which commands run chrooted and in a lab namespace, as on a router.
// redirect_dir=on: dpkg renames directories it unpacked (DIR.dpkg-new to
// DIR), which overlayfs refuses with EXDEV without it.
type root struct {
	t   *testing.T
	dir string
	ns  *netns.NS
}

func newRoot(t *testing.T, ns *netns.NS) *root {
	t.Helper()
	base := t.TempDir() // the guest's /tmp: a tmpfs
	r := &root{t: t, dir: filepath.Join(base, "root"), ns: ns}
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mounts := [][]string{
		{"-t", "overlay", "overlay", "-o", "lowerdir=/,upperdir=" + filepath.Join(base, "upper") + ",workdir=" + filepath.Join(base, "work") + ",redirect_dir=on", r.dir},
		{"-t", "proc", "proc", r.path("/proc")},
		{"--rbind", "/dev", r.path("/dev")},
		{"--rbind", "/sys", r.path("/sys")},
		{"-t", "tmpfs", "tmpfs", r.path("/run")},
		{"-t", "tmpfs", "tmpfs", r.path("/tmp")},
	}
	for i, m := range mounts {
		if out, err := exec.Command("mount", m...).CombinedOutput(); err != nil {
			t.Fatalf("mount %s: %v\n%s", strings.Join(m, " "), err, out)
		}
		if i == 0 {
			t.Cleanup(func() { _ = exec.Command("umount", "-R", "-l", r.dir).Run() })
		}
	}
	return r
}

// path is p inside the root, as seen from outside.
func (r *root) path(p string) string { return filepath.Join(r.dir, p) }

// bind makes the outside directory src visible at dst inside the root.
func (r *root) bind(src, dst string) {
	r.t.Helper()
	if err := os.MkdirAll(r.path(dst), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if out, err := exec.Command("mount", "--bind", src, r.path(dst)).CombinedOutput(); err != nil {
		r.t.Fatalf("mount --bind %s: %v\n%s", src, err, out)
	}
}

// command is args run chrooted in the root and in its namespace, with a
// router's PATH (the lab's binaries are not in it: only what is installed).
func (r *root) command(args ...string) *exec.Cmd {
	cmd := r.ns.Command("chroot", append([]string{r.dir, "/usr/bin/env", "-i",
		"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C"}, args...)...)
	cmd.Stdin = nil // dpkg must never wait for an answer
	return cmd
}

// run runs args in the root and returns its combined output.
func (r *root) run(args ...string) (string, error) {
	out, err := r.command(args...).CombinedOutput()
	return string(out), err
}

// must is run that fails the test.
func (r *root) must(args ...string) string {
	r.t.Helper()
	out, err := r.run(args...)
	if err != nil {
		r.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// output runs args in the root and returns its standard output (its
// standard error goes to the failure message).
func (r *root) output(args ...string) string {
	r.t.Helper()
	var stderr strings.Builder
	cmd := r.command(args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// read is the content of p inside the root ("" if absent).
func (r *root) read(p string) string {
	b, _ := os.ReadFile(r.path(p))
	return string(b)
}

// exists reports whether p exists inside the root.
func (r *root) exists(p string) bool {
	_, err := os.Lstat(r.path(p))
	return err == nil
}
