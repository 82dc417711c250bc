//go:build !linux

package netns

import (
	"errors"
	"fmt"
)

// Do runs fn directly for pid 0 and fails closed otherwise: network
// namespaces exist only on Linux.
func Do(pid int, fn func() error) error {
	if pid == 0 {
		return fn()
	}
	return fmt.Errorf("network namespace of pid %d: %w", pid, errors.ErrUnsupported)
}
