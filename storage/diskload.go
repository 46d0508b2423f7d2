package storage

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoaldb/shoal/storage/emudisk"
)

// diskMeter turns cumulative disk counters into a utilization over the last sample interval.
type diskMeter struct {
	// ticks returns the disk's cumulative busy time; ok false when it is unknown (no device found).
	ticks func() (busy time.Duration, ok bool)

	mu       sync.Mutex
	last     time.Time
	lastBusy time.Duration
	lastDev  emudisk.Stats
	value    float64
}

// diskSampleEvery is the shortest interval a utilization is measured over: shorter ones are
// dominated by a single operation's rounding.
const diskSampleEvery = 100 * time.Millisecond

// DiskUtilization is how busy the engine's disk was over the last sample interval, in [0, 1]: the
// share of the emulated device's budget used (the largest of its IOPS, read and write bandwidth
// shares), or for a real disk the share of time the block device had I/O in flight (Linux io_ticks).
// It is 0 when neither is known. Sampled at most every 100 ms; between samples it returns the last
// value, so callers may call it often.
func (e *Engine) DiskUtilization() float64 {
	m := &e.disk
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.last.IsZero() && now.Sub(m.last) < diskSampleEvery {
		return m.value
	}
	dt := now.Sub(m.last)
	first := m.last.IsZero()
	m.last = now
	switch {
	case e.device != nil:
		st := e.device.Stats()
		if !first {
			m.value = deviceUtilization(e.device.Options(), m.lastDev, st, dt)
		}
		m.lastDev = st
	case m.ticks != nil:
		busy, ok := m.ticks()
		if !ok {
			return 0
		}
		if !first && dt > 0 {
			m.value = min(1, max(0, float64(busy-m.lastBusy)/float64(dt)))
		}
		m.lastBusy = busy
	}
	return m.value
}

// deviceUtilization is the share of an emulated device's budget that the operations between two
// readings of its counters used over dt: the largest of the IOPS, read and write bandwidth shares,
// at most 1 (callers that waited for tokens are beyond it).
func deviceUtilization(o emudisk.Options, a, b emudisk.Stats, dt time.Duration) float64 {
	s := dt.Seconds()
	if s <= 0 {
		return 0
	}
	u := 0.0
	share := func(n int64, rate float64) {
		if rate > 0 {
			u = max(u, float64(n)/(rate*s))
		}
	}
	share(b.ReadOps+b.WriteOps-a.ReadOps-a.WriteOps, float64(o.IOPS))
	share(b.ReadBytes-a.ReadBytes, float64(o.ReadBytesPerSec))
	share(b.WriteBytes-a.WriteBytes, float64(o.WriteBytesPerSec))
	if b.Throttled > a.Throttled {
		u = 1 // callers queued for the budget: saturated whatever the rounding of the shares
	}
	return min(1, u)
}

// parseIOTicks reads io_ticks, the 10th field of a block device's stat file (milliseconds with I/O
// in flight).
func parseIOTicks(s string) (time.Duration, bool) {
	f := strings.Fields(s)
	if len(f) < 10 {
		return 0, false
	}
	ms, err := strconv.ParseUint(f[9], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
