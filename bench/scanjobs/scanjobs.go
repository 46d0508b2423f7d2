// Package scanjobs is the scheduled-scan-jobs scenario: recurring scan jobs with deadlines over a
// foreground YCSB-B load, on in-process nodes with emulated disks, run once per strategy of
// node/jobs (demand reads, demand caching, the prefetch planner) and once without jobs, each arm on
// a fresh cluster. Per arm it reports the runs on time, the peak and total disk reads, the bytes read
// from copies and the foreground's latency. It owns its clusters and its report, and must never
// change what a strategy does: it only configures the nodes and watches them.
package scanjobs

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node/jobs"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// NoJobs is the arm with the foreground load alone: its p99 is the one the others are compared with.
const NoJobs = "no-jobs"

// Options shape the scenario. Zero fields take the defaults.
type Options struct {
	Nodes int `json:"nodes"`
	// Spans key spans of SpanRows rows of ValueBytes each; the jobs pick them by a Zipf popularity.
	Spans      int `json:"spans"`
	SpanRows   int `json:"span_rows"`
	ValueBytes int `json:"value_bytes"`
	// Jobs count jobs, every Period, their deadlines drawn in [MinDeadline, MaxDeadline], half their
	// first runs at once and the rest spread over Stagger; each reads at JobRate when it reads its span
	// from disk. The defaults follow the solver's trace-shaped mix (plan/prefetch.Mix, §6.2): three
	// jobs a span (36 over 12), four spans a node, deadlines drawn as that mix draws them for a run
	// of two slots (6 MiB read at 6 MiB/s in 0.5-s slots: 1.5–3 s). The runs starting together on one
	// node read three or four distinct spans at once, 18–24 MiB/s asked of a 12 MiB/s disk: the
	// chapter's high-load regime, where not every run read on demand can meet its deadline.
	Jobs        int           `json:"jobs"`
	Period      time.Duration `json:"period_ns"`
	MinDeadline time.Duration `json:"min_deadline_ns"`
	MaxDeadline time.Duration `json:"max_deadline_ns"`
	Stagger     time.Duration `json:"stagger_ns"`
	JobRate     int64         `json:"job_rate"`
	// DiskRate is each node's emulated disk read bandwidth (bytes/s). BlockRoomBytes is its block
	// cache's room for blocks: the cache is this plus the two memtables Pebble charges to it
	// (storage.Options.BlockRoomBytes); the default 2 MiB is a thirty-sixth of the 72 MiB of rows a
	// node holds, so the jobs' and most of the foreground's reads reach the disk. CopyBytes is the
	// copies the jobs' plan may hold per node, beside the engine: no part of the block cache; the
	// default 48 MiB is twice the spans a node's jobs read.
	DiskRate       int64 `json:"disk_rate"`
	BlockRoomBytes int64 `json:"block_room_bytes"`
	CopyBytes      int64 `json:"copy_bytes"`
	// Rate is the foreground's operations per second (95 % reads, 5 % updates, Zipf over the rows),
	// from Clients workers.
	Rate    int `json:"rate"`
	Clients int `json:"clients"`
	// Measure is the measured window, from two periods after the jobs are added: the first runs are
	// due as they are added, before any plan, and their reads on demand may reach into the next period.
	Measure    time.Duration `json:"measure_ns"`
	Strategies []string      `json:"strategies"`
	Seed       int64         `json:"seed"`
	// ProfileDir, when set, takes each arm's CPU, mutex and heap profiles of its window
	// (goruntime.go).
	ProfileDir string `json:"-"`

	Progress func(string) `json:"-"`
}

func (o Options) withDefaults() Options {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.Nodes, 3)
	def(&o.Spans, 12)
	def(&o.SpanRows, 6000)
	def(&o.ValueBytes, 1024)
	def(&o.Jobs, 36)
	def(&o.Rate, 300)
	def(&o.Clients, 16)
	defd := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	defd(&o.Period, 15*time.Second)
	defd(&o.MinDeadline, 1500*time.Millisecond)
	defd(&o.MaxDeadline, 3*time.Second)
	defd(&o.Stagger, 2*time.Second)
	defd(&o.Measure, 45*time.Second)
	def64 := func(p *int64, v int64) {
		if *p == 0 {
			*p = v
		}
	}
	def64(&o.JobRate, 6<<20)
	def64(&o.DiskRate, 12<<20)
	def64(&o.BlockRoomBytes, 2<<20)
	def64(&o.CopyBytes, 48<<20)
	if len(o.Strategies) == 0 {
		o.Strategies = []string{NoJobs, string(jobs.DemandReads), string(jobs.DemandCaching), string(jobs.Planned)}
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// Defaults are the scenario's defaults (the bench command's flags).
func Defaults() Options { return Options{}.withDefaults() }

// memTableBytes is each node's memtable size: small, so the rows go to tables on the emulated disk.
const memTableBytes = 1 << 20

// cacheBytes is each node's block cache: the room for blocks plus the two memtables.
func (o Options) cacheBytes() int64 { return storage.CacheBytesFor(o.BlockRoomBytes, memTableBytes) }

// Arm is one strategy's outcome over the measured window.
type Arm struct {
	Strategy string `json:"strategy"`
	// Runs due in the window (their deadline inside it): on time, late, failed, refused by the plan,
	// skipped (due while the job's last run still went on); jobs with every such run on time.
	RunsDue     int `json:"runs_due"`
	RunsOnTime  int `json:"runs_on_time"`
	RunsLate    int `json:"runs_late"`
	RunsFailed  int `json:"runs_failed"`
	RunsRefused int `json:"runs_refused"`
	RunsSkipped int `json:"runs_skipped"`
	JobsOnTime  int `json:"jobs_on_time"`
	// RunsFromCopy counts the runs that read all their span from copies, RunsPartCopy those that read
	// part of it.
	RunsFromCopy int `json:"runs_from_copy"`
	RunsPartCopy int `json:"runs_part_copy"`
	// Disk reads in the window: the highest one node read in one second, the mean per node, and the
	// total over the nodes; the bytes runs read from copies, and the bytes prefetches read.
	PeakReadBytesPerSec float64 `json:"peak_read_bytes_per_sec"`
	// PeakNode and PeakSecond say where and when (seconds into the window) the peak was; Top5 are the
	// five highest seconds of one node (bytes/s).
	PeakNode   int       `json:"peak_node"`
	PeakSecond int       `json:"peak_second"`
	Top5       []float64 `json:"top5"`
	// Top are those five seconds with their reads by source.
	Top []Second `json:"top"`
	// PeakLessOther is the highest node-second of the disk's reads less its Other (compactions',
	// flushes' and snapshots' reads): the foreground's and the jobs' blocks alone, the chapter's
	// inter-tier transfers plus the foreground. Not the goal's figure (that is the disk's peak, every
	// reader included); it says how much of a peak a compaction beside it made.
	PeakLessOther       float64 `json:"peak_less_other"`
	PeakLessOtherNode   int     `json:"peak_less_other_node"`
	PeakLessOtherSecond int     `json:"peak_less_other_second"`
	// JobsPeak is the most one node's disk gave the jobs' prefetches and runs in one second under a
	// plan (bytes of keys and values, as the plan counts them: its blocks carry more).
	JobsPeak float64 `json:"jobs_peak"`
	// Compactions are those the nodes ran in the window.
	Compactions []Compaction `json:"compactions"`
	// Seconds are every node's every second (not printed).
	Seconds             []Second `json:"-"`
	MeanReadBytesPerSec float64  `json:"mean_read_bytes_per_sec"`
	ReadBytes           int64    `json:"read_bytes"`
	CopyBytes           uint64   `json:"copy_bytes"`
	PrefetchBytes       uint64   `json:"prefetch_bytes"`
	// CopiesShort counts, over the window, the copies cut short and the runs that read from disk what
	// their plan served from a copy, by why (node/jobs Stats.CopiesShort).
	CopiesShort map[string]uint64 `json:"copies_short,omitempty"`
	// Plans are the plans the meta leader made in the window, each with its peak and the slot-by-slot
	// LP's least peak for the runs it admits; PlanRatio their ratios' median and PlanRatioRange the
	// lowest and highest. PlanPeak and PlanBound are the plan with the highest ratio, WorstPlan its
	// input (to reproduce it offline: plan/prefetch's TestScenarioWindow is one).
	Plans          []PlanCheck      `json:"plans,omitempty"`
	PlanRatio      float64          `json:"plan_ratio"`
	PlanRatioRange [2]float64       `json:"plan_ratio_range"`
	PlanPeak       float64          `json:"plan_peak"`
	PlanBound      float64          `json:"plan_bound"`
	WorstPlan      *jobs.PlanRecord `json:"worst_plan,omitempty"`
	// SpanLeaders is each span's leader at the end of the window, LeadersMoved how many are not where
	// setUp placed them (span s on node s mod Nodes + 1). LeadersReplaced is how many had moved by
	// the end of setUp (its load and compaction) and were transferred back before the foreground
	// began; LeadersMovedBefore how many were off their place again at the window's start.
	SpanLeaders        []uint64 `json:"span_leaders"`
	LeadersMoved       int      `json:"leaders_moved"`
	LeadersReplaced    int      `json:"leaders_replaced"`
	LeadersMovedBefore int      `json:"leaders_moved_before"`
	// NodeBlockRoomMB is each node's block cache room for blocks at the end of the window as its
	// engine measures it (the cache less the memtables charged to it), NodeHitRatio the share of its
	// block lookups in the window the cache served.
	NodeBlockRoomMB []float64 `json:"node_block_room_mb"`
	NodeHitRatio    []float64 `json:"node_block_hit_ratio"`
	// ServedBlockBytes are the bytes of the blocks the nodes' reads (the foreground's and the jobs')
	// looked up in the window, ServedInCacheBytes those the block cache held; JobBlockBytes and
	// JobInCacheBytes their part the jobs' reads (runs and prefetches, labelled as theirs on the node
	// that served them) looked up. FgHitRatio is the foreground's alone: (ServedInCacheBytes −
	// JobInCacheBytes) ÷ (ServedBlockBytes − JobBlockBytes), in every arm; FgBlockBytesPerOp the
	// foreground's lookups per operation (alike in every arm when the jobs' reads are all labelled).
	ServedBlockBytes   uint64  `json:"served_block_bytes"`
	ServedInCacheBytes uint64  `json:"served_in_cache_bytes"`
	JobBlockBytes      uint64  `json:"job_block_bytes"`
	JobInCacheBytes    uint64  `json:"job_in_cache_bytes"`
	FgHitRatio         float64 `json:"fg_hit_ratio"`
	FgBlockBytesPerOp  float64 `json:"fg_block_bytes_per_op"`
	// IdleOps are the disk operations the nodes' devices served in the idle class in the window (the
	// jobs' reads: storage.Engine.IterateFor), IdleWaitMs their mean wait for the foreground and for
	// their tokens; FgWaitMs the mean wait of the other operations (the foreground's, compactions',
	// flushes') for the disk's budget (emudisk Stats.Throttled over their count).
	IdleOps    int64   `json:"idle_ops"`
	IdleWaitMs float64 `json:"idle_wait_ms"`
	FgWaitMs   float64 `json:"fg_wait_ms"`
	// IdleWaitMaxMs is the longest wait of one idle-class operation on any node since the arm's
	// cluster started.
	IdleWaitMaxMs float64 `json:"idle_wait_max_ms"`
	// HostReadUs is the mean time the host's disk took to answer one read not in the idle class (the
	// foreground's misses, compactions'), before the device's wait: whether the jobs' real reads slow
	// the foreground's on the disk the in-process nodes share. IdleWindowFills are the real reads the
	// idle readers made, a window of blocks each (emudisk window.go).
	HostReadUs      float64 `json:"host_read_us"`
	IdleWindowFills int64   `json:"idle_window_fills"`
	// CPUSeconds is the process's CPU time per second of the window (the nodes, the foreground's
	// client and the jobs together: the same foreground in every arm, so an arm's excess over the
	// no-jobs arm's is what its jobs cost).
	CPUSeconds float64 `json:"cpu_seconds_per_sec"`
	// OtherCPUSeconds is the CPU time per second the host's other processes took over the window: a
	// p99 is compared with the no-jobs arm's only when they left both arms alike.
	OtherCPUSeconds float64 `json:"other_cpu_seconds_per_sec"`
	// GCCPUSeconds is the part of it the Go garbage collector took (its workers and the assists it
	// asked of allocating goroutines, the foreground's requests among them), HeapLiveMB the heap live
	// after the window's last cycle (the copies held in it).
	GCCPUSeconds float64 `json:"gc_cpu_seconds_per_sec"`
	HeapLiveMB   float64 `json:"heap_live_mb"`
	// Runtime is the rest of the Go runtime's account of the window: GC cycles and pauses,
	// allocations, scheduling latencies, mutex waits.
	Runtime Runtime `json:"runtime"`
	// The foreground over the window: operations, errors, p50 and p99 from each one's scheduled start.
	Ops    int64   `json:"ops"`
	Errors int64   `json:"errors"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	// PeriodP99Ms is the p99 of each period of the window (the last one cut short by the window's
	// end): a steady arm's are alike.
	PeriodP99Ms []float64 `json:"period_p99_ms"`
	// Runs are the runs the jobs' states keep, in seconds from the window's start (not printed).
	Runs []RunRecord `json:"-"`
	// Admission lists the jobs the plan refused, with the reason.
	Refused []string `json:"refused,omitempty"`
}

// RunRecord is one run as its job's state keeps it, its times in seconds from the window's start.
type RunRecord struct {
	Job                    string
	Due, Started, Finished float64
	Bytes, CopyBytes       int64
	OnTime                 bool
}

// Report is the scenario's outcome.
type Report struct {
	Options Options `json:"options"`
	// CacheBytes is each node's block cache: Options.BlockRoomBytes plus two memtables.
	CacheBytes int64 `json:"cache_bytes"`
	Arms       []Arm `json:"arms"`
	// LoadAvg is the host's 1-minute load average before and after the arms.
	LoadAvg [2]string `json:"load_avg"`
}

// Run runs every strategy's arm under dir.
func Run(ctx context.Context, dir string, o Options) (Report, error) {
	o = o.withDefaults()
	rep := Report{Options: o, CacheBytes: o.cacheBytes()}
	rep.Options.Progress = nil
	rep.LoadAvg[0] = loadAvg()
	for i, s := range o.Strategies {
		if s != NoJobs {
			if _, err := jobs.ParseStrategy(s); err != nil {
				return rep, err
			}
		}
		a, err := runArm(ctx, filepath.Join(dir, fmt.Sprintf("arm%d", i)), o, s)
		if err != nil {
			return rep, fmt.Errorf("arm %s: %w", s, err)
		}
		o.Progress(fmt.Sprintf("%s: %d/%d runs on time, peak %.1f MiB/s (%.1f without compactions), %d MiB read, p99 %.1f ms, CPU %.2f s/s (others %.2f), span leaders moved %d/%d/%d (set-up, before, end), %d idle-class disk ops waiting %.2f ms each, the others %.3f ms", s,
			a.RunsOnTime, a.RunsDue, a.PeakReadBytesPerSec/(1<<20), a.PeakLessOther/(1<<20), a.ReadBytes>>20, a.P99Ms, a.CPUSeconds, a.OtherCPUSeconds,
			a.LeadersReplaced, a.LeadersMovedBefore, a.LeadersMoved, a.IdleOps, a.IdleWaitMs, a.FgWaitMs))
		rep.Arms = append(rep.Arms, a)
	}
	rep.LoadAvg[1] = loadAvg()
	return rep, nil
}

// fgHitRatio sets the arm's foreground hit ratio and block lookups per operation from its block
// lookups less the jobs'.
func (a *Arm) fgHitRatio() {
	fg := float64(a.ServedBlockBytes) - float64(a.JobBlockBytes)
	if fg <= 0 {
		return
	}
	a.FgHitRatio = math.Round(1000*(float64(a.ServedInCacheBytes)-float64(a.JobInCacheBytes))/fg) / 1000
	if a.Ops > 0 {
		a.FgBlockBytesPerOp = math.Round(fg / float64(a.Ops))
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// homeOf is the node setUp places span s's leadership on, of nodes.
func homeOf(s, nodes int) uint64 { return uint64(s%nodes) + 1 }

// spanStart is the first key of span s, rowKey row i of it.
func spanStart(s int) string { return fmt.Sprintf("usertable/s%02d/", s) }
func spanEnd(s int) string   { return fmt.Sprintf("usertable/s%02d0", s) }
func rowKey(s, i int) []byte { return fmt.Appendf(nil, "usertable/s%02d/%07d", s, i) }

// jobSpec is one generated job: its span, deadline and first-run offset.
type jobSpec struct {
	name     string
	span     int
	deadline time.Duration
	offset   time.Duration
}

// popularity is the Zipf exponent of the spans' popularity, the solver's mix's (plan/prefetch.Mix):
// a few inputs read by many jobs, as in the chapter's traces, where 15 % of the files had more than
// ten readers.
const popularity = 1.1

// mix draws the jobs after the chapter's traces (§6.2), scaled: spans by a Zipf popularity (a few
// inputs read by many jobs), deadlines uniform in the range, and half the jobs' runs at the top of
// the period (many runs start together) while the rest spread over the stagger.
func mix(o Options) []jobSpec {
	rng := rand.New(rand.NewSource(o.Seed))
	z := rand.NewZipf(rng, popularity, 1, uint64(o.Spans-1))
	out := make([]jobSpec, o.Jobs)
	for j := range out {
		d := o.MinDeadline + time.Duration(rng.Int63n(int64(o.MaxDeadline-o.MinDeadline)+1))
		var off time.Duration
		if rng.Intn(2) == 1 {
			off = time.Duration(rng.Int63n(int64(o.Stagger) + 1)).Truncate(100 * time.Millisecond)
		}
		out[j] = jobSpec{name: fmt.Sprintf("job%02d", j), span: int(z.Uint64()), deadline: d.Truncate(100 * time.Millisecond), offset: off}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].offset < out[b].offset })
	return out
}

// loadAttempts bounds the tries of one batch of the load: a leader that steps down on a starved
// host (its quorum silent for an election timeout) leaves a batch unanswered, and the arm's
// cluster would be lost for one batch that an election later would take.
const loadAttempts = 5

// writeRetrying writes muts, again after a failure: the same keys with the same values, so a batch
// applied before its answer was lost is only written twice.
func writeRetrying(ctx context.Context, cl *client.Client, muts []*pb.Mutation) error {
	var err error
	for attempt := 0; attempt < loadAttempts; attempt++ {
		if err = cl.WriteMany(ctx, muts); err == nil || ctx.Err() != nil {
			return err
		}
		stopper.SleepContext(ctx, time.Second)
	}
	return fmt.Errorf("%d attempts: %w", loadAttempts, err)
}

// startCluster starts the arm's nodes with the strategy and its budgets.
func startCluster(ctx context.Context, dir string, o Options, strategy string) (*benchutil.Cluster, error) {
	cfg := benchutil.NodeConfig{}
	cfg.Jobs = jobs.Config{Tick: 100 * time.Millisecond, PlanSlot: 500 * time.Millisecond, PlanHorizon: 2 * o.Period,
		ReplanEvery: o.Period, DiskBytesPerSec: o.DiskRate, CacheBytes: o.CopyBytes, RateBytes: o.JobRate,
		Strategy: jobs.DemandReads}
	if strategy != NoJobs {
		cfg.Jobs.Strategy = jobs.Strategy(strategy)
	}
	cfg.HeartbeatInterval = time.Second
	// The TTL sweeper reads every range its node leads every 2 s: no row here expires, and on these
	// disks its reads would be most of what they do.
	cfg.Expiry.Off = true
	dev := emudisk.Options{NoPageCache: true, ReadBytesPerSec: o.DiskRate, WriteBytesPerSec: 64 << 20}
	return benchutil.StartCluster(ctx, dir, o.Nodes, benchutil.NodeSpec{CacheBytes: o.cacheBytes(), MemTableBytes: memTableBytes, Device: &dev, Config: cfg})
}

// pinned are the policies that would move the spans' leaders or reshape their ranges under the jobs'
// load (rebalance and shed_leadership move leaderships off a busy disk, merge and load_split change
// the ranges): every arm keeps the placement setUp makes, so the strategies are compared on it.
var pinned = []string{policy.NameRebalance, policy.NameShed, policy.NameMerge, policy.NameLoadSplit}

// setUp replicates the ranges, splits the spans apart with their leaders spread over the nodes, loads
// the rows and compacts them onto the emulated disks.
func setUp(ctx context.Context, c *benchutil.Cluster, cl *client.Client, o Options) error {
	if err := benchutil.WaitFor(ctx, time.Minute, func() bool { return benchutil.FullyReplicated(ctx, cl, min(3, o.Nodes)) }); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	for _, p := range pinned {
		if err := cl.SetPolicy(ctx, p, false); err != nil {
			return fmt.Errorf("switch %s off: %w", p, err)
		}
	}
	for s := 0; s < o.Spans; s++ {
		left, right, err := cl.Split(ctx, []byte(spanStart(s)))
		if err != nil {
			return fmt.Errorf("split at span %d: %w", s, err)
		}
		_ = left
		if err := cl.TransferLeader(ctx, right.RangeId, homeOf(s, o.Nodes)); err != nil {
			o.Progress(fmt.Sprintf("leader of span %d stays put: %v", s, err))
		}
	}
	val := make([]byte, o.ValueBytes)
	rng := rand.New(rand.NewSource(o.Seed))
	for s := 0; s < o.Spans; s++ {
		for i := 0; i < o.SpanRows; i += 200 {
			var muts []*pb.Mutation
			for k := i; k < min(o.SpanRows, i+200); k++ {
				rng.Read(val)
				muts = append(muts, &pb.Mutation{Key: rowKey(s, k), Value: append([]byte(nil), val...)})
			}
			if err := writeRetrying(ctx, cl, muts); err != nil {
				return fmt.Errorf("load span %d: %w", s, err)
			}
		}
	}
	for _, n := range c.Nodes() {
		if n == nil {
			continue
		}
		if err := n.Eng.CompactAll(ctx); err != nil {
			return fmt.Errorf("compact: %w", err)
		}
	}
	return nil
}

// placeLeaders transfers each span's leadership back to the node setUp placed it on where it has
// moved, and returns how many it moved back. Transfers that fail are left as they are: the report's
// counts of moved leaders say so.
func placeLeaders(ctx context.Context, cl *client.Client, o Options) (int, error) {
	leaders, _, err := spanLeaders(ctx, cl, o)
	if err != nil {
		return 0, err
	}
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return 0, fmt.Errorf("ranges: %w", err)
	}
	moved := 0
	for _, s := range misplaced(leaders, o.Nodes) {
		for _, r := range rs {
			if string(r.GetDesc().GetStartKey()) != spanStart(s) {
				continue
			}
			if err := cl.TransferLeader(ctx, r.GetDesc().GetRangeId(), homeOf(s, o.Nodes)); err != nil {
				o.Progress(fmt.Sprintf("leader of span %d not moved back: %v", s, err))
				continue
			}
			moved++
		}
	}
	return moved, nil
}

// misplaced lists the spans whose leader (0: unknown) is not node s mod nodes + 1.
func misplaced(leaders []uint64, nodes int) []int {
	var out []int
	for s, l := range leaders {
		if l != homeOf(s, nodes) {
			out = append(out, s)
		}
	}
	return out
}

// spanLeaders returns, per span, the node leading its range (0 if unknown), and how many spans are
// led elsewhere than setUp placed them.
func spanLeaders(ctx context.Context, cl *client.Client, o Options) ([]uint64, int, error) {
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("ranges: %w", err)
	}
	out := make([]uint64, o.Spans)
	for s := range out {
		for _, r := range rs {
			if string(r.GetDesc().GetStartKey()) == spanStart(s) {
				out[s] = r.LeaderNodeId
			}
		}
	}
	return out, len(misplaced(out, o.Nodes)), nil
}
