// Package history keeps a node's recent stats: one Point every Interval (5 s) for the last Span (an
// hour), in a ring of fixed size, so that the dashboard's charts start with the last hour rather than
// empty (/api/history), and the range-health and volume gauges of /metrics.
//
// A point holds what this node served (user QPS, the meta range's reads left out; gRPC and RESP
// request latencies), what it used (CPU, resident memory, disk) and the health of the ranges it
// answers for (see Health). The package reads the node through Deps and never changes it.
//
// Invariant: the ring holds at most Span/Interval points, oldest first, with increasing times.
package history

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoaldb/shoal/pb"
)

// Defaults.
const (
	DefaultInterval = 5 * time.Second
	DefaultSpan     = time.Hour
	// DefaultFactor is the replication factor ranges are checked against when Deps gives none.
	DefaultFactor = 3
)

// MetaRangeID is the meta range's id (replica.MetaRangeID): its reads are the cluster's own lookups
// (directory refreshes, status pages, clients' range lookups), not user traffic.
const MetaRangeID = 1

// Point is the node's stats over one interval, ending at T.
type Point struct {
	T int64 `json:"t"` // end of the interval (Unix ms)
	// ReadQPS is the reads this node's replicas served, WriteQPS the writes of the ranges it leads
	// (every replica applies every write; the leader's count is the range's), both from its last
	// heartbeat report and without the meta range, whose load is MetaQPS.
	ReadQPS  float64 `json:"read_qps"`
	WriteQPS float64 `json:"write_qps"`
	MetaQPS  float64 `json:"meta_qps"`
	// GRPC and RESP are the data requests served over the interval (nil when no source is set).
	GRPC *Latency `json:"grpc"`
	RESP *Latency `json:"resp"`
	// CPUPercent is the process's CPU time over the interval, in % of one core; MemBytes its
	// resident memory.
	CPUPercent float64 `json:"cpu_percent"`
	MemBytes   uint64  `json:"mem_bytes"`
	// DiskBytes is the engine's tables and WAL; DiskCapacity and DiskAvailable are the size and free
	// space of the store's file system (0 when unknown); DiskBusy the share of time the disk was busy.
	DiskBytes     uint64  `json:"disk_bytes"`
	DiskCapacity  uint64  `json:"disk_capacity_bytes"`
	DiskAvailable uint64  `json:"disk_available_bytes"`
	DiskBusy      float64 `json:"disk_busy"`
	// CacheHits and CacheMisses are the block cache's lookups over the interval.
	CacheHits   uint64 `json:"cache_hits"`
	CacheMisses uint64 `json:"cache_misses"`
	Health
}

// Latency is the requests of one kind served over an interval: their number, how many failed, their
// latency histogram (Buckets[i] took at most the i-th bound of Histogram.Bounds, cumulative) and its
// median and 99th percentile in seconds (0 without requests).
type Latency struct {
	Count   uint64   `json:"count"`
	Errors  uint64   `json:"errors"`
	Buckets []uint64 `json:"buckets"`
	P50     float64  `json:"p50"`
	P99     float64  `json:"p99"`
}

// Histogram is a cumulative latency histogram: Counts[i] requests took at most Bounds[i] seconds,
// Count in all (the +Inf bucket), Errors of them failed.
type Histogram struct {
	Bounds []float64
	Counts []uint64
	Count  uint64
	Errors uint64
}

// LatencySource reads the node's cumulative data-request histograms (gRPC and RESP); the listeners
// measure them, so the server sets it (Recorder.SetLatencySource).
type LatencySource func() (grpc, resp Histogram)

// Deps is how the recorder reads the node. Every field may be nil (its figures stay zero).
type Deps struct {
	// Load is the node's last heartbeat report (ranges with their QPS, block cache counters, disk).
	Load func() *pb.NodeStats
	// DiskBusy is the share of time the store's disk was busy (storage.Engine.DiskUtilization).
	DiskBusy func() float64
	// DataDir is the store's directory (its file system's size and free space).
	DataDir string
	// Replicas lists this node's replicas and how many of them are awake (not quiesced).
	Replicas func() (reps []Replica, awake int)
	// Self is this node's id (0 until it has one).
	Self func() uint64
	// Live lists the nodes heard from recently; Nodes counts the cluster's nodes.
	Live  func() []uint64
	Nodes func() int
	// Factor is the replication factor (DefaultFactor when 0).
	Factor int
}

// Config sizes the ring.
type Config struct {
	Interval time.Duration // between points (DefaultInterval)
	Span     time.Duration // kept (DefaultSpan)
}

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Span <= 0 {
		c.Span = DefaultSpan
	}
	return c
}

// Recorder samples a node's stats into a ring. Safe for concurrent use.
type Recorder struct {
	cfg  Config
	deps Deps

	mu      sync.Mutex
	ring    []Point // capacity Span/Interval; ring[start] is the oldest when full
	start   int
	latency LatencySource
	prev    mark
}

// mark is the cumulative readings of the previous sample, to turn them into an interval's figures.
type mark struct {
	at                time.Time
	cpu               float64 // process CPU seconds
	hits, misses      uint64
	grpc, resp        Histogram
	haveCPU, haveLoad bool
}

// New returns an empty recorder.
func New(cfg Config, deps Deps) *Recorder {
	cfg = cfg.WithDefaults()
	if deps.Factor <= 0 {
		deps.Factor = DefaultFactor
	}
	n := int(cfg.Span / cfg.Interval)
	return &Recorder{cfg: cfg, deps: deps, ring: make([]Point, 0, max(1, n))}
}

// Interval is the time between points.
func (r *Recorder) Interval() time.Duration { return r.cfg.Interval }

// Factor is the replication factor the health counts check ranges against.
func (r *Recorder) Factor() int { return r.deps.Factor }

// Capacity is the number of points kept.
func (r *Recorder) Capacity() int { return cap(r.ring) }

// SetLatencySource sets where request latencies are read.
func (r *Recorder) SetLatencySource(src LatencySource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency = src
}

// LatencyBounds are the upper bounds (seconds) of the points' gRPC and RESP buckets (nil without a
// source).
func (r *Recorder) LatencyBounds() (grpc, resp []float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.prev.grpc.Bounds, r.prev.resp.Bounds
}

// Record takes a sample ending at now and adds it to the ring. The node calls it every Interval; the
// first call only sets the baselines of the interval figures (CPU, cache, latency).
func (r *Recorder) Record(now time.Time) {
	p := Point{T: now.UnixMilli()}
	var load *pb.NodeStats
	if r.deps.Load != nil {
		load = r.deps.Load()
	}
	for _, rl := range load.GetRanges() {
		switch {
		case rl.GetRangeId() == MetaRangeID:
			p.MetaQPS += rl.GetReadQps()
			if rl.GetLeader() {
				p.MetaQPS += rl.GetWriteQps()
			}
		default:
			p.ReadQPS += rl.GetReadQps()
			if rl.GetLeader() {
				p.WriteQPS += rl.GetWriteQps()
			}
		}
	}
	p.DiskBytes = load.GetDiskBytes()
	if r.deps.DiskBusy != nil {
		p.DiskBusy = r.deps.DiskBusy()
	}
	p.DiskCapacity, p.DiskAvailable = volume(r.deps.DataDir)
	p.MemBytes = residentBytes()
	p.Health = r.Health()
	cpu, cpuOK := processCPUSeconds()

	r.mu.Lock()
	defer r.mu.Unlock()
	var grpc, resp Histogram
	if r.latency != nil {
		grpc, resp = r.latency()
	}
	prev := r.prev
	if !prev.at.IsZero() {
		if dt := now.Sub(prev.at).Seconds(); dt > 0 && cpuOK && prev.haveCPU {
			p.CPUPercent = math.Max(0, 100*(cpu-prev.cpu)/dt)
		}
		if load != nil && prev.haveLoad && load.GetBlockCacheHits() >= prev.hits && load.GetBlockCacheMisses() >= prev.misses {
			p.CacheHits, p.CacheMisses = load.GetBlockCacheHits()-prev.hits, load.GetBlockCacheMisses()-prev.misses
		}
		if r.latency != nil {
			p.GRPC, p.RESP = interval(prev.grpc, grpc), interval(prev.resp, resp)
		}
	}
	r.prev = mark{at: now, cpu: cpu, haveCPU: cpuOK, grpc: grpc, resp: resp}
	if load != nil {
		r.prev.hits, r.prev.misses, r.prev.haveLoad = load.GetBlockCacheHits(), load.GetBlockCacheMisses(), true
	}
	if prev.at.IsZero() {
		return // a baseline only
	}
	r.add(p)
}

// add appends p, dropping the oldest point when the ring is full (r.mu held).
func (r *Recorder) add(p Point) {
	if n := len(r.ring); n > 0 && p.T <= r.newestLocked().T {
		return // the clock went back: keep times increasing
	}
	if len(r.ring) < cap(r.ring) {
		r.ring = append(r.ring, p)
		return
	}
	r.ring[r.start] = p
	r.start = (r.start + 1) % len(r.ring)
}

func (r *Recorder) newestLocked() Point {
	if len(r.ring) < cap(r.ring) || r.start == 0 {
		return r.ring[len(r.ring)-1]
	}
	return r.ring[r.start-1]
}

// Since returns the points after t (Unix ms; 0 for all), oldest first.
func (r *Recorder) Since(t int64) []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Point, 0, len(r.ring))
	for i := range r.ring {
		p := r.ring[(r.start+i)%len(r.ring)]
		if p.T > t {
			out = append(out, p)
		}
	}
	return out
}

// Latest is the newest point (false before the second Record).
func (r *Recorder) Latest() (Point, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ring) == 0 {
		return Point{}, false
	}
	return r.newestLocked(), true
}

// interval is the requests between two cumulative readings (nil when b has no buckets).
func interval(a, b Histogram) *Latency {
	if b.Bounds == nil {
		return nil
	}
	l := &Latency{Buckets: make([]uint64, len(b.Counts))}
	same := len(a.Counts) == len(b.Counts) && b.Count >= a.Count && b.Errors >= a.Errors
	for i, c := range b.Counts {
		if same && c >= a.Counts[i] {
			c -= a.Counts[i]
		}
		l.Buckets[i] = c
	}
	l.Count, l.Errors = b.Count, b.Errors
	if same {
		l.Count, l.Errors = b.Count-a.Count, b.Errors-a.Errors
	}
	if l.Count > 0 {
		l.P50, l.P99 = Quantile(0.5, b.Bounds, l.Buckets, l.Count), Quantile(0.99, b.Bounds, l.Buckets, l.Count)
	}
	return l
}

// Quantile is the q-quantile of a cumulative histogram of count observations, interpolated linearly
// inside the bucket that holds it, as Prometheus' histogram_quantile does; above the last bound it is
// that bound.
func Quantile(q float64, bounds []float64, cum []uint64, count uint64) float64 {
	if count == 0 || len(bounds) == 0 {
		return 0
	}
	rank := q * float64(count)
	lo, below := 0.0, 0.0
	for i, b := range bounds {
		if i >= len(cum) {
			break
		}
		if c := float64(cum[i]); c >= rank {
			inside := c - below
			if inside <= 0 {
				return b
			}
			return lo + (b-lo)*(rank-below)/inside
		}
		lo, below = b, float64(cum[i])
	}
	return bounds[len(bounds)-1]
}

// ---------- /metrics: range health and the store's volume ----------

var (
	descUnderReplicated = prometheus.NewDesc("shoal_ranges_underreplicated",
		"Ranges with fewer voters on live nodes than the replication factor (at most the number of nodes), counted by their leader on this node, or, without a leader, by their first live voter: summed over nodes, each range counts once.", nil, nil)
	descUnavailable = prometheus.NewDesc("shoal_ranges_unavailable",
		"Ranges without a quorum of voters on live nodes, counted as shoal_ranges_underreplicated is.", nil, nil)
	descQuiesced = prometheus.NewDesc("shoal_replicas_quiesced",
		"Replicas on this node that are quiesced (not ticking: their range is idle).", nil, nil)
	descCapacity = prometheus.NewDesc("shoal_store_capacity_bytes",
		"Size of the file system holding the node's store.", nil, nil)
	descAvailable = prometheus.NewDesc("shoal_store_available_bytes",
		"Free space on the file system holding the node's store, for the node's user.", nil, nil)
)

// Describe implements prometheus.Collector.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderReplicated, descUnavailable, descQuiesced, descCapacity, descAvailable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: range health now, and the store's volume.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) {
	h := r.Health()
	ch <- prometheus.MustNewConstMetric(descUnderReplicated, prometheus.GaugeValue, float64(h.UnderReplicated))
	ch <- prometheus.MustNewConstMetric(descUnavailable, prometheus.GaugeValue, float64(h.Unavailable))
	ch <- prometheus.MustNewConstMetric(descQuiesced, prometheus.GaugeValue, float64(h.Quiesced))
	if c, a := volume(r.deps.DataDir); c > 0 {
		ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(c))
		ch <- prometheus.MustNewConstMetric(descAvailable, prometheus.GaugeValue, float64(a))
	}
}
