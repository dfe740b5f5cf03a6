//go:build unix

package kern_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user + system) this process has used. On
// a machine shared with other work, wall-clock rates understate what the
// kernels do; rates per CPU-second do not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
