//go:build !linux

package config

// LocalVRF is nil off Linux: there are no VRF devices to look up.
func LocalVRF(string) error { return nil }
