package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/keystore"
)

// initFile is one file `aokeyd init` writes.
type initFile struct {
	name  string
	write func(path string) error
	note  string
}

// cmdInit writes the first-run configuration, policy and demo keys. It
// never overwrites: every file is checked first, and when any of them
// exists (an operator's edit, the package's conffiles) it refuses, naming
// each, and writes nothing. -force moves each existing file aside to a
// backup (FILE.bak, or FILE.bak.N when that is taken) before writing; the
// backup keeps the file's mode, so a key file stays readable by its owner
// alone.
func cmdInit(args []string, stdout, stderr io.Writer) int {
	flags, o := initFlags()
	if code, done := parseFlags(flags, args, func(w io.Writer) { subUsage(w, "init", flags) }, stdout, stderr); done {
		return code
	}
	if flags.NArg() != 0 {
		fmt.Fprintf(stderr, "aokeyd init: unexpected argument %q (the directory is -dir DIR)\n", flags.Arg(0))
		return 2
	}
	dir := o.dir
	cfg := strings.ReplaceAll(string(config.DefaultConfig()), filepath.Dir(config.DefaultPath), dir)
	files := []initFile{
		{"aokeyd.yaml", func(p string) error { return writeNew(p, []byte(cfg), 0o640) }, ""},
		{"policy.yaml", func(p string) error { return writeNew(p, config.DemoPolicy(), 0o640) }, ""},
		{"keys.yaml", keystore.WriteDefaultKeyFile, " (demo keys: public, replace them before production)"},
	}
	var existing []string
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		// Lstat: a symlink, dangling or not, is a file there too.
		if _, err := os.Lstat(p); err == nil {
			existing = append(existing, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintln(stderr, "aokeyd init:", err)
			return 1
		}
	}
	if len(existing) > 0 && !o.force {
		verb := "exist"
		if len(existing) == 1 {
			verb = "exists"
		}
		fmt.Fprintf(stderr, "aokeyd init: nothing written: %s already %s:\n", plural(len(existing), "file"), verb)
		for _, p := range existing {
			fmt.Fprintf(stderr, "  %s\n", p)
		}
		fmt.Fprintf(stderr, "edit them, move them aside (mv FILE FILE.orig) and run aokeyd init again, or run aokeyd init -dir %s -force, which keeps each as FILE.bak\n", dir)
		return 1
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		fmt.Fprintln(stderr, "aokeyd init:", err)
		return 1
	}
	for _, p := range existing {
		bak, err := backup(p)
		if err != nil {
			fmt.Fprintln(stderr, "aokeyd init:", err)
			return 1
		}
		fmt.Fprintf(stdout, "moved %s to %s\n", p, bak)
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := f.write(p); err != nil {
			fmt.Fprintln(stderr, "aokeyd init:", err)
			return 1
		}
		fmt.Fprintf(stdout, "wrote %s%s\n", p, f.note)
	}
	return 0
}

// writeNew writes data to a new file at path: never over a file there,
// never through a symlink (O_EXCL).
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
	}
	return err
}

// backup renames path to the first free of path.bak, path.bak.1, ...
// (a hard link first, so that no name is ever replaced, then the
// original's removal).
func backup(path string) (string, error) {
	for i := 0; i < 1000; i++ {
		bak := path + ".bak"
		if i > 0 {
			bak += "." + strconv.Itoa(i)
		}
		err := os.Link(path, bak)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("keep %s as a backup: %w", path, err)
		}
		if err := os.Remove(path); err != nil {
			return "", fmt.Errorf("keep %s as a backup: %w", path, err)
		}
		return bak, nil
	}
	return "", fmt.Errorf("keep %s as a backup: %s.bak through .bak.999 all exist", path, path)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
