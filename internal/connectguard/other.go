//go:build !linux

package connectguard

import "context"

// Launch is unsupported off Linux.
func Launch([]string, LaunchOptions) error { return ErrUnsupported }

// RunChildIfRequested does nothing off Linux.
func RunChildIfRequested() {}

// Fetch is unsupported off Linux.
func Fetch(context.Context, string) (Listener, error) { return Listener{}, ErrUnsupported }

// Supervisor is unsupported off Linux.
type Supervisor struct{}

// NewSupervisor returns a Supervisor whose Run fails with ErrUnsupported.
func NewSupervisor(int, KeysFunc, SupervisorOptions) *Supervisor { return &Supervisor{} }

// Run is unsupported off Linux.
func (*Supervisor) Run(context.Context) error { return ErrUnsupported }

// Kick is unsupported off Linux.
func Kick(int, ...uint32) (int, error) { return 0, ErrUnsupported }
