// Package cpuload measures the share of its CPU capacity the process uses: the load signal read
// hints adapt their replays to (hints.BufferConfig.Load, hints.ApplierConfig.Load).
package cpuload

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Meter measures the process's own CPU time (getrusage, not the machine's) over wall time, as a
// share of the CPU the process may use; its Load is a hints.LoadFunc. That capacity is the least
// of GOMAXPROCS, the CPUs the process may run on, and its cgroup's CPU quota (v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us, the lowest along the hierarchy). The quota matters: Go
// rounds a quota up and to at least 2 for GOMAXPROCS, so a node limited to 1 core on a larger
// machine runs with GOMAXPROCS 2, and CPU over GOMAXPROCS would read 0.5 when it is saturated and
// never reach the pause threshold. Sampled at most every 250 ms; the capacity is re-read every 10 s.
type Meter struct {
	mu      sync.Mutex
	lastAt  time.Time
	lastCPU time.Duration
	value   float64
	cores   float64
	coresAt time.Time
	// for tests
	now      func() time.Time
	cpu      func() time.Duration
	capacity func() float64
}

// New starts measuring from now.
func New() *Meter {
	c := &Meter{now: time.Now, cpu: processCPU, capacity: Capacity}
	c.lastAt, c.lastCPU = c.now(), c.cpu()
	return c
}

// Load is the share of the process's CPU capacity it used since the previous sample, in [0, 1].
func (c *Meter) Load() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.cores <= 0 || now.Sub(c.coresAt) >= 10*time.Second {
		c.cores, c.coresAt = c.capacity(), now
	}
	if dt := now.Sub(c.lastAt); dt >= 250*time.Millisecond {
		cpu := c.cpu()
		used := float64(cpu-c.lastCPU) / float64(dt) / c.cores
		c.value = min(max(used, 0), 1)
		c.lastAt, c.lastCPU = now, cpu
	}
	return c.value
}

// Cores is the CPU capacity Load divides by, as last read.
func (c *Meter) Cores() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cores
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Capacity is the CPU the process may use, in cores: the least of GOMAXPROCS, runtime.NumCPU
// (its affinity mask at start) and its cgroup's CPU quota, if any.
func Capacity() float64 {
	c := float64(min(runtime.GOMAXPROCS(0), runtime.NumCPU()))
	if q, ok := cgroupCPULimit("/", readFile("/proc/self/cgroup")); ok && q < c {
		c = q
	}
	return max(c, 0.01)
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return string(b)
}

// cgroupCPULimit is the lowest CPU quota, in cores, of the cgroups in procCgroup (the contents of
// /proc/self/cgroup) and their ancestors, read under root (the file system root, "/" except in
// tests), for cgroup v2 (cpu.max) and v1 (cpu.cfs_quota_us / cpu.cfs_period_us under the usual
// mount points).
func cgroupCPULimit(root, procCgroup string) (float64, bool) {
	best, found := 0.0, false
	take := func(q float64, ok bool) {
		if ok && q > 0 && (!found || q < best) {
			best, found = q, true
		}
	}
	sc := bufio.NewScanner(strings.NewReader(procCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		controllers, path := parts[1], parts[2]
		var dirs []string
		switch {
		case parts[0] == "0" && controllers == "":
			dirs = []string{"sys/fs/cgroup", "sys/fs/cgroup/unified"}
		case hasController(controllers, "cpu"):
			dirs = []string{"sys/fs/cgroup/" + controllers, "sys/fs/cgroup/cpu", "sys/fs/cgroup/cpu,cpuacct"}
		default:
			continue
		}
		for _, d := range dirs {
			base := filepath.Join(root, d)
			if _, err := os.Stat(base); err != nil {
				continue
			}
			// The cgroup and every ancestor up to the mount point.
			for p := filepath.Join(base, path); ; p = filepath.Dir(p) {
				take(readQuotaV2(p))
				take(readQuotaV1(p))
				if p == base || len(p) < len(base) {
					break
				}
			}
			break
		}
	}
	return best, found
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readQuotaV2 parses dir/cpu.max ("max 100000" or "50000 100000").
func readQuotaV2(dir string) (float64, bool) {
	f := strings.Fields(readFile(filepath.Join(dir, "cpu.max")))
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	q, err1 := strconv.ParseFloat(f[0], 64)
	p, err2 := strconv.ParseFloat(f[1], 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return q / p, true
}

// readQuotaV1 parses dir/cpu.cfs_quota_us (-1: none) and dir/cpu.cfs_period_us.
func readQuotaV1(dir string) (float64, bool) {
	q, err1 := strconv.ParseFloat(strings.TrimSpace(readFile(filepath.Join(dir, "cpu.cfs_quota_us"))), 64)
	p, err2 := strconv.ParseFloat(strings.TrimSpace(readFile(filepath.Join(dir, "cpu.cfs_period_us"))), 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return q / p, true
}
