//go:build linux && !(amd64 || arm64 || riscv64 || loong64)

package bench

import "context"

// crossRun needs the raw loop (raw_linux.go).
func (r *runner) crossRun(context.Context, int, *Size) error { return errRawUnsupported }
