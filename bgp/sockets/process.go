package sockets

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FindProcess returns the pid of the one process whose command name
// (/proc/PID/comm) is name. None, or more than one, is an error; the latter
// names setting, the configuration field that picks one (a pid file).
func FindProcess(name, setting string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	found := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(b)) != name {
			continue
		}
		if found != 0 {
			return 0, fmt.Errorf("more than one %s process (%d, %d): set %s", name, found, pid, setting)
		}
		found = pid
	}
	if found == 0 {
		return 0, fmt.Errorf("no %s process found: %w", name, ErrNoProcess)
	}
	return found, nil
}

// FindPID returns a speaker's pid from pidFile ("" to skip) or, when that
// file does not exist, the one process whose comm is name ("" for none:
// the missing file is the error then). setting is the configuration field
// that names the pid file: the error of an ambiguous name names it, so
// that each speaker's finder points at its own setting.
func FindPID(pidFile, name, setting string) (int, error) {
	if pidFile != "" {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("pid file %s: %q is not a pid", pidFile, bytes.TrimSpace(b))
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
				return 0, fmt.Errorf("pid file %s names pid %d, which is not running (stale pid file?)", pidFile, pid)
			}
			return pid, nil
		}
		if !errors.Is(err, os.ErrNotExist) || name == "" {
			return 0, err
		}
	}
	return FindProcess(name, setting)
}
