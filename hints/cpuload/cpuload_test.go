package cpuload

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupCPULimitV2(t *testing.T) {
	root := t.TempDir()
	// The node's cgroup allows 1.5 cores, its parent 4, the root none.
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/cpu.max"), "max 100000\n")
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/kubepods/cpu.max"), "400000 100000\n")
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/kubepods/pod1/cpu.max"), "150000 100000\n")
	q, ok := cgroupCPULimit(root, "0::/kubepods/pod1\n")
	if !ok || math.Abs(q-1.5) > 1e-9 {
		t.Fatalf("limit = %v, %v; want 1.5", q, ok)
	}
	// A parent's lower quota wins.
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/kubepods/cpu.max"), "50000 100000\n")
	if q, ok := cgroupCPULimit(root, "0::/kubepods/pod1\n"); !ok || math.Abs(q-0.5) > 1e-9 {
		t.Fatalf("limit = %v, %v; want the parent's 0.5", q, ok)
	}
	// No quota anywhere.
	if q, ok := cgroupCPULimit(root, "0::/\n"); ok {
		t.Fatalf("root without a quota: %v", q)
	}
	if _, ok := cgroupCPULimit(root, ""); ok {
		t.Fatal("no cgroup file: a limit")
	}
}

func TestCgroupCPULimitV1(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us"), "-1\n")
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/cpu/cpu.cfs_period_us"), "100000\n")
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/cpu/shoal/cpu.cfs_quota_us"), "10000\n")
	writeFile(t, filepath.Join(root, "sys/fs/cgroup/cpu/shoal/cpu.cfs_period_us"), "20000\n")
	q, ok := cgroupCPULimit(root, "4:memory:/x\n1:cpu:/shoal\n0::/\n")
	if !ok || math.Abs(q-0.5) > 1e-9 {
		t.Fatalf("limit = %v, %v; want 0.5", q, ok)
	}
	if q, ok := cgroupCPULimit(root, "1:cpu:/\n"); ok {
		t.Fatalf("no quota (-1): %v", q)
	}
}

// A process saturating its 0.5-core quota reads a load of 1, not 0.5 of its GOMAXPROCS of 1 (or
// 0.25 of the 2 Go gives a process limited to less than 2 cores).
func TestMeterUsesCapacity(t *testing.T) {
	now := time.Unix(0, 0)
	var used time.Duration
	c := &Meter{now: func() time.Time { return now }, cpu: func() time.Duration { return used }, capacity: func() float64 { return 0.5 }}
	c.lastAt, c.lastCPU = now, used
	if l := c.Load(); l != 0 {
		t.Fatalf("first load %v", l)
	}
	now = now.Add(time.Second)
	used += 500 * time.Millisecond
	if l := c.Load(); math.Abs(l-1) > 1e-9 {
		t.Fatalf("saturated quota: load %v, want 1", l)
	}
	now = now.Add(time.Second)
	used += 200 * time.Millisecond
	if l := c.Load(); math.Abs(l-0.4) > 1e-9 {
		t.Fatalf("load %v, want 0.4", l)
	}
	// Within 250 ms the last value is kept.
	now = now.Add(100 * time.Millisecond)
	used += time.Second
	if l := c.Load(); math.Abs(l-0.4) > 1e-9 {
		t.Fatalf("load %v within the sampling interval, want 0.4", l)
	}
	if c.Cores() != 0.5 {
		t.Fatalf("cores %v", c.Cores())
	}
	got := Capacity()
	t.Logf("this process may use %.2f cores (GOMAXPROCS %d)", got, runtime.GOMAXPROCS(0))
	if got <= 0 {
		t.Fatalf("Capacity() = %v", got)
	}
	if l := New().Load(); l < 0 || l > 1 {
		t.Fatalf("real load %v", l)
	}
}
