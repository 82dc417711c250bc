package sockets

import (
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
