package scanjobs

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
)

// Runtime is the Go runtime's account of an arm's window, for the whole process (the nodes, the
// foreground's client and the jobs share it): what could lengthen the foreground's tail besides its
// disk reads. The scheduling latencies are the time goroutines spent runnable before they ran: on a
// host whose cores are busy they grow with the CPU the jobs take, and a foreground operation waits
// them at each of its hand-offs (client, gRPC, the range's leader).
type Runtime struct {
	GCCycles     uint64  `json:"gc_cycles"`
	GCPauseMs    float64 `json:"gc_pause_ms"`     // stop-the-world pauses for the GC, in all
	GCPauseMaxMs float64 `json:"gc_pause_max_ms"` // the longest (its histogram bucket's upper bound)
	// GCAssistCPU is the CPU time per second allocating goroutines spent marking for the GC (part of
	// GCCPUSeconds): time a foreground request may spend working for the collector.
	GCAssistCPU   float64 `json:"gc_assist_cpu_seconds_per_sec"`
	AllocMBPerSec float64 `json:"alloc_mb_per_sec"`
	AllocsPerSec  float64 `json:"allocs_per_sec"`
	// SchedMeanUs, SchedP99Us and SchedP999Us are the scheduling latencies' mean and quantiles,
	// SchedOver1ms the share of them over a millisecond.
	SchedMeanUs  float64 `json:"sched_mean_us"`
	SchedP99Us   float64 `json:"sched_p99_us"`
	SchedP999Us  float64 `json:"sched_p999_us"`
	SchedOver1ms float64 `json:"sched_over_1ms"`
	// MutexWait is the time per second goroutines were blocked on sync.Mutex or sync.RWMutex.
	MutexWait float64 `json:"mutex_wait_seconds_per_sec"`
}

// The runtime metrics read, by their position in a reading (goStats).
const (
	rmGCCPU = iota
	rmHeapLive
	rmGCCycles
	rmGCPauses
	rmAssistCPU
	rmAllocBytes
	rmAllocObjects
	rmSchedLatencies
	rmMutexWait
)

var runtimeSamples = []string{
	rmGCCPU:          "/cpu/classes/gc/total:cpu-seconds",
	rmHeapLive:       "/gc/heap/live:bytes",
	rmGCCycles:       "/gc/cycles/total:gc-cycles",
	rmGCPauses:       "/sched/pauses/total/gc:seconds",
	rmAssistCPU:      "/cpu/classes/gc/mark/assist:cpu-seconds",
	rmAllocBytes:     "/gc/heap/allocs:bytes",
	rmAllocObjects:   "/gc/heap/allocs:objects",
	rmSchedLatencies: "/sched/latencies:seconds",
	rmMutexWait:      "/sync/mutex/wait/total:seconds",
}

// goStats is one reading of the runtime's metrics.
type goStats struct{ s []metrics.Sample }

func goRuntime() goStats {
	g := goStats{s: make([]metrics.Sample, len(runtimeSamples))}
	for i, n := range runtimeSamples {
		g.s[i].Name = n
	}
	metrics.Read(g.s)
	return g
}

func (g goStats) float(i int) float64 {
	switch v := g.s[i].Value; v.Kind() {
	case metrics.KindFloat64:
		return v.Float64()
	case metrics.KindUint64:
		return float64(v.Uint64())
	}
	return 0
}

func (g goStats) hist(i int) *metrics.Float64Histogram {
	if g.s[i].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	return g.s[i].Value.Float64Histogram()
}

func (g goStats) gcCPU() float64  { return g.float(rmGCCPU) }
func (g goStats) liveMB() float64 { return g.float(rmHeapLive) / 1e6 }

// runtimeBetween is the runtime's account of the secs seconds between two readings.
func runtimeBetween(a, b goStats, secs float64) Runtime {
	var r Runtime
	r.GCCycles = uint64(b.float(rmGCCycles) - a.float(rmGCCycles))
	pauses := histDelta(a.hist(rmGCPauses), b.hist(rmGCPauses))
	r.GCPauseMs, r.GCPauseMaxMs = 1000*pauses.sum(), 1000*pauses.max()
	r.GCAssistCPU = (b.float(rmAssistCPU) - a.float(rmAssistCPU)) / secs
	r.AllocMBPerSec = (b.float(rmAllocBytes) - a.float(rmAllocBytes)) / 1e6 / secs
	r.AllocsPerSec = (b.float(rmAllocObjects) - a.float(rmAllocObjects)) / secs
	lat := histDelta(a.hist(rmSchedLatencies), b.hist(rmSchedLatencies))
	if n := lat.count(); n > 0 {
		r.SchedMeanUs = 1e6 * lat.sum() / float64(n)
		r.SchedP99Us, r.SchedP999Us = 1e6*lat.quantile(0.99), 1e6*lat.quantile(0.999)
		r.SchedOver1ms = lat.above(1e-3) / float64(n)
	}
	r.MutexWait = (b.float(rmMutexWait) - a.float(rmMutexWait)) / secs
	return r
}

// histogram is a runtime histogram's counts over a window: counts[i] in [bounds[i], bounds[i+1]).
type histogram struct {
	counts []uint64
	bounds []float64
}

func histDelta(a, b *metrics.Float64Histogram) histogram {
	if a == nil || b == nil || len(a.Counts) != len(b.Counts) {
		return histogram{}
	}
	h := histogram{counts: make([]uint64, len(b.Counts)), bounds: b.Buckets}
	for i := range b.Counts {
		h.counts[i] = b.Counts[i] - a.Counts[i]
	}
	return h
}

// mid is bucket i's representative value: its middle, or its finite bound for an open bucket.
func (h histogram) mid(i int) float64 {
	lo, hi := h.bounds[i], h.bounds[i+1]
	switch {
	case math.IsInf(lo, -1):
		return hi
	case math.IsInf(hi, 1):
		return lo
	}
	return (lo + hi) / 2
}

func (h histogram) count() uint64 {
	var n uint64
	for _, c := range h.counts {
		n += c
	}
	return n
}

func (h histogram) sum() float64 {
	var s float64
	for i, c := range h.counts {
		s += float64(c) * h.mid(i)
	}
	return s
}

func (h histogram) max() float64 {
	for i := len(h.counts) - 1; i >= 0; i-- {
		if h.counts[i] > 0 {
			if math.IsInf(h.bounds[i+1], 1) {
				return h.bounds[i]
			}
			return h.bounds[i+1]
		}
	}
	return 0
}

// quantile is the upper bound of the bucket holding the q quantile.
func (h histogram) quantile(q float64) float64 {
	n := h.count()
	if n == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= want {
			if math.IsInf(h.bounds[i+1], 1) {
				return h.bounds[i]
			}
			return h.bounds[i+1]
		}
	}
	return h.max()
}

// above counts the values in buckets wholly at or above v.
func (h histogram) above(v float64) float64 {
	var n uint64
	for i, c := range h.counts {
		if h.bounds[i] >= v {
			n += c
		}
	}
	return float64(n)
}

// startProfiles profiles the window of arm into dir until the returned func is called; nothing
// for "" (Options.ProfileDir). A profile that cannot be written is reported to warn. It writes a CPU profile of the window, and the mutex and heap
// profiles at its start and end (cumulative: `go tool pprof -diff_base` of the two gives the
// window's contention and, with -sample_index=alloc_space, its allocations).
func startProfiles(dir, arm string, warn func(string)) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	write := func(name, what string) {
		f, err := os.Create(filepath.Join(dir, name))
		if err == nil {
			err = pprof.Lookup(what).WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			warn(fmt.Sprintf("profile %s: %v", name, err))
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, "cpu-"+arm+".pprof"))
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("profiles: %w", err)
	}
	runtime.GC()
	write("heap-"+arm+"-start.pprof", "heap")
	write("mutex-"+arm+"-start.pprof", "mutex") // the profile is cumulative: diff the two
	prev := runtime.SetMutexProfileFraction(10)
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			warn(fmt.Sprintf("profile cpu-%s.pprof: %v", arm, err))
		}
		runtime.GC()
		write("heap-"+arm+"-end.pprof", "heap")
		write("mutex-"+arm+".pprof", "mutex")
		runtime.SetMutexProfileFraction(prev)
	}, nil
}
