package scanjobs

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node/jobs"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/prefetch"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// runArm measures one strategy on a fresh cluster.
func runArm(ctx context.Context, dir string, o Options, strategy string) (Arm, error) {
	a := Arm{Strategy: strategy}
	o.Progress(strategy + ": starting the cluster")
	c, err := startCluster(ctx, dir, o, strategy)
	if err != nil {
		return a, err
	}
	defer c.Stop()
	cl, err := client.New(ctx, client.Config{Addrs: c.Addrs()})
	if err != nil {
		return a, err
	}
	defer cl.Close()
	if err := setUp(ctx, c, cl, o); err != nil {
		return a, err
	}
	// The load and the compaction starve the host for seconds, and leaders it cannot keep are elected
	// elsewhere: each arm starts from the same placement.
	if a.LeadersReplaced, err = placeLeaders(ctx, cl, o); err != nil {
		return a, err
	}
	o.Progress(strategy + ": loaded; foreground on")
	fg := startForeground(ctx, cl, o)
	defer fg.stop()
	time.Sleep(3 * time.Second)
	added := time.Now()
	if strategy != NoJobs {
		if err := addJobs(ctx, cl, o); err != nil {
			return a, err
		}
	}
	// The first runs are due as the jobs are added, before any plan could read ahead, and under a
	// heavy mix their reads on demand reach into the next period: the window starts two periods later.
	stopper.SleepContext(ctx, time.Until(added.Add(2*o.Period)))
	if _, a.LeadersMovedBefore, err = spanLeaders(ctx, cl, o); err != nil {
		return a, err
	}
	from := time.Now()
	fg.reset()
	until, err := a.measureWindow(ctx, c, cl, o, fg, from)
	if err != nil {
		return a, err
	}
	if strategy == NoJobs {
		return a, nil
	}
	stopper.SleepContext(ctx, o.MaxDeadline+time.Second) // the window's last runs finish
	if err := a.countRuns(ctx, cl, from, until); err != nil {
		return a, err
	}
	var plans []jobs.PlanRecord
	for _, n := range c.Nodes() {
		if n == nil {
			continue
		}
		st := n.KV.Metrics().Jobs
		a.CopyBytes += st.CacheBytes
		a.PrefetchBytes += st.PrefetchBytes
		plans = append(plans, st.Plans...)
	}
	a.checkPlans(plans, from, until)
	return a, nil
}

// measureWindow samples the disks, the engines and the host from from until the window's end and
// fills in the arm's figures; it returns when the window ended.
func (a *Arm) measureWindow(ctx context.Context, c *benchutil.Cluster, cl *client.Client, o Options, fg *foreground, from time.Time) (time.Time, error) {
	stopProfiles, err := startProfiles(o.ProfileDir, a.Strategy, o.Progress)
	if err != nil {
		return time.Time{}, err
	}
	engBefore, cpuBefore, gcBefore, hostBefore := benchutil.EngineStats(c), benchutil.ProcessCPU(), goRuntime(), hostBusy()
	shortBefore, devBefore := copiesShort(c), c.TotalDeviceStats()
	dk := sampleDisks(ctx, c, from.Add(o.Measure))
	a.deviceWaits(devBefore, c.TotalDeviceStats())
	until := time.Now()
	secs := until.Sub(from).Seconds()
	own := (benchutil.ProcessCPU() - cpuBefore).Seconds()
	a.CPUSeconds = own / secs
	if host := hostBusy() - hostBefore; hostBefore > 0 {
		a.OtherCPUSeconds = max(0, host-own) / secs
	}
	gcAfter := goRuntime()
	stopProfiles()
	a.GCCPUSeconds, a.HeapLiveMB = (gcAfter.gcCPU()-gcBefore.gcCPU())/secs, gcAfter.liveMB()
	a.Runtime = runtimeBetween(gcBefore, gcAfter, secs)
	engAfter := benchutil.EngineStats(c)
	for why, n := range copiesShort(c) {
		if n > shortBefore[why] {
			if a.CopiesShort == nil {
				a.CopiesShort = map[string]uint64{}
			}
			a.CopiesShort[why] = n - shortBefore[why]
		}
	}
	a.NodeBlockRoomMB, a.NodeHitRatio = benchutil.BlockCacheFigures(engBefore, engAfter)
	for i := range engAfter {
		a.ServedBlockBytes += engAfter[i].ServedBlockBytes - engBefore[i].ServedBlockBytes
		a.ServedInCacheBytes += engAfter[i].ServedBlockBytesInCache - engBefore[i].ServedBlockBytesInCache
		a.JobBlockBytes += engAfter[i].JobBlockBytes - engBefore[i].JobBlockBytes
		a.JobInCacheBytes += engAfter[i].JobBlockBytesInCache - engBefore[i].JobBlockBytesInCache
	}
	a.Ops, a.Errors, a.P50Ms, a.P99Ms = fg.take()
	a.fgHitRatio()
	a.PeriodP99Ms = fg.partP99()
	a.PeakReadBytesPerSec, a.MeanReadBytesPerSec, a.ReadBytes = dk.peak, dk.mean, dk.total
	a.PeakNode, a.PeakSecond, a.Top5, a.Top = dk.node+1, dk.second, dk.top5(), dk.top()
	if p := peakLessOther(dk.seconds); p.Node > 0 {
		a.PeakLessOther, a.PeakLessOtherNode, a.PeakLessOtherSecond = p.Disk-p.Other, p.Node, p.Second
	}
	a.Seconds = dk.seconds
	a.Compactions = compactions(c, from, until)
	if a.SpanLeaders, a.LeadersMoved, err = spanLeaders(ctx, cl, o); err != nil {
		return until, err
	}
	for _, s := range dk.seconds {
		a.JobsPeak = max(a.JobsPeak, s.Prefetch+s.Runs)
	}
	return until, nil
}

// deviceWaits sets the arm's idle-class operations and the mean waits of both classes between two
// readings of the devices' counters.
func (a *Arm) deviceWaits(before, after emudisk.Stats) {
	a.IdleOps = after.IdleOps - before.IdleOps
	a.IdleWaitMaxMs = float64(after.IdleWaitMax) / 1e6
	if a.IdleOps > 0 {
		a.IdleWaitMs = float64(after.IdleWait-before.IdleWait) / float64(a.IdleOps) / 1e6
	}
	ops := after.ReadOps + after.WriteOps - before.ReadOps - before.WriteOps - a.IdleOps
	if ops > 0 {
		a.FgWaitMs = float64(after.Throttled-before.Throttled) / float64(ops) / 1e6
	}
	if n := after.TimedReads - before.TimedReads; n > 0 {
		a.HostReadUs = float64(after.ReadTime-before.ReadTime) / float64(n) / 1e3
	}
	a.IdleWindowFills = after.IdleWindowFills - before.IdleWindowFills
}

// copiesShort sums the nodes' counts of copies cut short and of runs that read from disk what their
// plan served from a copy, by why.
func copiesShort(c *benchutil.Cluster) map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range c.Nodes() {
		if n == nil {
			continue
		}
		for why, k := range n.KV.ScanJobs().Counters().CopiesShort {
			out[why] += k
		}
	}
	return out
}

// hostBusy is the CPU time (seconds) every process on the host has used, from /proc/stat's first
// line (user, nice, system, irq, softirq and steal, in the kernel's 100 ticks a second); 0 where it
// cannot be read.
func hostBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0
		}
		busy += v
	}
	return busy / 100
}

// PlanCheck is one plan made in the window: when (seconds into it), its peak and its LP bound
// (bytes/s), and their ratio.
type PlanCheck struct {
	Second float64 `json:"second"`
	Peak   float64 `json:"peak"`
	Bound  float64 `json:"bound"`
	Ratio  float64 `json:"ratio"`
}

// checkPlans sets the plans made in [from, until] beside the slot-by-slot LP bound for the runs each
// admits (computed here, after the window, as it takes about a second a plan).
func (a *Arm) checkPlans(plans []jobs.PlanRecord, from, until time.Time) {
	var ratios []float64
	for _, p := range plans {
		if p.Made.Before(from) || p.Made.After(until) || p.Instance == nil {
			continue
		}
		b, err := prefetch.LowerBound(p.Instance, prefetch.Options{BoundRows: 1000}, p.Admitted)
		if err != nil || b <= 0 {
			continue // nothing admitted, or nothing to read
		}
		pc := PlanCheck{Second: p.Made.Sub(from).Seconds(), Peak: p.Peak, Bound: b, Ratio: p.Peak / b}
		a.Plans = append(a.Plans, pc)
		ratios = append(ratios, pc.Ratio)
		if a.WorstPlan == nil || pc.Ratio > a.PlanPeak/a.PlanBound {
			a.PlanPeak, a.PlanBound, a.WorstPlan = pc.Peak, pc.Bound, &p
		}
	}
	if len(ratios) == 0 {
		return
	}
	sort.Float64s(ratios)
	a.PlanRatio, a.PlanRatioRange = ratios[len(ratios)/2], [2]float64{ratios[0], ratios[len(ratios)-1]}
}

// addJobs adds the mix's jobs, each at its offset.
func addJobs(ctx context.Context, cl *client.Client, o Options) error {
	t0 := time.Now()
	for _, j := range mix(o) {
		stopper.SleepContext(ctx, time.Until(t0.Add(j.offset)))
		job := &pb.ScanJob{Name: j.name, Start: []byte(spanStart(j.span)), End: []byte(spanEnd(j.span)),
			EveryMs: o.Period.Milliseconds(), DeadlineMs: j.deadline.Milliseconds(), Count: true}
		if _, _, err := cl.AddJob(ctx, job); err != nil {
			return fmt.Errorf("add %s: %w", j.name, err)
		}
	}
	return nil
}

// countRuns counts the runs due in [from, until − their deadline] from the jobs' states: those run,
// those refused (due times passed with no run, recorded as refused) and skipped.
func (a *Arm) countRuns(ctx context.Context, cl *client.Client, from, until time.Time) error {
	states, err := cl.Jobs(ctx, "")
	if err != nil {
		return fmt.Errorf("job states: %w", err)
	}
	for _, st := range states {
		deadline := time.Duration(st.Job.DeadlineMs) * time.Millisecond
		every := time.Duration(st.Job.EveryMs) * time.Millisecond
		created := time.UnixMilli(st.Job.CreatedUnixMs)
		inWindow := func(due time.Time) bool { return !due.Before(from) && !due.Add(deadline).After(until) }
		due := map[int64]*pb.JobRun{}
		for _, r := range st.Last {
			due[r.DueUnixMs] = r
			a.Runs = append(a.Runs, RunRecord{Job: st.Job.Name, Due: at(from, r.DueUnixMs), Started: at(from, r.StartedUnixMs),
				Finished: at(from, r.FinishedUnixMs), Bytes: r.Bytes, CopyBytes: r.CacheBytes, OnTime: r.OnTime})
		}
		all := true
		for d := created; d.Before(until); d = d.Add(every) {
			if !inWindow(d) {
				continue
			}
			a.RunsDue++
			r := due[d.UnixMilli()]
			switch {
			case r == nil && st.Admission != "" && st.Admission != "admitted":
				a.RunsRefused++
			case r == nil:
				a.RunsSkipped++
			case r.Error != "":
				a.RunsFailed++
			case r.OnTime:
				a.RunsOnTime++
				a.countCopy(r)
				continue
			default:
				a.RunsLate++
				a.countCopy(r)
			}
			all = false
		}
		if all {
			a.JobsOnTime++
		}
		if st.Admission != "" && st.Admission != "admitted" {
			a.Refused = append(a.Refused, st.Job.Name+": "+st.Admission)
		}
	}
	sort.Strings(a.Refused)
	return nil
}

// at is the seconds from from to a time in Unix milliseconds.
func at(from time.Time, ms int64) float64 { return time.UnixMilli(ms).Sub(from).Seconds() }

func (a *Arm) countCopy(r *pb.JobRun) {
	switch {
	case r.CacheBytes > 0 && r.CacheBytes == r.Bytes:
		a.RunsFromCopy++
	case r.CacheBytes > 0:
		a.RunsPartCopy++
	}
}

// Compaction is one compaction a node's engine ran in the window (times in seconds from its start):
// its reads are the disk's "other" reads.
type Compaction struct {
	Node       int     `json:"node"`
	Begin      float64 `json:"begin"`
	End        float64 `json:"end"`
	Reason     string  `json:"reason"`
	From       int     `json:"from_level"`
	To         int     `json:"to_level"`
	InputBytes uint64  `json:"input_bytes"`
}

// compactions lists the compactions every node ran in [from, until].
func compactions(c *benchutil.Cluster, from, until time.Time) []Compaction {
	var out []Compaction
	for i, n := range c.Nodes() {
		if n == nil {
			continue
		}
		for _, r := range n.Eng.CompactionsSince(from) {
			if r.Begin.After(until) {
				continue
			}
			out = append(out, Compaction{Node: i + 1, Begin: r.Begin.Sub(from).Seconds(), End: r.End.Sub(from).Seconds(),
				Reason: r.Reason, From: r.FromLevel, To: r.ToLevel, InputBytes: r.InputBytes})
		}
	}
	return out
}

// diskSample is the disks' reads over the window.
type diskSample struct {
	peak, mean   float64
	node, second int
	total        int64
	seconds      []Second // every node's every second
}

// Second is one node's disk reads in one second of the window, by who read (bytes/s). Disk is what
// the emulated device read; Served the blocks the node's reads (the foreground's and the jobs') loaded
// from it, JobBlocks their part the jobs' reads loaded, Other the rest (compactions, flushes' reads, snapshots streamed out); Prefetch and Runs the
// bytes of keys and values the jobs' prefetches and runs read from its disk under a plan (blocks
// carry 1.1–1.7× these), DemandRuns those the runs of every node read without a plan (not split by
// node).
type Second struct {
	Node       int     `json:"node"`
	Second     int     `json:"second"`
	Disk       float64 `json:"disk"`
	Served     float64 `json:"served"`
	JobBlocks  float64 `json:"job_blocks"`
	Other      float64 `json:"other"`
	Prefetch   float64 `json:"prefetch"`
	Runs       float64 `json:"runs"`
	DemandRuns float64 `json:"demand_runs"`
}

// peakLessOther is the node-second whose disk read the most less its Other (compactions' reads);
// zero without any.
func peakLessOther(seconds []Second) Second {
	var best Second
	for _, s := range seconds {
		if best.Node == 0 || s.Disk-s.Other > best.Disk-best.Other {
			best = s
		}
	}
	return best
}

// top are the five highest node-seconds.
func (d diskSample) top() []Second {
	s := append([]Second(nil), d.seconds...)
	sort.SliceStable(s, func(a, b int) bool { return s[a].Disk > s[b].Disk })
	return s[:min(5, len(s))]
}

func (d diskSample) top5() []float64 {
	var out []float64
	for _, s := range d.top() {
		out = append(out, s.Disk)
	}
	return out
}

// diskMark is one reading of a node's counters.
type diskMark struct {
	disk, served, stream int64
	jobBlocks            int64 // of served, the jobs' reads'
	prefetch, runs       int64
	demand               int64 // every node's runs' disk bytes without a plan (same in every mark)
}

// readMarks reads every node's device and engine counters and the jobs' reads of its disk.
func readMarks(c *benchutil.Cluster) []diskMark {
	out := make([]diskMark, c.Len())
	var demand int64
	for i := range out {
		out[i].disk = c.DeviceStats(i).ReadBytes
		n := c.Node(i)
		if n == nil {
			continue
		}
		es := n.Eng.Stats()
		out[i].served = int64(es.ServedBlockBytes - es.ServedBlockBytesInCache)
		out[i].stream = int64(es.StreamBlockBytes)
		out[i].jobBlocks = int64(es.JobBlockBytes - es.JobBlockBytesInCache)
		// Counters, not Metrics: the jobs' Stats computes the current plan's LP bound when first
		// asked for, CPU the sampler would add in the measured window.
		js := n.KV.ScanJobs().Counters()
		var planned int64
		for id, r := range js.DiskReads {
			if j := c.IndexOf(id); j >= 0 && j < len(out) {
				out[j].prefetch += int64(r.Prefetch)
				out[j].runs += int64(r.Run)
			}
			planned += int64(r.Run)
		}
		demand += int64(js.Bytes-js.CacheBytes) - planned
	}
	for i := range out {
		out[i].demand = demand
	}
	return out
}

// sampleDisks reads every node's emulated-disk counters, and who read, each second until end.
func sampleDisks(ctx context.Context, c *benchutil.Cluster, end time.Time) diskSample {
	var ds diskSample
	first := readMarks(c)
	last, lastAt := first, time.Now()
	start := lastAt
	for time.Now().Before(end) && ctx.Err() == nil {
		stopper.SleepContext(ctx, time.Second)
		cur, now := readMarks(c), time.Now()
		dt := now.Sub(lastAt).Seconds()
		sec := int(now.Sub(start).Seconds() + 0.5)
		for i := range cur {
			rate := func(a, b int64) float64 { return float64(a-b) / dt }
			s := Second{Node: i + 1, Second: sec, Disk: rate(cur[i].disk, last[i].disk), Served: rate(cur[i].served, last[i].served),
				JobBlocks: rate(cur[i].jobBlocks, last[i].jobBlocks),
				Prefetch:  rate(cur[i].prefetch, last[i].prefetch), Runs: rate(cur[i].runs, last[i].runs),
				DemandRuns: rate(cur[i].demand, last[i].demand)}
			s.Other = max(0, s.Disk-s.Served-rate(cur[i].stream, last[i].stream))
			ds.seconds = append(ds.seconds, s)
			if s.Disk > ds.peak {
				ds.peak, ds.node, ds.second = s.Disk, i, sec
			}
		}
		last, lastAt = cur, now
	}
	for i := range last {
		ds.total += last[i].disk - first[i].disk
	}
	if el := lastAt.Sub(start).Seconds(); el > 0 {
		ds.mean = float64(ds.total) / el / float64(len(last))
	}
	return ds
}

// foreground is the YCSB-B load: 95 % reads and 5 % updates of one row, Zipf over the rows (the hot
// rows scattered over the spans), at a fixed rate, each operation timed from its scheduled start.
type foreground struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	hist   *hdrhistogram.Histogram
	// parts are the window's periods' own histograms (a period long each from the reset), to see
	// whether the p99 is steady over the window or one period's.
	parts   []*hdrhistogram.Histogram
	from    time.Time
	partLen time.Duration
	ops     atomic.Int64
	errs    atomic.Int64
}

func startForeground(ctx context.Context, cl *client.Client, o Options) *foreground {
	ctx, cancel := context.WithCancel(ctx)
	f := &foreground{cancel: cancel, hist: hdrhistogram.New(1, 60_000_000, 3), from: time.Now(), partLen: o.Period}
	rows := o.Spans * o.SpanRows
	interval := time.Duration(float64(time.Second) * float64(o.Clients) / float64(o.Rate))
	for w := range o.Clients {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			rng := rand.New(rand.NewSource(o.Seed*1000 + int64(w)))
			z := rand.NewZipf(rng, 1.01, 1, uint64(rows-1))
			perm := rand.New(rand.NewSource(o.Seed)).Perm(rows)
			val := make([]byte, o.ValueBytes)
			next := time.Now().Add(time.Duration(rng.Int63n(int64(interval))))
			for ctx.Err() == nil {
				stopper.SleepContext(ctx, time.Until(next))
				r := perm[z.Uint64()]
				key := rowKey(r/o.SpanRows, r%o.SpanRows)
				var err error
				if rng.Intn(100) < 5 {
					rng.Read(val)
					err = cl.Put(ctx, key, val)
				} else {
					_, _, err = cl.Get(ctx, key)
				}
				if ctx.Err() != nil {
					return
				}
				f.record(time.Since(next), err)
				next = next.Add(interval)
			}
		}()
	}
	return f
}

func (f *foreground) record(lat time.Duration, err error) {
	f.ops.Add(1)
	if err != nil {
		f.errs.Add(1)
	}
	us := max(1, lat.Microseconds())
	f.mu.Lock()
	_ = f.hist.RecordValue(us)
	if i := int(time.Since(f.from) / f.partLen); i >= 0 {
		for len(f.parts) <= i {
			f.parts = append(f.parts, hdrhistogram.New(1, 60_000_000, 3))
		}
		_ = f.parts[i].RecordValue(us)
	}
	f.mu.Unlock()
}

// reset starts the measured window.
func (f *foreground) reset() {
	f.mu.Lock()
	f.hist.Reset()
	f.parts, f.from = nil, time.Now()
	f.mu.Unlock()
	f.ops.Store(0)
	f.errs.Store(0)
}

func (f *foreground) take() (ops, errs int64, p50, p99 float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops.Load(), f.errs.Load(), float64(f.hist.ValueAtQuantile(50)) / 1000, float64(f.hist.ValueAtQuantile(99)) / 1000
}

// partP99 is the p99 of each period of the window so far (ms).
func (f *foreground) partP99() []float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []float64
	for _, h := range f.parts {
		out = append(out, float64(h.ValueAtQuantile(99))/1000)
	}
	return out
}

func (f *foreground) stop() {
	f.cancel()
	f.wg.Wait()
}
