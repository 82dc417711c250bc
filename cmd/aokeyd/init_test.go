package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var initFiles = []string{"aokeyd.yaml", "policy.yaml", "keys.yaml"}

// TestInitNeverOverwrites: `aokeyd init` writes its three files into a
// directory that holds none of them; when any of them exists it refuses,
// naming each one that exists and how to proceed, and writes nothing (an
// edit to policy.yaml used to be lost to a second run, which then stopped
// at keys.yaml). With -force it first keeps every existing file as a
// backup, FILE.bak (FILE.bak.1, ... when that is taken too).
func TestInitNeverOverwrites(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing map[string]string // file -> content before the run
		symlink  string            // a dangling symlink of this name
		force    bool
		code     int
		named    []string          // files the refusal names
		backups  map[string]string // backup file -> content it must hold
	}{
		{name: "empty directory", code: 0},
		{name: "second run", existing: map[string]string{"aokeyd.yaml": "cfg edit\n", "policy.yaml": "policy edit\n", "keys.yaml": "keys edit\n"},
			code: 1, named: initFiles},
		{name: "the package's conffiles", existing: map[string]string{"aokeyd.yaml": "cfg edit\n", "policy.yaml": "policy edit\n"},
			code: 1, named: []string{"aokeyd.yaml", "policy.yaml"}},
		{name: "keys only", existing: map[string]string{"keys.yaml": "keys edit\n"}, code: 1, named: []string{"keys.yaml"}},
		{name: "dangling symlink", symlink: "policy.yaml", code: 1, named: []string{"policy.yaml"}},
		{name: "force keeps backups", existing: map[string]string{"policy.yaml": "policy edit\n", "keys.yaml": "keys edit\n"}, force: true,
			code: 0, backups: map[string]string{"policy.yaml.bak": "policy edit\n", "keys.yaml.bak": "keys edit\n"}},
		{name: "force with a backup there", existing: map[string]string{"policy.yaml": "policy edit 2\n", "policy.yaml.bak": "policy edit 1\n"}, force: true,
			code: 0, backups: map[string]string{"policy.yaml.bak": "policy edit 1\n", "policy.yaml.bak.1": "policy edit 2\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for f, c := range tc.existing {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(c), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if tc.symlink != "" {
				if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, tc.symlink)); err != nil {
					t.Fatal(err)
				}
			}
			before := dirContents(t, dir)
			args := []string{"init", "-dir", dir}
			if tc.force {
				args = append(args, "-force")
			}
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("aokeyd init: exit %d, want %d\nstdout:\n%sstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			if tc.code != 0 {
				if got := dirContents(t, dir); !mapsEqual(got, before) {
					t.Errorf("a refused init changed the directory: before %q, after %q", before, got)
				}
				if stdout.Len() != 0 {
					t.Errorf("a refused init printed on stdout: %q", stdout.String())
				}
				for _, f := range initFiles {
					p := filepath.Join(dir, f)
					if named := strings.Contains(stderr.String(), p); named != slices.Contains(tc.named, f) {
						t.Errorf("stderr names %s: %v, want %v:\n%s", p, named, !named, stderr.String())
					}
				}
				for _, how := range []string{"-force", "move"} {
					if !strings.Contains(stderr.String(), how) {
						t.Errorf("stderr does not say how to proceed (%q):\n%s", how, stderr.String())
					}
				}
				return
			}
			for f, want := range tc.backups {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil || string(b) != want {
					t.Errorf("backup %s: %q, %v; want %q", f, b, err, want)
				}
				if !strings.Contains(stdout.String(), filepath.Join(dir, f)) {
					t.Errorf("stdout does not name the backup %s:\n%s", f, stdout.String())
				}
			}
			for _, f := range initFiles {
				b, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if old, ok := tc.existing[f]; ok && string(b) == old {
					t.Errorf("%s still holds its old content after -force", f)
				}
				if !strings.Contains(stdout.String(), "wrote "+filepath.Join(dir, f)) {
					t.Errorf("stdout does not say it wrote %s:\n%s", f, stdout.String())
				}
			}
		})
	}
}

// dirContents is every entry of dir with its content (a symlink: its
// target).
func dirContents(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			m[e.Name()] = "-> " + l
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestInitPointsAtTheReference: the first line of the aokeyd.yaml aokeyd
// init writes (and the package installs) names the reference page that
// lists every setting, man 5 aokeyd.yaml, and so does the policy's; the
// page exists (aokeyd man writes it). It named config/testdata/aokeyd.yaml,
// which is no file of the package nor of the source tree.
func TestInitPointsAtTheReference(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"init", "-dir", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("aokeyd init: exit %d: %s", code, stderr.String())
	}
	pages := map[string]bool{}
	for _, p := range referencePages() {
		pages[p.Name] = true
	}
	for file, page := range map[string]string{"aokeyd.yaml": "aokeyd.yaml", "policy.yaml": "aokeyd-policy.yaml"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		first, _, _ := strings.Cut(string(b), "\n")
		if !strings.HasPrefix(first, "# "+file+": ") || !strings.HasSuffix(first, "man 5 "+page) {
			t.Errorf("%s begins %q, want it to name man 5 %s", file, first, page)
		}
		if !pages[page] {
			t.Errorf("%s names %s(5), which aokeyd man does not write", file, page)
		}
		if strings.Contains(string(b), "testdata") {
			t.Errorf("%s names a test file:\n%s", file, b)
		}
	}
}
