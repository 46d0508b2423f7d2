package deploy

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuSample is the CPU the host spent in one second of the rolling restart, in cores (1.0: one core
// busy for the whole second), split by who spent it: each node's container, the load generator, and
// the rest (dockerd, containerd, runc, docker exec, docker-compose, the test itself, the kernel).
type cpuSample struct {
	Unix  float64   `json:"unix"`
	Host  float64   `json:"host_cores"`
	Nodes []float64 `json:"node_cores"` // node1 … node3; 0 while a node's container is stopped
	Load  float64   `json:"load_cores"`
	Other float64   `json:"other_cores"`
}

// cpuCounters are cumulative CPU times in seconds.
type cpuCounters struct {
	host  float64
	nodes []float64
	load  float64
}

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on Linux everywhere).
const userHZ = 100

// readCPU reads the host's busy time (/proc/stat), each container's (the cgroup v1 cpuacct
// controller Docker's cgroupfs driver uses) and the load generator's (/proc/PID/stat). A counter
// that cannot be read (a stopped container has no cgroup) reads 0.
func readCPU(ids []string, loadPid int) cpuCounters {
	c := cpuCounters{nodes: make([]float64, len(ids))}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		// cpu user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
		for i, v := range f[1:min(len(f), 9)] {
			if i == 3 || i == 4 {
				continue
			}
			n, _ := strconv.ParseFloat(v, 64)
			c.host += n / userHZ
		}
	}
	for i, id := range ids {
		if b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/docker/" + id + "/cpuacct.usage"); err == nil {
			ns, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
			c.nodes[i] = ns / 1e9
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", loadPid)); err == nil {
		// Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
		s := string(b)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 12 {
			u, _ := strconv.ParseFloat(f[11], 64)
			k, _ := strconv.ParseFloat(f[12], 64)
			c.load = (u + k) / userHZ
		}
	}
	return c
}

// sampleCPU records a cpuSample every second until the returned stop is called, which returns them.
func sampleCPU(ids []string, loadPid int) (stop func() []cpuSample) {
	prev, prevAt := readCPU(ids, loadPid), time.Now()
	return sampleEvery(func() (cpuSample, bool) {
		cur, at := readCPU(ids, loadPid), time.Now()
		s := cpuDelta(prev, cur, at.Sub(prevAt).Seconds(), at)
		prev, prevAt = cur, at
		return s, true
	})
}

// sampleEvery calls f every second, on a goroutine of its own, until the returned stop is called,
// which returns what f gave (a false from f: nothing that second).
func sampleEvery[T any](f func() (T, bool)) (stop func() []T) {
	done := make(chan struct{})
	res := make(chan []T, 1)
	go func() {
		var samples []T
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				res <- samples
				return
			case <-tick.C:
			}
			if v, ok := f(); ok {
				samples = append(samples, v)
			}
		}
	}()
	return func() []T {
		close(done)
		return <-res
	}
}

// cpuDelta is the CPU spent between two readings d seconds apart, in cores. A container's counter
// starts again from 0 when it restarts; a reading below the previous one counts from 0.
func cpuDelta(prev, cur cpuCounters, d float64, at time.Time) cpuSample {
	s := cpuSample{Unix: float64(at.UnixMilli()) / 1000, Nodes: make([]float64, len(cur.nodes))}
	if d <= 0 {
		return s
	}
	delta := func(a, b float64) float64 {
		if b < a {
			return b / d
		}
		return (b - a) / d
	}
	s.Host, s.Load = delta(prev.host, cur.host), delta(prev.load, cur.load)
	s.Other = s.Host - s.Load
	for i := range cur.nodes {
		s.Nodes[i] = delta(prev.nodes[i], cur.nodes[i])
		s.Other -= s.Nodes[i]
	}
	s.Other = max(s.Other, 0)
	return s
}
