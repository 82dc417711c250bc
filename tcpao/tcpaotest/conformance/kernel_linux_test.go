//go:build linux

package conformance

import (
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

func TestKernelStack(t *testing.T) {
	kerneltest.Require(t)
	Run(t, func(t *testing.T) Stack { return NewKernelStack(2 * time.Second) })
}
