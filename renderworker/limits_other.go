//go:build !linux

package renderworker

import (
	"errors"
	"syscall"
	"time"
)

// kernelBounds says the kernel's bounds are not available here: renders
// run in the controller's process under the budget alone.
const kernelBounds = false

type limits struct{}

func startLimits() (*limits, error) {
	return nil, errors.New("RLIMIT_AS and RLIMIT_CPU are set on Linux only")
}

func (l *limits) forRender(cpuSeconds, memoryMiB int64) error { return nil }

func (l *limits) grown(mib uint64) bool { return false }

func sysProcAttr() *syscall.SysProcAttr { return nil }

func lowerPriority(pid int) error { return errors.New("not on Linux") }

func cpuTime(pid int) time.Duration { return 0 }
