// Package readreplicas is the cluster experiment of read replicas where the reads are (Ghosh 2018,
// chapter 4, §4.5.2 "Comparison vs. Uniform"): on in-process nodes with emulated disks, one zipfian
// replica-read workload at one fixed rate, served once with the read_replicas policy placing learners
// by popularity and once with every range given the same number of learners, side by side; each arm
// reports the bytes its learners hold and the reads' latency. It owns nothing but its workload and
// its report: it acts on the cluster only through the client and the nodes' admin API, and asserts
// nothing.
package readreplicas

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/bench/scenario"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Options shapes the experiment. Zero fields take the defaults of withDefaults.
type Options struct {
	Nodes        int // default 5
	Ranges       int // user ranges the keys are split into; default 16
	KeysPerRange int // default 2000
	ValueBytes   int // default 1024
	// BlockRoomBytes is each node's block cache room for blocks: the cache is this plus the two
	// memtables Pebble charges to it (storage.Options.BlockRoomBytes). Default 512 KiB: the index
	// and filter blocks and a part of one range, against the about 19 MB of replicas a node holds,
	// so a hot range's reads reach the disk as a cold one's do.
	BlockRoomBytes int64
	// IOPS bounds each node's emulated disk (scenario.DefaultDevice otherwise): a node's service
	// capacity for reads that miss its cache. Default 250.
	IOPS int
	// Rate is the replica reads per second, the same in every arm; default 1000: at about 0.95 disk
	// operations a read (opsPerRead), 76 % of the five disks' operations, more than the three disks
	// under the hot set can serve (see Seed). At 1200 (91 %) a moved hot set's backlog drained at
	// the few per cent the disks had to spare, and no arm that had to react could recover.
	Rate    int
	Zipf    float64       // skew of the ranges' popularity (s > 1); default 2
	Settle  time.Duration // the most the policy gets to place its learners; default 90s
	Measure time.Duration // the measured window of each arm; default 20s
	Uniform []int         // learners per range of the uniform arms; default {0, 1, 2}
	// NoPopularity skips the read_replicas arm (the uniform arms alone).
	NoPopularity bool
	// Shift is how long each arm is followed after its hot set moves (the ranges' popularity ranks
	// rotate by half, so the hottest ranges become cold ones and cold ones hot); default 60s.
	Shift time.Duration
	// Seed orders the ranges' popularity (and the keys' values). Default 2380: its ranking puts the
	// three hottest ranges (86 % of the reads at zipf 2) on the same three voters, n1–n3, and after
	// the move the three hottest on n3–n5, as ranges split from one parent keep its nodes. Voters
	// alone can carry any reads the five disks can unless the ranges of some three nodes get more
	// than 3/5 of them (a flow bound: the routing may send every other read elsewhere). At zipf 1.1
	// with seed 1 no three nodes' ranges did, and learners only moved reads.
	Seed uint64
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
	def(&o.Ranges, 16)
	def(&o.KeysPerRange, 2000)
	def(&o.ValueBytes, 1024)
	def(&o.Rate, 1000)
	def(&o.IOPS, 250)
	if o.BlockRoomBytes <= 0 {
		o.BlockRoomBytes = 512 << 10
	}
	if o.Zipf <= 1 {
		o.Zipf = 2
	}
	if o.Settle <= 0 {
		o.Settle = 90 * time.Second
	}
	if o.Measure <= 0 {
		o.Measure = 20 * time.Second
	}
	if o.Shift <= 0 {
		o.Shift = 60 * time.Second
	}
	if len(o.Uniform) == 0 {
		o.Uniform = []int{0, 1, 2}
	}
	if o.Seed == 0 {
		o.Seed = 2380
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// opsPerRead is the emulated-disk operations a replica read costs at the default block room, as
// the cluster experiment measured it (0.95–1.0): what the default rate is sized by.
const opsPerRead = 0.95

// memTableBytes is each node's memtable size: small, so the data goes to tables on the emulated disk.
const memTableBytes = 1 << 20

// cacheBytes is each node's block cache: the room for blocks plus the two memtables.
func (o Options) cacheBytes() int64 { return storage.CacheBytesFor(o.BlockRoomBytes, memTableBytes) }

// Arm is one configuration's result.
type Arm struct {
	Name string `json:"name"` // "popularity" or "uniform-k"
	// Learners, LearnerBytes and LearnerLogicalBytes: the learners at the end of the measured window,
	// the bytes they hold on disk (each learner's engine's estimate of its range's span) and the keys
	// and values in them.
	Learners            int    `json:"learners"`
	LearnerBytes        uint64 `json:"learner_bytes"`
	LearnerLogicalBytes uint64 `json:"learner_logical_bytes"`
	// PerRange lists each range's learners, hottest range first.
	PerRange []int `json:"learners_per_range_hottest_first"`
	// Reads, ReadsPerSec, Errors: what the measured window served.
	Reads       int64   `json:"reads"`
	ReadsPerSec float64 `json:"reads_per_sec"`
	Errors      int64   `json:"errors"`
	// Latencies in milliseconds, each from the read's scheduled start (an open loop: a read that
	// waits for a worker counts its wait).
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
	SettleS float64 `json:"settle_s"` // how long the learners took to settle (popularity)
	// DataBytes sums every replica's bytes on disk (voters and learners) of the workload's ranges.
	DataBytes uint64 `json:"replica_bytes"`
	// NodeReads is each node's served reads per second in the measured window (every replica it
	// holds, leader or not), in node order: how evenly the routing spread the load.
	NodeReads []float64 `json:"node_reads_per_sec"`
	// NodeDiskOps is each node's emulated-disk read and write operations per second in the window
	// (its budget is Options.IOPS): what the node's reads cost its disk, and what else used it.
	NodeDiskOps [][2]float64 `json:"node_disk_ops_per_sec"`
	// NodeBlockRoomMB is each node's block cache room for blocks at the end of the window as its
	// engine measures it (the cache less the memtables charged to it), NodeHitRatio the share of its
	// block lookups in the window the cache served.
	NodeBlockRoomMB []float64 `json:"node_block_room_mb"`
	NodeHitRatio    []float64 `json:"node_block_hit_ratio"`
	// NodeLeaders is each node's leaderships of the workload's ranges at the end of the window
	// (placedVoters's, unless one moved).
	NodeLeaders []int `json:"node_leaders"`
	// After the hot set moved (at MovedAt): the reads' p99 over the Shift window, each 1-s window's
	// p99 (the reads completed in it, each timed from its scheduled start, so a backlog counts as
	// the wait it is), the seconds until p99 recovered (see recovery: the end of the last 1-s window
	// over twice the p99 before the move, 10 ms at least, whose 5-s span is over it too; 0: never
	// over; −1: still over at the end), and the learners at its end. ShiftNodeReads and ShiftNodeDiskOps are each node's
	// reads and disk operations per second over the window's last 10 s, ShiftLearnerReads each
	// learner's reads per second then ("r10@n2 150/s"): whether the reads went to the new learners.
	MovedAt        time.Time `json:"moved_at"`
	ShiftP99Ms     float64   `json:"shift_p99_ms"`
	ShiftWindowsMs []float64 `json:"shift_window_p99_ms"`
	RecoverS       float64   `json:"recover_s"`
	ShiftLearners  int       `json:"shift_learners"`
	ShiftLearnerMB float64   `json:"shift_learner_mb"`
	ShiftPerRange  []int     `json:"shift_learners_per_new_rank"`
	ShiftReadsPerS float64   `json:"shift_reads_per_sec"`
	ShiftErrors    int64     `json:"shift_errors"`
	// ShiftNodeReads, ShiftNodeDiskOps, ShiftLearnerReads: see MovedAt.
	ShiftNodeReads    []float64    `json:"shift_node_reads_per_sec"`
	ShiftNodeDiskOps  [][2]float64 `json:"shift_node_disk_ops_per_sec"`
	ShiftLearnerReads []string     `json:"shift_learner_reads"`
	// Decisions are read_replicas' decisions (popularity arm): time, operator, status and reason.
	Decisions []string `json:"decisions,omitempty"`
}

// Report is the experiment's result.
type Report struct {
	Options Options `json:"options"`
	// CacheBytes is each node's block cache: Options.BlockRoomBytes plus two memtables.
	CacheBytes int64 `json:"cache_bytes"`
	Arms       []Arm `json:"arms"`
}

// Run runs the popularity arm, then each uniform arm, each on a fresh cluster under dir.
func Run(ctx context.Context, dir string, o Options) (Report, error) {
	o = o.withDefaults()
	rep := Report{Options: o, CacheBytes: o.cacheBytes()}
	rep.Options.Progress = nil
	var arms []int
	if !o.NoPopularity {
		arms = append(arms, -1)
	}
	arms = append(arms, o.Uniform...)
	for i, k := range arms {
		a, err := runArm(ctx, filepath.Join(dir, fmt.Sprintf("arm%d", i)), o, k)
		if err != nil {
			return rep, fmt.Errorf("arm %s: %w", a.Name, err)
		}
		rep.Arms = append(rep.Arms, a)
	}
	return rep, nil
}

// rangeKey is key i of range r; range r starts at rangeStart(r).
func rangeKey(r, i int) []byte { return fmt.Appendf(nil, "rr/%03d/%06d", r, i) }
func rangeStart(r int) []byte  { return fmt.Appendf(nil, "rr/%03d/", r) }

// armName names the arm of uniform learners per range (< 0: the read_replicas policy).
func armName(uniform int) string {
	if uniform < 0 {
		return "popularity"
	}
	return fmt.Sprintf("uniform-%d", uniform)
}

// runArm starts a cluster, loads it and measures one arm: uniform < 0 is the read_replicas policy,
// else that many learners on every range.
func runArm(ctx context.Context, dir string, o Options, uniform int) (Arm, error) {
	a := Arm{Name: armName(uniform)}
	dev := scenario.DefaultDevice
	dev.IOPS = o.IOPS
	cfg := benchutil.NodeConfig{Autopilot: autopilot.Config{Policies: policy.Config{
		ReadReplicas: policy.ReadReplicasConfig{WarmUp: 3 * time.Second, MaxPerRound: 4}}}}
	spec := benchutil.NodeSpec{CacheBytes: o.cacheBytes(), MemTableBytes: memTableBytes, Device: &dev, Config: cfg}
	c, err := benchutil.StartCluster(ctx, dir, o.Nodes, spec)
	if err != nil {
		return a, err
	}
	defer c.Stop()
	cl, err := client.New(ctx, client.Config{Addrs: c.Addrs()})
	if err != nil {
		return a, err
	}
	defer cl.Close()
	if err := setUp(ctx, c, cl, o, a.Name, uniform); err != nil {
		return a, err
	}

	w := startWorkload(ctx, cl, o)
	defer w.stop()
	if uniform < 0 {
		if err := cl.SetPolicy(ctx, policy.NameReadReplicas, true); err != nil {
			return a, err
		}
		o.Progress(a.Name + ": read_replicas on, waiting for its learners to settle")
		settled, err := settle(ctx, cl, o.Settle)
		if err != nil {
			return a, err
		}
		a.SettleS = settled.Seconds()
	} else {
		time.Sleep(5 * time.Second) // clients refresh their descriptors and see the learners
	}
	w.rebase()
	w.take()
	o.Progress(fmt.Sprintf("%s: measuring %v at %d reads/s", a.Name, o.Measure, o.Rate))
	t0 := time.Now()
	before, devBefore, engBefore := nodeReads(c), deviceStats(c), benchutil.EngineStats(c)
	if err := stopper.SleepContext(ctx, o.Measure); err != nil {
		return a, err
	}
	h, errs := w.take()
	el := time.Since(t0).Seconds()
	a.fillNodes(c, before, devBefore, engBefore, el)
	a.Reads, a.Errors, a.ReadsPerSec = h.TotalCount(), errs, float64(h.TotalCount())/el
	a.P50Ms, a.P99Ms, a.MaxMs = float64(h.ValueAtQuantile(50))/1000, float64(h.ValueAtQuantile(99))/1000, float64(h.Max())/1000
	if err := a.fillLearners(ctx, c, cl, o, ranks(o)); err != nil {
		return a, err
	}
	if a.NodeLeaders, err = leadersPerNode(ctx, cl, o); err != nil {
		return a, err
	}
	o.Progress(fmt.Sprintf("%s: p99 %.1f ms, %d learners, node reads/s %v, disk ops/s %v, block room MB %v, hit ratio %v, leaders %v; moving the hot set",
		a.Name, a.P99Ms, a.Learners, a.NodeReads, a.NodeDiskOps, a.NodeBlockRoomMB, a.NodeHitRatio, a.NodeLeaders))
	if err := a.followShift(ctx, c, cl, w, o); err != nil {
		return a, err
	}
	w.stop()
	if uniform < 0 {
		_, raw, err := cl.Decisions(ctx)
		if err != nil {
			return a, err
		}
		var ds []decisions.Entry
		if err := json.Unmarshal(raw, &ds); err != nil {
			return a, fmt.Errorf("decisions: %w", err)
		}
		for _, d := range ds {
			if d.Policy == policy.NameReadReplicas {
				a.Decisions = append(a.Decisions, fmt.Sprintf("%s %s %s%s: %s", sinceMove(d.Time, a.MovedAt), d.Operator, d.Status, stepTimes(d.Steps), d.Reason))
			}
		}
	}
	return a, nil
}

// shiftWindow is the length of the windows the reads' p99 is followed in after the hot set moves.
const shiftWindow = time.Second

// shiftTail is the end of the shift window whose per-node and per-learner reads are reported: where
// the reads went once the learners came.
const shiftTail = 10 * time.Second

// recoverySpan is how many windows a window's excess must stand for to count (see recovery).
const recoverySpan = 5

// recovery is the windows after the move until the reads' p99 is back within limit (ms): the end
// of the last window over it (or with no read completed) whose span — it and the span−1 windows
// after it, or the last span windows at the end — is over it too. A single second's noise (a
// window's p99 is its ten slowest reads) does not count unless it moves the p99 of its span; a
// backlog does. 0: none over; −1: the last span is over (not back at the end).
func recovery(windows []*hdrhistogram.Histogram, limit float64, span int) float64 {
	n := len(windows)
	span = min(span, n)
	over := func(from, to int) bool { // the windows [from, to) merged
		h := report.NewHist()
		for _, w := range windows[from:to] {
			if w.TotalCount() == 0 {
				return true
			}
			h.Merge(w)
		}
		return float64(h.ValueAtQuantile(99))/1000 > limit
	}
	if n == 0 || over(n-span, n) {
		return -1
	}
	for i := n - 1; i >= 0; i-- {
		from := min(i, n-span)
		if over(i, i+1) && over(from, from+span) {
			return float64(i + 1)
		}
	}
	return 0
}

// followShift moves the hot set (shifted ranks) and follows the reads' p99 in 1-s windows for
// o.Shift: how long until it recovers, where the reads went over its last 10 s, and the learners at
// the end.
func (a *Arm) followShift(ctx context.Context, c *benchutil.Cluster, cl *client.Client, w *workload, o Options) error {
	moved := shiftedRanks(o)
	w.perm.Store(&moved)
	w.take()
	a.MovedAt = time.Now()
	all := report.NewHist()
	var errs int64
	limit := max(2*a.P99Ms, 10)
	n := max(int(o.Shift/shiftWindow), 1)
	tail := max(n-int(shiftTail/shiftWindow), 0)
	var before []map[uint64]uint64
	var devBefore []emudisk.Stats
	var tailAt time.Time
	windows := make([]*hdrhistogram.Histogram, 0, n)
	for i := range n {
		if i == tail {
			before, devBefore, tailAt = nodeReads(c), deviceStats(c), time.Now()
		}
		if err := stopper.SleepContext(ctx, time.Until(a.MovedAt.Add(time.Duration(i+1)*shiftWindow))); err != nil {
			return err
		}
		h, e := w.take()
		errs += e
		all.Merge(h)
		windows = append(windows, h)
		a.ShiftWindowsMs = append(a.ShiftWindowsMs, float64(h.ValueAtQuantile(99))/1000)
	}
	a.RecoverS = recovery(windows, limit, recoverySpan) * shiftWindow.Seconds()
	el := time.Since(a.MovedAt).Seconds()
	a.ShiftP99Ms, a.ShiftErrors, a.ShiftReadsPerS = float64(all.ValueAtQuantile(99))/1000, errs, float64(all.TotalCount())/el
	a.fillShiftTail(c, before, devBefore, time.Since(tailAt).Seconds())
	after := Arm{}
	if err := after.fillLearners(ctx, c, cl, o, moved); err != nil {
		return err
	}
	a.ShiftLearners, a.ShiftPerRange = after.Learners, after.PerRange
	a.ShiftLearnerMB = math.Round(float64(after.LearnerBytes)/1e4) / 100
	o.Progress(fmt.Sprintf("%s: after the move p99 %.1f ms, recovered after %.0f s, %d learners %v, last %v: node reads/s %v, disk ops/s %v, learners' reads/s %v",
		a.Name, a.ShiftP99Ms, a.RecoverS, a.ShiftLearners, a.ShiftPerRange, shiftTail, a.ShiftNodeReads, a.ShiftNodeDiskOps, a.ShiftLearnerReads))
	return nil
}

// fillShiftTail sets each node's reads and disk operations per second, and each learner's reads, over
// the el seconds since the samples before (the shift window's tail).
func (a *Arm) fillShiftTail(c *benchutil.Cluster, before []map[uint64]uint64, devBefore []emudisk.Stats, el float64) {
	if before == nil || el <= 0 {
		return
	}
	tailArm := Arm{}
	tailArm.fillNodes(c, before, devBefore, benchutil.EngineStats(c), el)
	a.ShiftNodeReads, a.ShiftNodeDiskOps = tailArm.NodeReads, tailArm.NodeDiskOps
	for i, nd := range c.Nodes() {
		if nd == nil {
			continue
		}
		id := nd.KV.NodeID()
		for _, r := range nd.KV.Store().Replicas() {
			d := r.Desc()
			if r.IsMeta() || d == nil || !slices.Contains(learnerNodes(d), id) {
				continue
			}
			got := readsSince(map[uint64]uint64{r.RangeID(): before[i][r.RangeID()]}, map[uint64]uint64{r.RangeID(): r.Reads.Load()})
			a.ShiftLearnerReads = append(a.ShiftLearnerReads, fmt.Sprintf("r%d@n%d %.0f/s", r.RangeID(), id, float64(got)/el))
		}
	}
	sort.Strings(a.ShiftLearnerReads)
}

// stepTimes is how long each of a decision's steps took (" [add-learner n2 4.1s]"): where a
// learner's time went.
func stepTimes(steps []decisions.StepTiming) string {
	if len(steps) == 0 {
		return ""
	}
	var parts []string
	for _, st := range steps {
		parts = append(parts, fmt.Sprintf("%s %.1fs", st.Step, st.TookS))
	}
	return " [" + strings.Join(parts, ", ") + "]"
}

// sinceMove is a decision's time as seconds since the hot set moved ("+4.2s", "-30.1s").
func sinceMove(at time.Time, moved time.Time) string {
	if moved.IsZero() {
		return at.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%+.1fs", at.Sub(moved).Seconds())
}

// nodeReads is, per node, each of its replicas' reads served so far.
func nodeReads(c *benchutil.Cluster) []map[uint64]uint64 {
	var out []map[uint64]uint64
	for _, n := range c.Nodes() {
		m := map[uint64]uint64{}
		if n != nil {
			for _, r := range n.KV.Store().Replicas() {
				m[r.RangeID()] = r.Reads.Load()
			}
		}
		out = append(out, m)
	}
	return out
}

// deviceStats is each node's emulated-disk counters.
func deviceStats(c *benchutil.Cluster) []emudisk.Stats {
	var out []emudisk.Stats
	for _, n := range c.Nodes() {
		var st emudisk.Stats
		if n != nil {
			st = n.Eng.DeviceStats()
		}
		out = append(out, st)
	}
	return out
}

// fillNodes sets each node's reads, disk operations and block cache figures over the el seconds
// since the samples before.
func (a *Arm) fillNodes(c *benchutil.Cluster, before []map[uint64]uint64, devBefore []emudisk.Stats, engBefore []storage.Stats, el float64) {
	for i, n := range nodeReads(c) {
		a.NodeReads = append(a.NodeReads, math.Round(float64(readsSince(before[i], n))/el))
	}
	for i, st := range deviceStats(c) {
		b := devBefore[i]
		a.NodeDiskOps = append(a.NodeDiskOps, [2]float64{math.Round(float64(st.ReadOps-b.ReadOps) / el), math.Round(float64(st.WriteOps-b.WriteOps) / el)})
	}
	a.NodeBlockRoomMB, a.NodeHitRatio = benchutil.BlockCacheFigures(engBefore, benchutil.EngineStats(c))
}

// readsSince sums a node's reads since before: a replica that came since (a new learner) counts
// from zero.
func readsSince(before, now map[uint64]uint64) uint64 {
	var sum uint64
	for id, n := range now {
		if b := before[id]; n >= b {
			sum += n - b
		} else {
			sum += n
		}
	}
	return sum
}

// setUp readies a started cluster for an arm: the placement held still, the workload's ranges split
// and loaded, the uniform learners added (uniform ≥ 0), everything compacted, the disks throttled.
func setUp(ctx context.Context, c *benchutil.Cluster, cl *client.Client, o Options, name string, uniform int) error {
	o.Progress(name + ": waiting for 3 voters on every range")
	if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, cl, 3) }); err != nil {
		return fmt.Errorf("3 voters on every range: %w", err)
	}
	// Nothing but the arm's learners may change the placement while it is measured.
	for _, p := range []string{policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit, policy.NameShed, policy.NameHotspot} {
		if err := cl.SetPolicy(ctx, p, false); err != nil {
			return fmt.Errorf("switch %s off: %w", p, err)
		}
	}
	for r := 0; r < o.Ranges; r++ {
		if _, _, err := cl.Split(ctx, rangeStart(r)); err != nil {
			return fmt.Errorf("split at %q: %w", rangeStart(r), err)
		}
	}
	if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, cl, 3) }); err != nil {
		return fmt.Errorf("3 voters on every range after the splits: %w", err)
	}
	o.Progress(name + ": spreading the voters and leaders over every node")
	// replicate would remove the learners the moves add before promoting them.
	if err := cl.SetPolicy(ctx, policy.NameReplicate, false); err != nil {
		return fmt.Errorf("switch replicate off: %w", err)
	}
	if err := place(ctx, c, cl, o); err != nil {
		return err
	}
	if uniform < 0 {
		// As in a cluster left to itself: replicate leaves the learners read_replicas keeps.
		if err := cl.SetPolicy(ctx, policy.NameReplicate, true); err != nil {
			return fmt.Errorf("switch replicate on: %w", err)
		}
	}
	// The load, its compactions and the uniform learners' snapshots are set-up, not measurement:
	// on a disk of a few hundred IOPS they would take most of a run.
	unthrottled(c, true)
	o.Progress(fmt.Sprintf("%s: loading %d ranges of %d keys", name, o.Ranges, o.KeysPerRange))
	if _, err := (benchutil.Load{Records: o.Ranges * o.KeysPerRange, Batch: 100, Writers: 4,
		Key:    func(i int) []byte { return rangeKey(i/o.KeysPerRange, i%o.KeysPerRange) },
		Values: benchutil.RandomValues(o.ValueBytes, o.Seed)}).Run(ctx, cl); err != nil {
		return err
	}
	if uniform >= 0 {
		// replicate (off) would remove learners no read_replicas keeps.
		if err := addUniform(ctx, c, cl, o, uniform); err != nil {
			return err
		}
		if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return caughtUp(c) }); err != nil {
			return fmt.Errorf("learners catching up: %w", err)
		}
	}
	for _, n := range c.Nodes() {
		if err := n.Eng.CompactAll(ctx); err != nil {
			return err
		}
	}
	unthrottled(c, false)
	// A leadership lost while loading or compacting goes back.
	return placeLeaders(ctx, cl, o)
}

// caughtUp reports whether every replica of every user range exists and has applied as far as its
// leader.
func caughtUp(c *benchutil.Cluster) bool {
	applied := map[uint64][]uint64{} // range → applied index of each local replica
	leader := map[uint64]replica.Status{}
	for _, n := range c.Nodes() {
		for _, r := range n.KV.Store().Replicas() {
			if r.IsMeta() {
				continue
			}
			st := r.Status()
			id := r.Desc().GetRangeId()
			applied[id] = append(applied[id], st.Applied)
			if st.IsLeader {
				leader[id] = st
			}
		}
	}
	for id, a := range applied {
		l, ok := leader[id]
		if !ok || len(a) < len(l.Desc.GetReplicas()) || slices.Min(a) < l.Applied {
			return false
		}
	}
	return true
}

// unthrottled lifts (true) or restores every node's emulated-disk budget.
func unthrottled(c *benchutil.Cluster, on bool) {
	for _, n := range c.Nodes() {
		n.Eng.SetDeviceUnthrottled(on)
	}
}

// addUniform gives each of the workload's ranges k learners, on the nodes without its replicas that
// hold the fewest learners so far.
func addUniform(ctx context.Context, c *benchutil.Cluster, cl *client.Client, o Options, k int) error {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return err
	}
	held := map[uint64]int{}
	for _, r := range rs {
		d := r.GetDesc()
		if !slices.ContainsFunc(ranks(o), func(rg int) bool { return string(rangeStart(rg)) == string(d.GetStartKey()) }) {
			continue
		}
		for range k {
			var best uint64
			for i := range c.Len() {
				id := uint64(i + 1)
				if hasReplica(d, id) {
					continue
				}
				if best == 0 || held[id] < held[best] {
					best = id
				}
			}
			if best == 0 {
				return fmt.Errorf("r%d: no node left for a learner (%d nodes)", d.GetRangeId(), c.Len())
			}
			resp, err := c.Node(0).KV.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: d.GetRangeId(), AddNodeId: best, Step: pb.RelocateStep_RELOCATE_ADD_LEARNER})
			if err == nil && resp.GetError() != nil {
				err = fmt.Errorf("%s", resp.GetError().GetMessage())
			}
			if err != nil {
				return fmt.Errorf("add a learner of r%d on n%d: %w", d.GetRangeId(), best, err)
			}
			held[best]++
			d = resp.GetRange()
			if d == nil {
				return fmt.Errorf("add a learner of r%d on n%d: no descriptor returned", r.GetDesc().GetRangeId(), best)
			}
		}
	}
	return nil
}

func hasReplica(d *pb.RangeDescriptor, node uint64) bool {
	for _, r := range d.GetReplicas() {
		if r.GetNodeId() == node {
			return true
		}
	}
	return false
}

// settleFor is how long the learners must stay the same to count as settled: four of the policy's
// rounds of 5 s.
const settleFor = 20 * time.Second

// settle waits until the cluster's learners stay the same for settleFor, at most max; it returns
// how long it waited.
func settle(ctx context.Context, cl *client.Client, max time.Duration) (time.Duration, error) {
	t0 := time.Now()
	last, since := "", time.Now()
	for time.Since(t0) < max {
		rs, err := cl.UserRanges(ctx)
		if err != nil {
			return 0, err
		}
		now := fmt.Sprint(learnerSets(rs))
		if now != last {
			last, since = now, time.Now()
		} else if time.Since(since) >= settleFor && now != "[]" {
			return since.Sub(t0), nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return time.Since(t0), nil
}

func learnerSets(rs []*pb.RangeStatus) []string {
	var out []string
	for _, r := range rs {
		for _, n := range learnerNodes(r.GetDesc()) {
			out = append(out, fmt.Sprintf("r%d@n%d", r.GetDesc().GetRangeId(), n))
		}
	}
	sort.Strings(out)
	return out
}

// fillLearners counts the learners of the workload's ranges and the bytes they hold: on each
// learner's disk (its engine's estimate of the range's span) and as keys and values.
func (a *Arm) fillLearners(ctx context.Context, c *benchutil.Cluster, cl *client.Client, o Options, perm []int) error {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return err
	}
	rank := map[string]int{}
	for i, rg := range perm {
		rank[string(rangeStart(rg))] = i
	}
	a.PerRange = make([]int, o.Ranges)
	for _, r := range rs {
		if i, ok := rank[string(r.GetDesc().GetStartKey())]; ok {
			a.PerRange[i] = len(learnerNodes(r.GetDesc()))
			a.Learners += a.PerRange[i]
		}
	}
	for _, n := range c.Nodes() {
		if n == nil {
			continue
		}
		id := n.KV.NodeID()
		for _, r := range n.KV.Store().Replicas() {
			d := r.Desc()
			if r.IsMeta() || d == nil {
				continue
			}
			if _, ok := rank[string(d.GetStartKey())]; !ok {
				continue
			}
			b := r.ApproximateBytes()
			a.DataBytes += b
			if slices.Contains(learnerNodes(d), id) {
				a.LearnerBytes += b
			}
		}
	}
	a.LearnerLogicalBytes = uint64(a.Learners) * uint64(o.KeysPerRange) * uint64(len(rangeKey(0, 0))+o.ValueBytes)
	return nil
}

// learnerNodes lists the nodes of d's learners.
func learnerNodes(d *pb.RangeDescriptor) []uint64 {
	var out []uint64
	for _, rd := range d.GetReplicas() {
		if rd.GetLearner() {
			out = append(out, rd.GetNodeId())
		}
	}
	return out
}

// ranks maps each popularity rank (0: hottest) to its range: shuffled by the seed, so that the hot
// ranges are not neighbours.
func ranks(o Options) []int {
	return rand.New(rand.NewPCG(o.Seed, 7)).Perm(o.Ranges)
}

// shiftedRanks is ranks rotated by half: the hot set moved to ranges that were cold.
func shiftedRanks(o Options) []int {
	r := ranks(o)
	h := len(r) / 2
	return append(slices.Clone(r[h:]), r[:h]...)
}

// workload issues o.Rate replica reads a second, zipfian over the ranges by rank and uniform over a
// range's keys, from workers on a fixed schedule.
type workload struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// rebased is when the schedule last started again (unix nanoseconds): reads a worker is behind
	// on are dropped, so that a backlog from before (an overloaded warm-up) does not count.
	rebased atomic.Int64
	perm    atomic.Pointer[[]int] // popularity rank → range
	mu      sync.Mutex
	hist    *hdrhistogram.Histogram
	errs    int64
}

const workers = 64

func startWorkload(ctx context.Context, cl *client.Client, o Options) *workload {
	w := &workload{hist: report.NewHist()}
	ctx, w.cancel = context.WithCancel(ctx)
	perm := ranks(o)
	w.perm.Store(&perm)
	interval := time.Duration(float64(time.Second) * workers / float64(o.Rate))
	w.rebased.Store(time.Now().UnixNano())
	for k := range workers {
		w.wg.Go(func() {
			rng := rand.New(rand.NewPCG(o.Seed, uint64(k)+100))
			zipf := rand.NewZipf(rng, o.Zipf, 1, uint64(o.Ranges-1))
			var seen int64
			var next time.Time
			for {
				if r := w.rebased.Load(); r != seen {
					seen, next = r, time.Unix(0, r).Add(interval*time.Duration(k)/workers)
				}
				if d := time.Until(next); d > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				if ctx.Err() != nil {
					return
				}
				key := rangeKey((*w.perm.Load())[zipf.Uint64()], rng.IntN(o.KeysPerRange))
				_, _, err := cl.Get(ctx, key, client.ReplicaRead())
				lat := time.Since(next)
				if ctx.Err() != nil {
					return
				}
				if w.rebased.Load() == seen { // scheduled before a rebase: not this window's
					w.record(lat, err)
				}
				next = next.Add(interval)
			}
		})
	}
	return w
}

func (w *workload) record(lat time.Duration, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs++
		return
	}
	_ = w.hist.RecordValue(report.ClampUs(lat))
}

// rebase starts the schedule again now (see workload.rebased).
func (w *workload) rebase() { w.rebased.Store(time.Now().UnixNano()) }

// take returns the latencies and errors since the last take.
func (w *workload) take() (*hdrhistogram.Histogram, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, e := w.hist, w.errs
	w.hist, w.errs = report.NewHist(), 0
	return h, e
}

func (w *workload) stop() {
	w.cancel()
	w.wg.Wait()
}
