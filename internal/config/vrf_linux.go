package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// LocalVRF reports whether name is a VRF device in this network namespace:
// nil when it is, else why not (no such device, or a device of another
// type). aokeyd resolves a binding's VRF by device name to its L3 master
// device (the kernel's VRF ifindex), so a name that is no VRF device
// matches no session.
func LocalVRF(name string) error {
	if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return errors.New("not a device name")
	}
	b, err := os.ReadFile("/sys/class/net/" + name + "/uevent")
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("no VRF device of that name on this machine")
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("its device cannot be read (%v)", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "DEVTYPE=vrf" {
			return nil
		}
	}
	return errors.New("the device of that name on this machine is not a VRF device (ip -d link show says its type)")
}
