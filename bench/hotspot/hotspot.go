// Package hotspot is the cluster experiment of hot-spot offload (Bekas 2017, chapters 3 and 5): on
// in-process nodes with emulated disks, an open-loop read workload over a few ranges; the ranges of
// a key prefix led by one node get ten times their load for D seconds, for each D. Each hot spot is
// run with the offload off (hotspot_offload observing only), on (offloading every hot spot), and,
// once all of those are measured, decided online by the policy's fitted break-even. Each arm reports
// the penalty P = Σ max(0, p99 − SLO) over 500 ms windows of the clients' reads, when the policy
// detected the hot spot and whether it acted. It owns nothing but its workload and its report: it
// acts on the cluster through the client, the nodes' admin API and the policy's mode, and asserts
// nothing.
package hotspot

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/scenario"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
)

// Options shapes the experiment. Zero fields take the defaults of withDefaults.
type Options struct {
	Nodes        int // default 5
	Ranges       int // user ranges; default 10
	HotRanges    int // ranges of the hot prefix, all led by one node; default 3
	KeysPerRange int // default 1000
	ValueBytes   int // default 1024
	// BlockRoomBytes is each node's block cache's room for blocks; default 512 KiB, small beside
	// the 6 MiB of data a node holds, so that most reads reach the disk. CacheBytes is set from it:
	// the room and the two memtables Pebble charges to the cache (storage.Options.BlockRoomBytes).
	BlockRoomBytes int64
	CacheBytes     int64
	IOPS           int // each node's emulated disk; default 1000
	Rate           int // reads per second of each range at rest; default 15
	Factor         float64
	// Durations of the hot spots; default 2, 5, 15 and 60 s.
	Durations []time.Duration
	Gap       time.Duration // at rest before each hot spot; default 8 s
	Tail      time.Duration // measured after each hot spot (its backlog); default 5 s
	SLO       time.Duration // the penalty's and the policy's, at least; default 50 ms
	Seed      uint64        // default 1
	// Progress, if set, gets a line now and then.
	Progress func(string) `json:"-"`
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Nodes, 5)
	def(&o.Ranges, 10)
	def(&o.HotRanges, 3)
	def(&o.KeysPerRange, 1000)
	def(&o.ValueBytes, 1024)
	def(&o.IOPS, 400)
	def(&o.Rate, 15)
	if o.BlockRoomBytes <= 0 {
		o.BlockRoomBytes = 512 << 10
	}
	o.CacheBytes = storage.CacheBytesFor(o.BlockRoomBytes, memTableBytes)
	if o.Factor <= 1 {
		o.Factor = 10
	}
	if len(o.Durations) == 0 {
		o.Durations = []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second, 60 * time.Second}
	}
	if o.Gap <= 0 {
		o.Gap = 8 * time.Second
	}
	if o.Tail <= 0 {
		o.Tail = 5 * time.Second
	}
	if o.SLO <= 0 {
		o.SLO = 50 * time.Millisecond
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// Arm is one hot spot, run one way.
type Arm struct {
	Mode      string  `json:"mode"` // "off", "on" or "auto"
	DurationS float64 `json:"duration_s"`
	// PenaltyMs is Σ max(0, p99 − SLO) over the 500 ms windows from the hot spot's start to Tail
	// after its end; WindowP99Ms each window's p99.
	PenaltyMs   float64   `json:"penalty_ms"`
	P99Ms       float64   `json:"p99_ms"`
	WindowP99Ms []float64 `json:"window_p99_ms"`
	Reads       int64     `json:"reads"`
	Errors      int64     `json:"errors"`
	// DrainS is how long the arm waited, before its rest, for the previous hot spot's backlog of
	// reads to drain.
	DrainS float64 `json:"drain_s"`
	// DetectedS is when the policy first noted or offloaded the hot spot, from its start (−1: never).
	DetectedS float64 `json:"detected_s"`
	// DetectedS and Operators are the hot node's: OtherOperators are the policy's operators for
	// other nodes in the arm (a false alarm, or load the offload moved). Decisions are all the
	// policy's log lines.
	Operators      int      `json:"operators"`
	OtherOperators int      `json:"other_operators"`
	Decisions      []string `json:"decisions"`
	// RestBusy is each node's mean utilization, as its heartbeats reported it, over the rest
	// before the hot spot; NodeBusy a row a second from the hot spot's start (node n1 first).
	RestBusy []float64   `json:"rest_busy"`
	NodeBusy [][]float64 `json:"node_busy"`
	// NodeReadOps and NodeWriteOps are each node's emulated-disk operations per second over the
	// hot spot and its tail (n1 first).
	NodeReadOps  []float64 `json:"node_read_ops_per_sec"`
	NodeWriteOps []float64 `json:"node_write_ops_per_sec"`
	// RestReadOps is each node's disk reads per second over the rest before the hot spot;
	// NodeHitRatio each node's block cache hit ratio over the hot spot and its tail.
	RestReadOps  []float64 `json:"rest_read_ops_per_sec"`
	NodeHitRatio []float64 `json:"node_hit_ratio"`
}

// Result is one duration's arms and the verdict on the online choice.
type Result struct {
	DurationS float64 `json:"duration_s"`
	Off       Arm     `json:"off"`
	On        Arm     `json:"on"`
	Auto      Arm     `json:"auto"`
	// Pays: the offload's penalty was below PaysBelow × the penalty without it. Chose: the online
	// break-even acted. Correct: the two agree.
	Pays    bool `json:"pays"`
	Chose   bool `json:"chose_to_act"`
	Correct bool `json:"correct"`
}

// PaysBelow is how far below the penalty without the offload the penalty with it must be for the
// offload to pay: a saving under a tenth is taken as none (the arms run at different times on a
// shared machine), and an offload that saves nothing still moves leaderships.
const PaysBelow = 0.9

// Report is the experiment's result.
type Report struct {
	Options     Options `json:"options"`
	SteadyP99Ms float64 `json:"steady_p99_ms"`
	SLOMs       float64 `json:"slo_ms"` // the penalty's: --slo, or twice the p99 at rest if higher
	// HotNode leads the hot prefix; MetaNode leads the meta range (and runs the autopilot): it is
	// kept out of every arm, neither hot nor leading a user range.
	// BlockRoomBytes is each node's room for blocks in its cache as its engine reports it once
	// the data is loaded (n1 first).
	BlockRoomBytes []uint64  `json:"block_room_bytes"`
	HotNode        uint64    `json:"hot_node"`
	MetaNode       uint64    `json:"meta_node"`
	Results        []Result  `json:"results"`
	Correct        int       `json:"correct"`
	LoadAvg        []float64 `json:"load_avg_start_end"`
}

// Run starts the cluster, loads it and runs every hot spot: each duration off then on, then each
// duration decided online.
func Run(ctx context.Context, dir string, o Options) (Report, error) {
	o = o.withDefaults()
	rep := Report{Options: o}
	rep.Options.Progress = nil
	rep.LoadAvg = append(rep.LoadAvg, loadAvg())
	// Operations, not bandwidth, bound the emulated disk: a node's utilization is then its reads'
	// share of its IOPS, and a hot spot's load is what makes a node busy.
	dev := scenario.DefaultDevice
	dev.IOPS, dev.ReadBytesPerSec = o.IOPS, 1<<30
	cfg := benchutil.NodeConfig{Autopilot: autopilot.Config{Policies: policy.Config{Hotspot: policy.HotspotOffloadConfig{SLO: o.SLO}}}}
	c, err := benchutil.StartCluster(ctx, dir, o.Nodes, benchutil.NodeSpec{CacheBytes: o.CacheBytes, MemTableBytes: memTableBytes, Device: &dev, Config: cfg})
	if err != nil {
		return rep, err
	}
	defer c.Stop()
	cl, err := client.New(ctx, client.Config{Addrs: c.Addrs()})
	if err != nil {
		return rep, err
	}
	defer cl.Close()
	x := &experiment{o: o, c: c, cl: cl, slo: o.SLO}
	if err := x.setUp(ctx); err != nil {
		return rep, err
	}
	x.w = startWorkload(ctx, cl, o, x.hot)
	defer x.w.stop()
	if err := stopper.SleepContext(ctx, 2*o.Gap); err != nil {
		return rep, err
	}
	rep.SteadyP99Ms = x.w.p99Since(time.Now().Add(-o.Gap))
	rep.HotNode, rep.MetaNode = x.hotNode, x.metaNode
	for _, st := range x.cacheStats() {
		rep.BlockRoomBytes = append(rep.BlockRoomBytes, st.BlockCacheCapacity)
	}
	// The SLO is at least twice the p99 at rest: on a shared machine the rest's own tail would
	// otherwise count as penalty.
	x.slo = max(o.SLO, time.Duration(2*rep.SteadyP99Ms*float64(time.Millisecond)))
	rep.SLOMs = float64(x.slo.Microseconds()) / 1000
	o.Progress(fmt.Sprintf("steady p99 %.1f ms; hot prefix: %d ranges led by n%d", rep.SteadyP99Ms, len(x.hot), x.hotNode))
	for _, d := range o.Durations {
		r := Result{DurationS: d.Seconds()}
		for _, mode := range []policy.HotspotMode{policy.ModeObserve, policy.ModeAct} {
			a, err := x.arm(ctx, d, mode)
			if err != nil {
				return rep, err
			}
			if mode == policy.ModeAct {
				r.On = a
			} else {
				r.Off = a
			}
		}
		rep.Results = append(rep.Results, r)
	}
	for i, d := range o.Durations {
		a, err := x.arm(ctx, d, policy.ModeAuto)
		if err != nil {
			return rep, err
		}
		r := &rep.Results[i]
		r.Auto = a
		r.Pays, r.Chose = r.On.PenaltyMs < PaysBelow*r.Off.PenaltyMs, a.Operators > 0
		r.Correct = r.Pays == r.Chose
		if r.Correct {
			rep.Correct++
		}
	}
	rep.LoadAvg = append(rep.LoadAvg, loadAvg())
	return rep, nil
}

// memTableBytes is the nodes' memtable size: small, since Pebble charges two of them to the block
// cache.
const memTableBytes = 1 << 20

// loadAvg is the machine's one-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	fmt.Sscan(strings.Fields(string(b))[0], &l)
	return l
}

// rangeKey is key i of range r; range r starts at rangeStart(r).
func rangeKey(r, i int) []byte { return fmt.Appendf(nil, "hs/%03d/%06d", r, i) }
func rangeStart(r int) []byte  { return fmt.Appendf(nil, "hs/%03d/", r) }

// contains is slices.Contains for the hot set.
func contains(s []int, v int) bool { return slices.Contains(s, v) }
