package benchutil

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUMeter measures, second by second, the process's CPU time (in cores) and the share of the
// machine's CPU time its host took (steal, from /proc/stat; 0 where there is none).
type CPUMeter struct {
	at          time.Time
	cpu         time.Duration
	steal, busy float64
}

// NewCPUMeter starts measuring from now.
func NewCPUMeter() *CPUMeter {
	m := &CPUMeter{at: time.Now(), cpu: ProcessCPU()}
	m.steal, m.busy = machineCPU()
	return m
}

// Second is the process's CPU time in cores and the steal share since the previous call.
func (m *CPUMeter) Second() (cores, steal float64) {
	now, cpu := time.Now(), ProcessCPU()
	st, all := machineCPU()
	if d := now.Sub(m.at); d > 0 && cpu >= m.cpu {
		cores = float64(cpu-m.cpu) / float64(d)
	}
	if all > m.busy {
		steal = (st - m.steal) / (all - m.busy)
	}
	m.at, m.cpu, m.steal, m.busy = now, cpu, st, all
	return math.Round(cores*1000) / 1000, math.Round(steal*10000) / 10000
}

// ProcessCPU is the CPU time the process has used, user and system.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU is /proc/stat's steal time and all time of every CPU, in jiffies.
func machineCPU() (steal, all float64) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0
	}
	fields := strings.Fields(sc.Text()) // cpu user nice system idle iowait irq softirq steal ...
	for i, v := range fields[1:min(len(fields), 9)] {
		x, _ := strconv.ParseFloat(v, 64)
		all += x
		if i == 7 {
			steal = x
		}
	}
	return steal, all
}
