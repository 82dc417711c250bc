//go:build !linux

package bench

import (
	"context"
	"errors"
)

// Config sets up Run (Linux only).
type Config struct{}

// Run needs Linux with CONFIG_TCP_AO.
func Run(context.Context, Config) (*Results, error) {
	return nil, errors.New("bench: needs Linux with CONFIG_TCP_AO")
}
