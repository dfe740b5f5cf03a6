package serve_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// serverCPU is the server's CPU time so far in seconds: the process
// APR_SERVE_LOAD_PID names (/proc/PID/stat), else this one (apr serve runs
// in the test, so its figure includes the clients' share).
func serverCPU(t *testing.T) float64 {
	if pid := os.Getenv("APR_SERVE_LOAD_PID"); pid != "" {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		u, _ := strconv.Atoi(f[11])
		k, _ := strconv.Atoi(f[12])
		return float64(u+k) / 100 // clock ticks (USER_HZ)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
