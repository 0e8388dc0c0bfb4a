package renderworker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"syscall"
	"time"
)

// kernelBounds says the kernel's bounds are available here.
const kernelBounds = true

// limits are a worker's kernel bounds: its address space (RLIMIT_AS) a
// render's memoryMiB beyond what it has mapped when the render starts, its
// CPU time (RLIMIT_CPU) what it used so far plus a render's seconds. Only
// the soft limits move, so a worker can set them again for each render;
// the code a render runs has no way to call setrlimit. Go reserves
// address space in large steps and never gives it back, so the bound is
// taken from the mapping at each render's start, not once.
type limits struct {
	// baseRSS is the memory resident once the config was loaded; vm the
	// address space mapped when last read (at start, and after each
	// render that allocated much: reading /proc on every render would
	// cost more than a small render).
	baseRSS, vm uint64
	// cpuMax and asMax are the hard limits, which do not move.
	cpuMax, asMax uint64
	// memoryLimit is the collector's limit last set; allocs the bytes
	// allocated when the render began (runtime/metrics).
	memoryLimit int64
	allocs      uint64
}

// heavyRender is what a render allocates past which the worker reads its
// mapping and resident memory again after it.
const heavyRender = 16 << 20

func startLimits() (*limits, error) {
	rss, err := procSize("VmRSS:")
	if err != nil {
		return nil, err
	}
	vm, err := procSize("VmSize:")
	if err != nil {
		return nil, err
	}
	var cpu, as syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CPU, &cpu); err != nil {
		return nil, fmt.Errorf("getrlimit RLIMIT_CPU: %w", err)
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &as); err != nil {
		return nil, fmt.Errorf("getrlimit RLIMIT_AS: %w", err)
	}
	return &limits{baseRSS: rss, vm: vm, cpuMax: cpu.Max, asMax: as.Max}, nil
}

// forRender sets the bounds for one render.
func (l *limits) forRender(cpuSeconds, memoryMiB int64) error {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return fmt.Errorf("getrusage: %w", err)
	}
	used := ru.Utime.Sec + ru.Stime.Sec + 1
	cpu := syscall.Rlimit{Cur: min(uint64(used+max(cpuSeconds, 1)), l.cpuMax), Max: l.cpuMax}
	if err := syscall.Setrlimit(syscall.RLIMIT_CPU, &cpu); err != nil {
		return fmt.Errorf("setrlimit RLIMIT_CPU: %w", err)
	}
	bound := uint64(max(memoryMiB, 1)) << 20
	as := syscall.Rlimit{Cur: min(l.vm+bound, l.asMax), Max: l.asMax}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &as); err != nil {
		return fmt.Errorf("setrlimit RLIMIT_AS: %w", err)
	}
	// The collector works harder as the render nears its bound, so that
	// garbage does not count against it.
	if limit := int64(bound) * 7 / 10; limit != l.memoryLimit {
		debug.SetMemoryLimit(limit)
		l.memoryLimit = limit
	}
	l.allocs = allocated()
	return nil
}

// grown reports, after a render, whether the resident memory grew by
// over mib since the config was loaded: what a render left behind that
// the collector did not give back. Only a render that allocated much is
// looked at; it also refreshes the mapping the next bound starts from.
func (l *limits) grown(mib uint64) bool {
	if allocated()-l.allocs < heavyRender {
		return false
	}
	if vm, err := procSize("VmSize:"); err == nil {
		l.vm = vm
	}
	rss, err := procSize("VmRSS:")
	return err != nil || rss > l.baseRSS+mib<<20
}

// allocated is the bytes this process allocated so far.
func allocated() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// procSize is a size field of /proc/self/status (VmSize:, VmRSS:), in
// bytes.
func procSize(field string) (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte(field)); ok {
			f := bytes.Fields(rest)
			if len(f) < 1 {
				break
			}
			kb, err := strconv.ParseUint(string(f[0]), 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", field)
}

// sysProcAttr makes a worker die with the controller (PR_SET_PDEATHSIG),
// whatever ends the controller, and starts it in a session of its own:
// where the kernel groups tasks by session for scheduling (autogroup),
// only a group's own nice lowers it below the others, and a worker must be
// able to yield to the API server's processes too (lowerPriority).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
}

// lowerPriority sets every thread of process pid to nice 19 (Linux's
// nice is per thread, and a thread the process starts later inherits its
// creator's), and its session's scheduling group too, where the kernel
// has them (sched_autogroup): a thread's nice counts only within its
// group.
func lowerPriority(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/autogroup", pid), []byte("19"), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lowering the autogroup's priority: %w", err)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, 19); err != nil {
			return fmt.Errorf("setpriority %d: %w", tid, err)
		}
	}
	return nil
}

// cpuTime is the CPU time process pid used so far (user and system), at
// the clock tick's grain (10 ms); 0 when it cannot be read.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(string(f[11]), 10, 64)
	s, _ := strconv.ParseInt(string(f[12]), 10, 64)
	// USER_HZ is 100 on every Linux stencil runs on.
	return time.Duration(u+s) * 10 * time.Millisecond
}
