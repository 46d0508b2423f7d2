package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// Scenarios of issue 9 (docs/design/read-hints.md, docs/bench-read-hints.md): one node serves every
// range (the journal's single primary); at t=60s every leadership it holds moves to another node,
// with read hints on (the read_hints switch) and off. Each run also samples every node's block
// cache and hints counters once a second; ReadHintsAnalysis turns those and the report's series into
// the figures the issue asks for (dip, time back to 95 % of the throughput before the change, the
// new leader's hit ratio against the old one's, the steady-state cost of hints).

// readHintsPin keeps every other policy from moving leaderships (and load_split from splitting the
// hot ranges), so the only change is the scenario's.
var readHintsPin = map[string]bool{
	policy.NameRebalance: false, policy.NameMerge: false, policy.NameLoadSplit: false, policy.NameShed: false,
}

// readHintsKV is the nodes' read-hints setting in these scenarios: the journal's (every hint sent
// to every other replica and applied). The shared two-core machine runs all three nodes and the
// clients, so the process's CPU stays above the adaptive mode's 90 % pause threshold and hints
// would simply be switched off; "read-hints-adaptive" runs the product default instead.
func readHintsKV(c *kv.Config) { c.Hints.FixedFraction = true }

// sampledKV is readHintsKV on a leader that samples half of its reads as a saturated one does
// (hints.BufferConfig.SampleAt), forced by a load signal that always reads 1: this machine's
// in-process nodes are rarely that loaded.
func sampledKV(c *kv.Config) {
	readHintsKV(c)
	c.Hints.Tuning.Buffer.Load = func() float64 { return 1 }
	c.Hints.Tuning.Buffer.SampleFraction = 0.5
}

func init() {
	base := Scenario{
		Nodes: 3, Records: 160000, Duration: 90 * time.Second, Threads: 8, ValueBytes: 1000, CacheBytes: 32 << 20,
		ReadFraction: 1, Policy: policy.NameReadHints, Splits: 6, Pin: readHintsPin, Warmup: 20 * time.Second,
		KV: readHintsKV,
		Events: []Event{
			{At: 0, What: "gather", Do: GatherLeaderships()},
			{At: 60 * time.Second, What: "move leaders", Do: MoveServingLeaderships()},
		},
	}
	s := base
	s.Name = "read-hints"
	s.Description = "3 nodes, 160k 1 KB records (~5x the 32 MiB block cache), 6 ranges all led by one node; " +
		"YCSB C (read-only, zipfian); at t=60s every leadership of that node moves to another; read hints on vs off"
	Register(s)
	s = base
	s.Name, s.ReadFraction = "read-hints-80", 0.8
	s.Description = "as read-hints with 80 % reads, 20 % overwrites of the same zipfian keys (not the journal's disjoint write keys: see read-hints-80-disjoint)"
	Register(s)
	// The other workloads, each with a range aggregation (1 000 consecutive rows, ~1 MB,
	// scanned once a second by one more client) timed before and after the change.
	scan := Workload{ScanEvery: time.Second, ScanRows: 1000}
	s = base
	s.Name = "read-hints-uniform"
	s.Description = "as read-hints with uniform keys (YCSB C uniform), plus a 1 000-row range aggregation every second"
	Register(s)
	w := scan
	w.Keys = Uniform
	SetWorkload(s.Name, w)
	s = base
	s.Name = "read-hints-uniform-all"
	s.KV = func(c *kv.Config) {
		readHintsKV(c)
		c.Hints.ReplayAll = true
	}
	s.Description = "as read-hints-uniform, replaying every hint (the journal's) instead of recurring reads only: " +
		"a uniform workload's reads rarely recur"
	Register(s)
	SetWorkload(s.Name, w)
	s = base
	s.Name, s.ReadFraction = "read-hints-80-disjoint", 0.8
	s.Description = "as read-hints with 80 % reads and 20 % writes on disjoint keys (every fifth key only written, the others only read; " +
		"zipfian within each set), plus a 1 000-row range aggregation every second"
	Register(s)
	w = scan
	w.DisjointWrites = true
	SetWorkload(s.Name, w)
	s = base
	s.Name = "read-hints-zipf-scan"
	s.Description = "as read-hints (YCSB C zipfian) plus a 1 000-row range aggregation every second"
	Register(s)
	SetWorkload(s.Name, scan)
	// A past leader re-elected after the working set moved: n1 serves, its leaderships move to n2
	// at 25 s, the hot keys change at 40 s, and at 70 s every leadership goes back to n1, whose cache
	// holds the old working set unless hints kept it up to date.
	s = base
	s.Name = "read-hints-return"
	s.Warmup = 10 * time.Second
	s.Events = []Event{
		{At: 0, What: "gather", Do: GatherLeaderships()},
		{At: 25 * time.Second, What: "move leaders", Do: MoveServingLeaderships()},
		{At: 40 * time.Second, What: "working set moves", Do: Marker("hot keys shifted")},
		{At: 70 * time.Second, What: "return leaders", Do: ReturnLeaderships()},
	}
	s.Description = "as read-hints-zipf-scan, but the leaderships move n1->n2 at 25s, the hot keys change at 40s " +
		"and the leaderships return to n1 at 70s (a past leader re-elected after the working set moved)"
	Register(s)
	w = scan
	w.ShiftAt = 40 * time.Second
	SetWorkload(s.Name, w)
	// Table 1 of the journal: the applied fraction against the new leader's miss rate, the
	// followers' CPU and read bytes; one run per fraction (hints on, fixed fraction) and one with no
	// hints module at all.
	s = base
	s.Name = "read-hints-fraction"
	s.Variants = nil
	for _, f := range []float64{1, 0.5, 0.33, 0.2, 0.1} {
		f := f
		s.Variants = append(s.Variants, Variant{Name: fmt.Sprintf("fraction-%.2f", f), KV: func(c *kv.Config) {
			readHintsKV(c)
			c.Hints.Fraction = f
		}})
	}
	s.Variants = append(s.Variants, Variant{Name: "no-hints", KV: func(c *kv.Config) { c.Hints.Off = true }})
	s.Description = "as read-hints, run once per applied fraction of hints (1, 0.5, 0.33, 0.2, 0.1; fixed) and once without hints"
	Register(s)
	// Which hints a fraction below 1 applies: the default hash of the descriptor (a stable subset of
	// the keys, nested as the fraction falls) against each hint with probability fraction
	// (hints.SelectRandom), which reaches every recurring hot key within a few batches.
	s = base
	s.Name = "read-hints-select"
	s.Variants = nil
	for _, f := range []float64{0.5, 0.33} {
		for _, sel := range []struct {
			name string
			sel  hints.Selection
		}{{"hash", hints.SelectHash}, {"random", hints.SelectRandom}} {
			f, sel := f, sel
			s.Variants = append(s.Variants, Variant{Name: fmt.Sprintf("%s-%.2f", sel.name, f), KV: func(c *kv.Config) {
				readHintsKV(c)
				c.Hints.Fraction = f
				c.Hints.Tuning.Applier.Selection = sel.sel
			}})
		}
	}
	s.Description = "as read-hints-fraction at fractions 0.5 and 0.33 (fixed), hints selected by descriptor hash (default) vs at random"
	Register(s)
	// A saturated leader sheds capture work: it records only half of its reads
	// (hints.BufferConfig.Load at or above SampleAt). The shared machine's nodes are rarely that
	// loaded, so the sampled variant forces it (a load signal that always reads 1) to show what it
	// costs the new leader's warmth; the other variants capture every read, and run without hints.
	s = base
	s.Name = "read-hints-sampled"
	s.Variants = []Variant{
		{Name: "full-capture", KV: readHintsKV},
		{Name: "sampled-0.50", KV: sampledKV},
		{Name: "no-hints", KV: func(c *kv.Config) { c.Hints.Off = true }},
	}
	s.Description = "as read-hints, capturing every read, capturing half of them (the saturated leader's sampling, forced), and without hints"
	Register(s)
	// A saturated leader (sampling its reads, forced as above) ships every 500 ms instead of 90 ms
	// (hints.ShipperConfig.SaturatedInterval); the autopilot then drains it, each transfer first
	// waiting for its target's warmth (its apply lag at most 1 s among the criteria). Does the
	// longer interval cost the new leaders their warmth, or the transfers their wait? The 90-ms
	// variant is the shipping before 932cd69; full capture is an unsaturated leader's.
	s = base
	s.Name = "read-hints-saturated-drain"
	s.Events = []Event{
		{At: 0, What: "gather", Do: GatherLeaderships()},
		{At: 60 * time.Second, What: "drain serving node", Do: DrainServingNode()},
	}
	s.Variants = []Variant{
		{Name: "sampled-500ms", KV: sampledKV},
		{Name: "sampled-90ms", KV: func(c *kv.Config) {
			sampledKV(c)
			c.Hints.Tuning.Shipper.SaturatedInterval = -1
		}},
		{Name: "full-capture", KV: readHintsKV},
		{Name: "no-hints", KV: func(c *kv.Config) { c.Hints.Off = true }},
	}
	s.Description = "as read-hints-sampled, but at t=60s the autopilot drains the serving node (warm before transfer); " +
		"a saturated leader's sampling forced, shipping every 500 ms (default) or 90 ms, against full capture and no hints"
	Register(s)
	s = base
	s.Name, s.KV = "read-hints-adaptive", nil
	s.Description = "as read-hints with the product default: the applied fraction adapted to CPU load (on a saturated machine it pauses)"
	Register(s)
	for _, mib := range []int64{8, 16} {
		s = base
		s.Name, s.CacheBytes = fmt.Sprintf("read-hints-cache-%dm", mib), mib<<20
		s.Description = fmt.Sprintf("as read-hints with a %d MiB block cache per node (cache-size sweep; same data)", mib)
		Register(s)
	}
	// The steady-state cost of hints measured within one run (two clusters on one shared machine
	// differ by more than the cost): hints switched off and on every 15 s, no leadership change;
	// once replaying only recurring reads (the default), once replaying every hint (the journal's).
	s = base
	s.Name, s.Duration = "read-hints-overhead", 95*time.Second
	s.Variants = []Variant{{Name: "recurring", KV: readHintsKV}, {Name: "replay-all", KV: func(c *kv.Config) {
		readHintsKV(c)
		c.Hints.ReplayAll = true
	}}}
	s.Events = []Event{{At: 0, What: "gather", Do: GatherLeaderships()}}
	for i, at := range []time.Duration{20, 35, 50, 65, 80} {
		on := i%2 == 1
		s.Events = append(s.Events, Event{At: at * time.Second, What: "hints " + onOff(on), Do: SetPolicy(policy.NameReadHints, on)})
	}
	s.Description = "as read-hints without a leadership change: read hints switched off at 20s, on at 35s, and so on every 15s; " +
		"throughput with hints on vs off within one run, replaying recurring reads (default) and every read"
	Register(s)
	// The same cost resolved with a confidence interval: 24 pairs of 12-s windows in ABBA order
	// (on, off | off, on | on, off | …), every window's first toggleSkipS left out; the analysis
	// gives the mean cost over the pairs with its 95 % confidence interval and the median
	// (readhints_stats.go). Recurring reads only (the default), fixed fraction 1 to every replica.
	s = base
	s.Name, s.Duration = "read-hints-overhead-abba", abbaWarmup+2*abbaPairs*abbaWindow
	s.Variants = []Variant{{Name: "recurring", KV: readHintsKV}, {Name: "replay-every-batch", KV: func(c *kv.Config) {
		// Before hints.ApplierConfig.ReplayEvery: a hot read replayed in every batch it arrives in.
		readHintsKV(c)
		c.Hints.Tuning.Applier.ReplayEvery = -1
	}}}
	s.Events = append([]Event{{At: 0, What: "gather", Do: GatherLeaderships()}}, abbaEvents(abbaWarmup, abbaWindow, abbaPairs)...)
	s.Description = fmt.Sprintf("as read-hints-overhead with %d pairs of %s windows in ABBA order (on,off | off,on | ...) after %s: "+
		"the cost of hints (1 - on/off, recurring reads, every replica) with a 95 %% confidence interval over the pairs; "+
		"variants: the default, and replaying a hot read in every batch (before ReplayEvery); run one with --variants", abbaPairs, abbaWindow, abbaWarmup)
	Register(s)
	s = base
	s.Name = "read-hints-kill"
	s.Events = []Event{
		{At: 0, What: "gather", Do: GatherLeaderships()},
		{At: 60 * time.Second, What: "kill leader", Do: KillUserLeader()},
	}
	s.Description = "as read-hints, but at t=60s the serving node is killed (failover instead of transfers)"
	Register(s)
}

// The ABBA schedule of read-hints-overhead-abba.
const (
	abbaWarmup = 20 * time.Second
	abbaWindow = 12 * time.Second
	abbaPairs  = 24
)

// abbaEvents switches hints at the start of every window from `from` on: pair k is (on, off) for
// even k and (off, on) for odd k. A window that keeps the state still gets its (no-op) switch, so
// every window is measured from toggleSkipS after its start.
func abbaEvents(from, window time.Duration, pairs int) []Event {
	var ev []Event
	for k := 0; k < pairs; k++ {
		for h := 0; h < 2; h++ {
			on := (h == 0) == (k%2 == 0)
			at := from + time.Duration(2*k+h)*window
			ev = append(ev, Event{At: at, What: "hints " + onOff(on), Do: SetPolicy(policy.NameReadHints, on)})
		}
	}
	return ev
}

// GatherLeaderships moves every user range's leadership to the node leading most of them (the
// journal's single primary), and starts sampling every node's block cache and hints counters once a
// second for ReadHintsAnalysis.
func GatherLeaderships() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		startNodeSampler(ctx, env)
		node, _, err := busiestNode(ctx, env)
		if err != nil {
			return "", err
		}
		gathered.Store(env, node)
		rs, err := benchutil.UserRanges(ctx, env.Client)
		if err != nil {
			return "", err
		}
		moved := 0
		for _, r := range rs {
			if r.LeaderNodeId == node {
				continue
			}
			if err := env.Client.TransferLeader(ctx, r.GetDesc().GetRangeId(), node); err != nil {
				return fmt.Sprintf("n%d", node), err
			}
			moved++
		}
		return fmt.Sprintf("n%d leads %d ranges (%d moved)", node, len(rs), moved), nil
	}
}

// gathered remembers, per run (its Env), the node GatherLeaderships gathered the leaderships on.
var gathered sync.Map // *Env -> uint64

// Marker is an event that does nothing but mark the timeline (e.g. a change of the workload's keys
// that the Workload makes at the same offset).
func Marker(desc string) Action {
	return func(context.Context, *Env) (string, error) { return desc, nil }
}

// ReturnLeaderships transfers every user range's leadership back to the node GatherLeaderships
// gathered them on, all at once, and returns when the transfers are done.
func ReturnLeaderships() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		v, ok := gathered.Load(env)
		if !ok {
			return "", fmt.Errorf("no gathered node to return the leaderships to")
		}
		return transferAll(ctx, env, v.(uint64))
	}
}

// transferAll moves every user range's leadership that another node holds to node to, in parallel.
func transferAll(ctx context.Context, env *Env, to uint64) (string, error) {
	rs, err := benchutil.UserRanges(ctx, env.Client)
	if err != nil {
		return "", err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		moved int
		errs  []string
		from  = map[uint64]bool{}
	)
	for _, r := range rs {
		if r.LeaderNodeId == to {
			continue
		}
		from[r.LeaderNodeId] = true
		wg.Add(1)
		go func(id uint64) {
			defer wg.Done()
			err := env.Client.TransferLeader(ctx, id, to)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("r%d: %v", id, err))
				return
			}
			moved++
		}(r.GetDesc().GetRangeId())
	}
	wg.Wait()
	var ids []string
	for id := range from {
		ids = append(ids, fmt.Sprintf("n%d", id))
	}
	sort.Strings(ids)
	desc := fmt.Sprintf("%d ranges %s->n%d", moved, strings.Join(ids, ","), to)
	if len(errs) > 0 {
		return desc, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return desc, nil
}

// DrainServingNode drains the node leading most user ranges through the autopilot — the drain
// policy's TransferLeader operators, each waiting first for its target's warmth (warm before
// transfer) — and returns once that node leads none. Its description carries, per transfer, when
// it was proposed (seconds from the drain's start), how long its steps took and the warmth the decision log recorded.
func DrainServingNode() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		from, led, err := busiestNode(ctx, env)
		if err != nil {
			return "", err
		}
		start := time.Now()
		if err := env.Client.SetNodeState(ctx, from, pb.NodeAdminState_NODE_DRAINING); err != nil {
			return fmt.Sprintf("n%d", from), fmt.Errorf("drain n%d: %w", from, err)
		}
		for {
			rs, err := benchutil.UserRanges(ctx, env.Client)
			if err != nil {
				return fmt.Sprintf("n%d", from), err
			}
			left := 0
			for _, r := range rs {
				if r.LeaderNodeId == from {
					left++
				}
			}
			if left == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Sprintf("n%d still leads %d ranges", from, left), ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
		desc := fmt.Sprintf("n%d drained of %d leaderships in %.1fs", from, led, time.Since(start).Seconds())
		// The executor records an operator's end just after its last step: give the entries up to
		// 10 s to leave "running", so that the description has their final statuses.
		var ds []decisions.Entry
		for settle := time.Now(); ; {
			if ds, err = decisionsSince(ctx, env, start); err != nil {
				return desc, err
			}
			running := slices.ContainsFunc(ds, func(d decisions.Entry) bool {
				return d.Policy == policy.NameDrain && d.Status == decisions.StatusRunning
			})
			if !running || time.Since(settle) > 10*time.Second {
				break
			}
			select {
			case <-ctx.Done():
				return desc, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		for _, d := range ds {
			// The serving node's user ranges; the meta range, when the node led it, moves last
			// and takes the autopilot (and its log) along.
			if d.Policy != policy.NameDrain || d.Range == replica.MetaRangeID {
				continue
			}
			var warmth []string
			for _, n := range d.Notes {
				if strings.HasPrefix(n, "read hints:") {
					warmth = append(warmth, n)
				}
			}
			took := 0.0
			for _, st := range d.Steps {
				took += st.TookS
			}
			desc += fmt.Sprintf("; r%d %s, proposed at +%.1fs, steps took %.2fs", d.Range, d.Status, d.Time.Sub(start).Seconds(), took)
			if len(warmth) > 0 {
				desc += " (" + strings.Join(warmth, " | ") + ")"
			}
		}
		return desc, nil
	}
}

// MoveServingLeaderships transfers every user range led by the node leading most of them to one
// other node (the next live node id after it), all at once, and returns when the transfers are done.
func MoveServingLeaderships() Action {
	return func(ctx context.Context, env *Env) (string, error) {
		from, _, err := busiestNode(ctx, env)
		if err != nil {
			return "", err
		}
		rs, err := benchutil.UserRanges(ctx, env.Client)
		if err != nil {
			return "", err
		}
		var to uint64
		env.c.mu.Lock()
		var ids []uint64
		for _, n := range env.c.nodes {
			if n.alive {
				ids = append(ids, n.kv.NodeID())
			}
		}
		env.c.mu.Unlock()
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		for _, id := range ids {
			if id > from {
				to = id
				break
			}
		}
		if to == 0 && len(ids) > 0 && ids[0] != from {
			to = ids[0]
		}
		if to == 0 {
			return "", fmt.Errorf("no node to move n%d's leaderships to", from)
		}
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			moved int
			errs  []string
		)
		for _, r := range rs {
			if r.LeaderNodeId != from {
				continue
			}
			wg.Add(1)
			go func(id uint64) {
				defer wg.Done()
				err := env.Client.TransferLeader(ctx, id, to)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Sprintf("r%d: %v", id, err))
					return
				}
				moved++
			}(r.GetDesc().GetRangeId())
		}
		wg.Wait()
		desc := fmt.Sprintf("%d ranges n%d->n%d", moved, from, to)
		if len(errs) > 0 {
			return desc, fmt.Errorf("%s", strings.Join(errs, "; "))
		}
		return desc, nil
	}
}

// NodeSecond is one node's counters over one second of a run (deltas, except the gauges).
type NodeSecond struct {
	Node    uint64 `json:"node"`
	Alive   bool   `json:"alive"`
	Leaders int    `json:"leaders"`
	// Block-cache lookups of the whole engine (client reads, hint replays, raft).
	CacheHits   uint64   `json:"cache_hits"`
	CacheMisses uint64   `json:"cache_misses"`
	HitRatio    *float64 `json:"hit_ratio"`
	// Read hints: reads recorded here (as leader), hints applied here (as follower), bytes shipped
	// and received, hints dropped for any reason, replays' block bytes found in / read into the cache.
	Recorded      uint64  `json:"recorded"`
	Applied       uint64  `json:"applied"`
	BytesSent     uint64  `json:"bytes_sent"`
	BytesReceived uint64  `json:"bytes_received"`
	Dropped       uint64  `json:"dropped"`
	ReplayHit     uint64  `json:"replay_hit_bytes"`
	ReplayMiss    uint64  `json:"replay_miss_bytes"`
	Fraction      float64 `json:"fraction"`
	Load          float64 `json:"load"`
	Paused        bool    `json:"paused"`
	// DiskReadBytes is what the node's engine read from its (emulated) disk this second.
	DiskReadBytes uint64 `json:"disk_read_bytes"`
	// DroppedBy splits Dropped by reason (the metric's label: one_off, selective, …).
	DroppedBy map[string]uint64 `json:"dropped_by,omitempty"`
}

// NodeSample is every node's counters over one second.
type NodeSample struct {
	T     float64      `json:"t"`
	Nodes []NodeSecond `json:"nodes"`
	// CPU is the CPU time the whole process (every node and the clients) used this second, in cores.
	CPU float64 `json:"cpu_cores"`
}

// processCPU is the CPU time the process has used so far (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type nodeSampler struct {
	mu      sync.Mutex
	samples []NodeSample
}

var (
	samplersMu sync.Mutex
	samplers   []*nodeSampler // one per run, in the order the runs started
)

// startNodeSampler samples env's nodes every second until ctx (the run's workload) ends.
func startNodeSampler(ctx context.Context, env *Env) {
	s := &nodeSampler{}
	samplersMu.Lock()
	samplers = append(samplers, s)
	samplersMu.Unlock()
	type mark struct {
		hits, misses                                    int64
		rec, app, sent, recv, drop, rhit, rmiss, leader uint64
		disk                                            int64
		dropBy                                          map[hints.DropReason]uint64
	}
	prev := map[int]mark{}
	start := time.Now()
	lastCPU, lastT := processCPU(), start
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			leaders := env.c.userLeaders()
			now, cpu := time.Now(), processCPU()
			smp := NodeSample{T: now.Sub(start).Seconds()}
			if d := now.Sub(lastT); d > 0 && cpu >= lastCPU {
				smp.CPU = float64(cpu-lastCPU) / float64(d)
			}
			lastCPU, lastT = cpu, now
			env.c.mu.Lock()
			for i, n := range env.c.nodes {
				ns := NodeSecond{Alive: n.alive}
				if !n.alive {
					smp.Nodes = append(smp.Nodes, ns)
					delete(prev, i)
					continue
				}
				ns.Node = n.kv.NodeID()
				if i < len(leaders) {
					ns.Leaders = leaders[i]
				}
				em := n.kv.Metrics().Engine
				cur := mark{hits: em.BlockCacheHits, misses: em.BlockCacheMisses, disk: n.eng.DeviceStats().ReadBytes}
				if h := n.kv.Hints(); h != nil {
					m := h.Metrics()
					cur.rec, cur.app, cur.sent, cur.recv = m.Recorded, m.Applied, m.BytesSent, m.BytesReceived
					cur.drop, cur.rhit, cur.rmiss = m.DroppedTotal(), m.ReplayCacheHit, m.ReplayCacheMiss
					ns.Fraction, ns.Load, ns.Paused = m.Fraction, m.Load, m.Paused
					cur.dropBy = m.Dropped
				}
				if p, ok := prev[i]; ok && cur.hits >= p.hits && cur.misses >= p.misses {
					ns.CacheHits, ns.CacheMisses = uint64(cur.hits-p.hits), uint64(cur.misses-p.misses)
					ns.Recorded, ns.Applied, ns.BytesSent = cur.rec-p.rec, cur.app-p.app, cur.sent-p.sent
					ns.BytesReceived, ns.Dropped = cur.recv-p.recv, cur.drop-p.drop
					ns.ReplayHit, ns.ReplayMiss = cur.rhit-p.rhit, cur.rmiss-p.rmiss
					for r, v := range cur.dropBy {
						if d := v - p.dropBy[r]; v > p.dropBy[r] {
							if ns.DroppedBy == nil {
								ns.DroppedBy = map[string]uint64{}
							}
							ns.DroppedBy[r.String()] = d
						}
					}
					if cur.disk >= p.disk {
						ns.DiskReadBytes = uint64(cur.disk - p.disk)
					}
					if tot := ns.CacheHits + ns.CacheMisses; tot > 0 {
						r := float64(ns.CacheHits) / float64(tot)
						ns.HitRatio = &r
					}
				}
				prev[i] = cur
				smp.Nodes = append(smp.Nodes, ns)
			}
			env.c.mu.Unlock()
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
		}
	}()
}

// takeSamplers returns the samplers of the runs so far and forgets them.
func takeSamplers() []*nodeSampler {
	samplersMu.Lock()
	defer samplersMu.Unlock()
	out := samplers
	samplers = nil
	return out
}

// ReadHintsRun is what one run of a read-hints scenario measured around its leadership change.
type ReadHintsRun struct {
	HintsOn bool    `json:"hints_on"`
	Variant string  `json:"variant,omitempty"`
	ChangeT float64 `json:"change_t"`
	Change  string  `json:"change"`
	// OldLeader served every range before the change; NewLeader served most of them after it.
	OldLeader uint64 `json:"old_leader"`
	NewLeader uint64 `json:"new_leader"`
	// Throughput (ops/s) and p99 (mean of the per-second p99s) over the steady state before the
	// change (after the warm-up).
	SteadyThroughput float64 `json:"steady_throughput"`
	SteadyP99Ms      float64 `json:"steady_p99_ms"`
	// After the change: the worst second (share of the steady throughput), the mean over the
	// first second, 5 s and 10 s, and the worst p99 of the first 5 s.
	WorstSecond   float64 `json:"worst_second_ratio"`
	First1sRatio  float64 `json:"first_1s_ratio"`
	First5sRatio  float64 `json:"first_5s_ratio"`
	First10sRatio float64 `json:"first_10s_ratio"`
	MaxP99After   float64 `json:"max_p99_ms_first_5s"`
	// TimeTo95S is the time from the change until the throughput of a 3 s window first averages
	// at least 95 % of the steady throughput (nil: not within the run).
	TimeTo95S *float64 `json:"time_to_95_s"`
	// Block-cache hit ratios (engine lookups): the old leader over the 10 s before the change, the
	// new leader over the same 10 s (as a follower: only hint replays and raft), and the new leader
	// over the first 1 s and 5 s after it.
	OldLeaderHitRatio        *float64 `json:"old_leader_hit_ratio"`
	NewLeaderHitRatioBefore  *float64 `json:"new_leader_hit_ratio_before"`
	NewLeaderHitRatioFirst1s *float64 `json:"new_leader_hit_ratio_first_1s"`
	NewLeaderHitRatioFirst5s *float64 `json:"new_leader_hit_ratio_first_5s"`
	// HitRatioRecoveryS is the time from the change until the new leader's hit ratio first stays,
	// for 3 s in a row, within half a point of the old leader's (nil: not within the run).
	HitRatioRecoveryS *float64 `json:"hit_ratio_recovery_s"`
	// NewLeaderLevel is the new leader's hit ratio 15–30 s after the change (its warm level: nodes'
	// ratios differ by a few points with their LSM shapes), and WarmUpS the time until its ratio
	// first stays within half a point of that level for 3 s in a row.
	NewLeaderLevel *float64 `json:"new_leader_level"`
	WarmUpS        *float64 `json:"warm_up_s"`
	// Steady-state read hints: reads recorded by the old leader per second, bytes it shipped per
	// second (to both followers) and bytes per recorded read, hints the new leader applied per
	// second, the applied fraction and load it saw, and hints dropped per second cluster-wide.
	RecordedPerSec   float64 `json:"recorded_per_s"`
	HintBytesPerSec  float64 `json:"hint_bytes_per_s"`
	BytesPerRead     float64 `json:"hint_bytes_per_read"`
	AppliedPerSec    float64 `json:"follower_applied_per_s"`
	FollowerFraction float64 `json:"follower_fraction"`
	FollowerLoad     float64 `json:"follower_load"`
	DroppedPerSec    float64 `json:"dropped_per_s"`
	// DroppedByPerSec splits DroppedPerSec by reason.
	DroppedByPerSec map[string]float64 `json:"dropped_by_per_s,omitempty"`
	// Toggled runs (read-hints-overhead): mean throughput while hints were on and off (each window
	// from 3 s after a switch, to let every node see it, to the next switch), and the cost.
	ToggleOnThroughput  float64 `json:"toggle_on_throughput,omitempty"`
	ToggleOffThroughput float64 `json:"toggle_off_throughput,omitempty"`
	ToggleOverhead      float64 `json:"toggle_overhead,omitempty"`
	// ToggleWindows are the toggled windows after the first switch (each from toggleSkipS after the
	// switch that starts it to the next), and TogglePaired the cost estimated from pairs of adjacent
	// windows (1–2, 3–4, …) with a 95 % confidence interval (read-hints-overhead-abba).
	ToggleWindows []ToggleWindow `json:"toggle_windows,omitempty"`
	TogglePaired  *PairedCost    `json:"toggle_paired,omitempty"`
	// SteadyFromS is where the steady state before the change starts: the warm-up's end, or 5 s
	// after the end of an earlier event (read-hints-return: the first move, the working set's shift).
	SteadyFromS float64 `json:"steady_from_s"`
	// The 1 s goal: the first second after the change (its p99 against the steady mean of
	// the per-second p99s), and the time until three seconds in a row each have a p99 of at most
	// 1.5× the steady one (nil: not within the run).
	P99First1sMs    float64  `json:"p99_first_1s_ms"`
	P99First1sRatio float64  `json:"p99_first_1s_ratio"`
	TimeToP99S      *float64 `json:"time_to_p99_1_5x_s"`
	// The range aggregation (Workload.Scan*), in ms: the run's first scan (cold: nothing read those
	// rows before), the median of the per-second means over the steady state (warm, on the old
	// leader), the first after the change (on the new leader) and the slowest of the first 5 s.
	ScanFirstMs     *float64 `json:"scan_first_ms,omitempty"`
	ScanSteadyMs    *float64 `json:"scan_steady_ms,omitempty"`
	ScanAfterMs     *float64 `json:"scan_after_ms,omitempty"`
	ScanMaxFirst5Ms *float64 `json:"scan_max_first_5s_ms,omitempty"`
	// Steady state: the process's CPU (every node and the clients, in cores) and per operation (µs),
	// the disk bytes read per second by the old leader and by the new one (as a follower: hint
	// replays), and the new leader's disk reads per second over the first 5 s after the change.
	SteadyCPU               float64 `json:"steady_cpu_cores"`
	CPUPerOpUs              float64 `json:"cpu_per_op_us"`
	OldLeaderDiskPerSec     float64 `json:"old_leader_disk_read_bytes_per_s"`
	FollowerDiskPerSec      float64 `json:"follower_disk_read_bytes_per_s"`
	NewLeaderDiskFirst5sSec float64 `json:"new_leader_disk_read_bytes_per_s_first_5s"`
	// FirstMove, in a run whose change is the return of the leaderships (read-hints-return), is the
	// same analysis of the first move, up to the next event (without its node samples).
	FirstMove *ReadHintsRun `json:"first_move,omitempty"`
	// Nodes are the per-second node samples.
	Nodes []NodeSample `json:"nodes"`
}

// ReadHintsSummary is readhints.json: both runs and the comparison.
type ReadHintsSummary struct {
	Scenario string         `json:"scenario"`
	Runs     []ReadHintsRun `json:"runs"`
	// SteadyOverhead is 1 − steady throughput with hints / without (the cost of hints; noisy: two
	// separate clusters on one shared machine).
	SteadyOverhead float64 `json:"steady_overhead"`
	Plot           string  `json:"plot,omitempty"`
	// NewLeaderPlot overlays every run's new leader's hit ratio around the change (one line per run).
	NewLeaderPlot string `json:"new_leader_plot,omitempty"`
}

// ReadHintsAnalysis computes the read-hints figures of rep from its series and the node samples its
// runs collected, writes readhints.json and node_hit_ratio.png into out and a summary to w. It
// returns nil (and does nothing) for a report without node samples (another scenario).
func ReadHintsAnalysis(rep *Report, out string, w io.Writer) (*ReadHintsSummary, error) {
	smps := takeSamplers()
	if rep == nil || len(smps) != len(rep.Runs) || len(smps) == 0 {
		return nil, nil
	}
	sum := &ReadHintsSummary{Scenario: rep.Scenario}
	warmup := 0.0
	if sc, ok := Lookup(rep.Scenario); ok {
		warmup = sc.Warmup.Seconds() * rep.Settings.DurationS / sc.Duration.Seconds()
	}
	for i, r := range rep.Runs {
		smps[i].mu.Lock()
		nodes := append([]NodeSample(nil), smps[i].samples...)
		smps[i].mu.Unlock()
		sum.Runs = append(sum.Runs, analyzeRun(r, nodes, warmup))
	}
	if len(sum.Runs) == 2 && sum.Runs[1].SteadyThroughput > 0 {
		sum.SteadyOverhead = 1 - sum.Runs[0].SteadyThroughput/sum.Runs[1].SteadyThroughput
	}
	if err := plotNodeHitRatios(rep, sum, filepath.Join(out, "node_hit_ratio.png")); err != nil {
		return nil, err
	}
	sum.Plot = "node_hit_ratio.png"
	if ok, err := plotNewLeaderHitRatios(rep, sum, filepath.Join(out, "new_leader_hit_ratio.png")); err != nil {
		return nil, err
	} else if ok {
		sum.NewLeaderPlot = "new_leader_hit_ratio.png"
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, "readhints.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if w != nil {
		for _, r := range sum.Runs {
			if r.ToggleOffThroughput > 0 {
				fmt.Fprintf(w, "read hints toggled within one run (%s): %.0f ops/s with hints on, %.0f off: cost %.1f%%; "+
					"%.0f reads/s recorded, %.0f B/s shipped, %.0f applied/s per follower\n",
					r.Variant, r.ToggleOnThroughput, r.ToggleOffThroughput, 100*r.ToggleOverhead, r.RecordedPerSec, r.HintBytesPerSec, r.AppliedPerSec)
				if c := r.TogglePaired; c != nil {
					fmt.Fprintf(w, "  %s: %d pairs of windows (%s order), cost 1 - on/off: mean %.2f%%, 95%% CI [%.2f%%, %.2f%%], median %.2f%%, sd %.2f%%\n",
						r.Variant, c.Pairs, c.Order, 100*c.Mean, 100*c.CILow, 100*c.CIHigh, 100*c.Median, 100*c.SD)
					fmt.Fprintf(w, "  %s: windows (on/off ops/s):", r.Variant)
					for _, tw := range r.ToggleWindows {
						fmt.Fprintf(w, " %s %.0f", onOff(tw.On), tw.OpsPerS)
					}
					fmt.Fprintln(w)
				}
				continue
			}
			name := onOff(r.HintsOn)
			if r.Variant != "" {
				name = r.Variant
			}
			fmt.Fprintf(w, "read hints %s: %s at %.0fs; steady %.0f ops/s p99 %.2f ms; worst second %.0f%%, first 1s %.0f%%, 5s %.0f%%, 10s %.0f%%; "+
				"time to 95%% %s; p99 first 5s %.2f ms; hit ratio old leader n%d %s, new leader n%d before %s, first 1s %s, 5s %s, back within 0.5 point after %s, "+
				"its own level %s reached after %s; "+
				"hints %.0f reads/s recorded, %.0f B/s shipped (%.1f B/read), %.0f applied/s per follower (fraction %.2f, load %.2f), %.0f dropped/s\n",
				name, r.Change, r.ChangeT, r.SteadyThroughput, r.SteadyP99Ms, 100*r.WorstSecond, 100*r.First1sRatio, 100*r.First5sRatio,
				100*r.First10sRatio, fmtSecs(r.TimeTo95S), r.MaxP99After, r.OldLeader, fmtRatio(r.OldLeaderHitRatio), r.NewLeader,
				fmtRatio(r.NewLeaderHitRatioBefore), fmtRatio(r.NewLeaderHitRatioFirst1s), fmtRatio(r.NewLeaderHitRatioFirst5s), fmtSecs(r.HitRatioRecoveryS),
				fmtRatio(r.NewLeaderLevel), fmtSecs(r.WarmUpS),
				r.RecordedPerSec, r.HintBytesPerSec, r.BytesPerRead, r.AppliedPerSec, r.FollowerFraction, r.FollowerLoad, r.DroppedPerSec)
			fmt.Fprintf(w, "  %s: first second after the change: throughput %.0f%%, p99 %.2f ms (%.2fx steady); p99 within 1.5x after %s; "+
				"steady CPU %.2f cores (%.0f us/op), disk reads old leader %.0f kB/s, new leader before %.0f kB/s, after (5 s) %.0f kB/s; "+
				"scan first %s ms, steady %s ms, first after the change %s ms, worst of 5 s %s ms; dropped/s by reason %v\n",
				name, 100*r.First1sRatio, r.P99First1sMs, r.P99First1sRatio, fmtSecs(r.TimeToP99S), r.SteadyCPU, r.CPUPerOpUs,
				r.OldLeaderDiskPerSec/1e3, r.FollowerDiskPerSec/1e3, r.NewLeaderDiskFirst5sSec/1e3,
				fmtMs(r.ScanFirstMs), fmtMs(r.ScanSteadyMs), fmtMs(r.ScanAfterMs), fmtMs(r.ScanMaxFirst5Ms), fmtPerSec(r.DroppedByPerSec))
			if f := r.FirstMove; f != nil {
				fmt.Fprintf(w, "  %s, first move (%s at %.0fs): steady %.0f ops/s; first 1s %.0f%%, 5s %.0f%%, time to 95%% %s; p99 first 1s %.2fx; "+
					"hit ratio old leader n%d %s, new leader n%d first 1s %s, 5s %s, back within 0.5 point after %s\n",
					name, f.Change, f.ChangeT, f.SteadyThroughput, 100*f.First1sRatio, 100*f.First5sRatio, fmtSecs(f.TimeTo95S), f.P99First1sRatio,
					f.OldLeader, fmtRatio(f.OldLeaderHitRatio), f.NewLeader, fmtRatio(f.NewLeaderHitRatioFirst1s), fmtRatio(f.NewLeaderHitRatioFirst5s), fmtSecs(f.HitRatioRecoveryS))
			}
		}
		if len(sum.Runs) == 2 {
			fmt.Fprintf(w, "read hints: steady-state throughput with hints %.1f%% below without (separate clusters, same machine)\n", 100*sum.SteadyOverhead)
		}
	}
	return sum, nil
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

func fmtSecs(s *float64) string {
	if s == nil {
		return "not within the run"
	}
	return fmt.Sprintf("%.0fs", *s)
}

func fmtPerSec(m map[string]float64) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func fmtMs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v)
}

func fmtRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *r)
}

func analyzeRun(r RunReport, nodes []NodeSample, warmup float64) ReadHintsRun {
	out := ReadHintsRun{HintsOn: r.PolicyOn, Variant: r.Variant, Nodes: nodes, ChangeT: math.NaN()}
	if analyzeToggles(r, &out, warmup) {
		out.ChangeT = 0
		return out
	}
	// The change is the first event after the gathering, or the return of the leaderships when the
	// scenario has one (read-hints-return).
	for _, e := range r.Events {
		if e.Label != "gather" && e.Error == "" && math.IsNaN(out.ChangeT) || e.Label == "return leaders" && e.Error == "" {
			out.ChangeT, out.Change = e.T, e.What
		}
	}
	if math.IsNaN(out.ChangeT) {
		out.ChangeT = 0
		return out
	}
	T := out.ChangeT
	if strings.HasPrefix(out.Change, "return leaders") {
		out.FirstMove = analyzeFirstMove(r, nodes, warmup)
	}
	for _, e := range r.Events {
		if e.Label != "gather" && e.T < T {
			warmup = max(warmup, e.EndT+5)
		}
	}
	out.SteadyFromS = warmup
	// Per-second throughput: second s covers (s-1, s].
	mean := func(from, to float64, v func(Point) float64) float64 {
		var sum float64
		n := 0
		for _, p := range r.Series {
			if p.T-0.5 >= from && p.T-0.5 < to {
				sum += v(p)
				n++
			}
		}
		if n == 0 {
			return math.NaN()
		}
		return sum / float64(n)
	}
	ops := func(p Point) float64 { return float64(p.Ops) }
	out.SteadyThroughput = zeroNaN(mean(warmup, T, ops))
	out.SteadyP99Ms = zeroNaN(mean(warmup, T, func(p Point) float64 { return p.P99Ms }))
	if out.SteadyThroughput > 0 {
		out.First1sRatio = zeroNaN(mean(T, T+1, ops) / out.SteadyThroughput)
		out.First5sRatio = zeroNaN(mean(T, T+5, ops) / out.SteadyThroughput)
		out.First10sRatio = zeroNaN(mean(T, T+10, ops) / out.SteadyThroughput)
		out.WorstSecond = math.Inf(1)
		for _, p := range r.Series {
			if p.T-0.5 >= T && p.T-0.5 < T+10 {
				out.WorstSecond = min(out.WorstSecond, float64(p.Ops)/out.SteadyThroughput)
			}
			if p.T-0.5 >= T && p.T-0.5 < T+5 {
				out.MaxP99After = max(out.MaxP99After, p.P99Ms)
			}
		}
		if math.IsInf(out.WorstSecond, 1) {
			out.WorstSecond = 0
		}
		for i, p := range r.Series {
			if p.T-1 < T-0.5 || i+2 >= len(r.Series) {
				continue
			}
			if w := float64(p.Ops+r.Series[i+1].Ops+r.Series[i+2].Ops) / 3; w >= 0.95*out.SteadyThroughput {
				d := max(p.T-1-T, 0)
				out.TimeTo95S = &d
				break
			}
		}
	}
	if out.SteadyP99Ms > 0 {
		out.P99First1sMs = zeroNaN(mean(T, T+1, func(p Point) float64 { return p.P99Ms }))
		out.P99First1sRatio = out.P99First1sMs / out.SteadyP99Ms
		for i, p := range r.Series {
			if p.T-1 < T-0.5 || i+2 >= len(r.Series) {
				continue
			}
			ok := true
			for j := i; j <= i+2; j++ {
				ok = ok && r.Series[j].Ops > 0 && r.Series[j].P99Ms <= 1.5*out.SteadyP99Ms
			}
			if ok {
				d := max(p.T-1-T, 0)
				out.TimeToP99S = &d
				break
			}
		}
	}
	// The range aggregation's times.
	var steadyScans []float64
	for _, p := range r.Series {
		if p.ScanMs == nil {
			continue
		}
		v := *p.ScanMs
		if out.ScanFirstMs == nil {
			out.ScanFirstMs = &v
		}
		mid := p.T - 0.5
		switch {
		case mid >= warmup && mid < T:
			steadyScans = append(steadyScans, v)
		case mid >= T && mid < T+5:
			if out.ScanAfterMs == nil {
				out.ScanAfterMs = &v
			}
			if out.ScanMaxFirst5Ms == nil || v > *out.ScanMaxFirst5Ms {
				out.ScanMaxFirst5Ms = &v
			}
		}
	}
	if len(steadyScans) > 0 {
		sort.Float64s(steadyScans)
		v := steadyScans[len(steadyScans)/2]
		out.ScanSteadyMs = &v
	}
	// The old and new serving nodes, from the leader counts of the node samples.
	servingAt := func(from, to float64) uint64 {
		count := map[uint64]int{}
		for _, s := range nodes {
			if s.T-0.5 >= from && s.T-0.5 < to {
				for _, n := range s.Nodes {
					count[n.Node] += n.Leaders
				}
			}
		}
		var best uint64
		for id, c := range count {
			if id != 0 && (best == 0 || c > count[best]) {
				best = id
			}
		}
		return best
	}
	out.OldLeader = servingAt(T-10, T)
	out.NewLeader = servingAt(T+1, T+11)
	ratio := func(node uint64, from, to float64) *float64 {
		var h, m uint64
		for _, s := range nodes {
			if s.T-0.5 >= from && s.T-0.5 < to {
				for _, n := range s.Nodes {
					if n.Node == node {
						h += n.CacheHits
						m += n.CacheMisses
					}
				}
			}
		}
		if h+m == 0 {
			return nil
		}
		v := float64(h) / float64(h+m)
		return &v
	}
	out.OldLeaderHitRatio = ratio(out.OldLeader, T-10, T)
	out.NewLeaderHitRatioBefore = ratio(out.NewLeader, T-10, T)
	out.NewLeaderHitRatioFirst1s = ratio(out.NewLeader, T, T+1)
	out.NewLeaderHitRatioFirst5s = ratio(out.NewLeader, T, T+5)
	recovery := func(level *float64) *float64 {
		if level == nil {
			return nil
		}
		target := *level - 0.005
		for i, s := range nodes {
			if s.T-1 < T-0.5 {
				continue
			}
			ok := i+2 < len(nodes)
			for j := i; ok && j <= i+2; j++ {
				r := ratio(out.NewLeader, nodes[j].T-1, nodes[j].T)
				ok = r != nil && *r >= target
			}
			if ok {
				d := max(s.T-1-T, 0)
				return &d
			}
		}
		return nil
	}
	out.HitRatioRecoveryS = recovery(out.OldLeaderHitRatio)
	out.NewLeaderLevel = ratio(out.NewLeader, T+15, T+30)
	out.WarmUpS = recovery(out.NewLeaderLevel)
	var secs, rec, sent, app, frac, load, drop, cpu, oldDisk, folDisk float64
	for _, s := range nodes {
		if s.T-0.5 < warmup || s.T-0.5 >= T {
			continue
		}
		secs++
		cpu += s.CPU
		for _, n := range s.Nodes {
			drop += float64(n.Dropped)
			for k, v := range n.DroppedBy {
				if out.DroppedByPerSec == nil {
					out.DroppedByPerSec = map[string]float64{}
				}
				out.DroppedByPerSec[k] += float64(v)
			}
			switch n.Node {
			case out.OldLeader:
				rec += float64(n.Recorded)
				sent += float64(n.BytesSent)
				oldDisk += float64(n.DiskReadBytes)
			case out.NewLeader:
				app += float64(n.Applied)
				frac += n.Fraction
				load += n.Load
				folDisk += float64(n.DiskReadBytes)
			}
		}
	}
	if secs > 0 {
		out.RecordedPerSec, out.HintBytesPerSec, out.AppliedPerSec = rec/secs, sent/secs, app/secs
		out.FollowerFraction, out.FollowerLoad, out.DroppedPerSec = frac/secs, load/secs, drop/secs
		out.SteadyCPU, out.OldLeaderDiskPerSec, out.FollowerDiskPerSec = cpu/secs, oldDisk/secs, folDisk/secs
		for k := range out.DroppedByPerSec {
			out.DroppedByPerSec[k] /= secs
		}
		if rec > 0 {
			out.BytesPerRead = sent / rec
		}
		if out.SteadyThroughput > 0 {
			out.CPUPerOpUs = 1e6 * out.SteadyCPU / out.SteadyThroughput
		}
	}
	var newDisk, newSecs float64
	for _, s := range nodes {
		if s.T-0.5 >= T && s.T-0.5 < T+5 {
			newSecs++
			for _, n := range s.Nodes {
				if n.Node == out.NewLeader {
					newDisk += float64(n.DiskReadBytes)
				}
			}
		}
	}
	if newSecs > 0 {
		out.NewLeaderDiskFirst5sSec = newDisk / newSecs
	}
	return out
}

// analyzeFirstMove analyzes r as if it ended at the event after its first change.
func analyzeFirstMove(r RunReport, nodes []NodeSample, warmup float64) *ReadHintsRun {
	var evs []EventMark
	end := math.Inf(1)
	for _, e := range r.Events {
		if e.Label == "gather" || len(evs) == 0 || evs[len(evs)-1].Label == "gather" {
			evs = append(evs, e)
			continue
		}
		end = e.T
		break
	}
	cut := r
	cut.Events, cut.Series = evs, nil
	for _, p := range r.Series {
		if p.T-0.5 < end {
			cut.Series = append(cut.Series, p)
		}
	}
	var ns []NodeSample
	for _, s := range nodes {
		if s.T-0.5 < end {
			ns = append(ns, s)
		}
	}
	fm := analyzeRun(cut, ns, warmup)
	fm.Nodes = nil
	return &fm
}

func zeroNaN(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// toggleSkipS is how much of a toggled window is left out after the switch that starts it: nodes
// read the read_hints switch every 2 s, and a sender and its receivers need 2–4 s more to learn
// which reads recur. Every window leaves it out, also one whose "switch" kept the state (ABBA's
// repeated halves), so that on and off windows are measured alike.
const toggleSkipS = 5

// analyzeToggles fills the toggle figures of a run whose events switch hints on and off; it reports
// whether there were any. The run starts with hints on.
func analyzeToggles(r RunReport, out *ReadHintsRun, warmup float64) bool {
	type window struct {
		from, switchT float64
		on            bool
	}
	wins := []window{{from: warmup, switchT: warmup, on: true}}
	for _, e := range r.Events {
		switch e.Label {
		case "hints on", "hints off":
			wins = append(wins, window{from: e.T + toggleSkipS, switchT: e.T, on: e.Label == "hints on"})
		}
	}
	if len(wins) == 1 {
		return false
	}
	var sum [2]float64
	var n [2]int
	for i, w := range wins {
		to := math.Inf(1)
		if i+1 < len(wins) {
			to = wins[i+1].switchT
		}
		k := 0
		if w.on {
			k = 1
		}
		var ws float64
		var wn int
		for _, p := range r.Series {
			if p.T-0.5 >= w.from && p.T-0.5 < to {
				sum[k] += float64(p.Ops)
				n[k]++
				ws += float64(p.Ops)
				wn++
			}
		}
		if i > 0 && wn > 0 {
			out.ToggleWindows = append(out.ToggleWindows, ToggleWindow{On: w.on, FromS: w.from, ToS: math.Min(to, w.from+float64(wn)), OpsPerS: ws / float64(wn)})
		}
	}
	if n[0] > 0 && n[1] > 0 {
		out.ToggleOffThroughput, out.ToggleOnThroughput = sum[0]/float64(n[0]), sum[1]/float64(n[1])
		out.ToggleOverhead = 1 - out.ToggleOnThroughput/out.ToggleOffThroughput
	}
	out.TogglePaired = pairedCost(pairWindows(out.ToggleWindows))
	// Hints traffic while on: the serving node's recordings and bytes shipped, its followers' replays.
	leads := map[uint64]int{}
	for _, s := range out.Nodes {
		for _, nd := range s.Nodes {
			leads[nd.Node] += nd.Leaders
		}
	}
	for id, c := range leads {
		if id != 0 && (out.OldLeader == 0 || c > leads[out.OldLeader]) {
			out.OldLeader = id
		}
	}
	var secs, rec, sent, app, followers, drop float64
	for i, w := range wins {
		to := math.Inf(1)
		if i+1 < len(wins) {
			to = wins[i+1].from - 3
		}
		if !w.on {
			continue
		}
		for _, s := range out.Nodes {
			if s.T-0.5 < w.from || s.T-0.5 >= to {
				continue
			}
			secs++
			for _, nd := range s.Nodes {
				drop += float64(nd.Dropped)
				if nd.Node == out.OldLeader {
					rec += float64(nd.Recorded)
					sent += float64(nd.BytesSent)
				} else if nd.Alive {
					app += float64(nd.Applied)
					followers++
				}
			}
		}
	}
	if secs > 0 {
		out.RecordedPerSec, out.HintBytesPerSec, out.DroppedPerSec = rec/secs, sent/secs, drop/secs
		if followers > 0 {
			out.AppliedPerSec = app / followers
		}
		if rec > 0 {
			out.BytesPerRead = sent / rec
		}
	}
	out.Change = fmt.Sprintf("hints toggled %d times", len(wins)-1)
	return true
}

// plotNodeHitRatios draws each node's block-cache hit ratio per second, one panel per run, the
// change marked.
func plotNodeHitRatios(rep *Report, sum *ReadHintsSummary, file string) error {
	colors := []color.Color{blue, orange, color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 148, G: 103, B: 189, A: 255}}
	// A shared Y axis from just below the lowest ratio: the differences that matter are a few points.
	ymin := 1.0
	for _, run := range sum.Runs {
		for _, s := range run.Nodes {
			for _, n := range s.Nodes {
				if n.HitRatio != nil && n.CacheHits+n.CacheMisses >= 100 {
					ymin = min(ymin, *n.HitRatio)
				}
			}
		}
	}
	ymin = max(0, math.Floor((ymin-0.02)*20)/20)
	var row []*plot.Plot
	for _, run := range sum.Runs {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: block-cache hit ratio per node — read hints %s", rep.Scenario, onOff(run.HintsOn))
		if run.Variant != "" {
			p.Title.Text = fmt.Sprintf("%s: block-cache hit ratio per node — %s", rep.Scenario, run.Variant)
		}
		p.X.Label.Text = "t (s)"
		p.Y.Label.Text = "hits / lookups (nodes with ≥ 100 lookups that second)"
		p.X.Min, p.X.Max = 0, rep.Settings.DurationS
		p.Y.Min, p.Y.Max = ymin, 1
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		// Each node's seconds with enough lookups, split into segments where it had too few.
		byNode := map[uint64][]plotter.XYs{}
		last := map[uint64]float64{}
		var ids []uint64
		for _, s := range run.Nodes {
			for _, n := range s.Nodes {
				if n.HitRatio == nil || n.Node == 0 || n.CacheHits+n.CacheMisses < 100 {
					continue
				}
				segs, seen := byNode[n.Node]
				if !seen {
					ids = append(ids, n.Node)
				}
				if !seen || s.T-last[n.Node] > 1.5 {
					segs = append(segs, nil)
				}
				segs[len(segs)-1] = append(segs[len(segs)-1], plotter.XY{X: s.T, Y: *n.HitRatio})
				byNode[n.Node], last[n.Node] = segs, s.T
			}
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		for j, id := range ids {
			for k, seg := range byNode[id] {
				ln, err := plotter.NewLine(seg)
				if err != nil {
					return err
				}
				ln.Color = colors[j%len(colors)]
				ln.Width = vg.Points(1.5)
				p.Add(ln)
				if k > 0 {
					continue
				}
				label := fmt.Sprintf("n%d", id)
				switch id {
				case run.OldLeader:
					label += " (leader before)"
				case run.NewLeader:
					label += " (leader after)"
				}
				p.Legend.Add(label, ln)
			}
		}
		if run.ChangeT > 0 {
			v, err := plotter.NewLine(plotter.XYs{{X: run.ChangeT, Y: ymin}, {X: run.ChangeT, Y: 1}})
			if err != nil {
				return err
			}
			v.Color = red
			v.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(v)
		}
		row = append(row, p)
	}
	if len(row) == 0 {
		return nil
	}
	w, h := 7*vg.Inch*vg.Length(max(len(row), 2)), 4*vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Points(12), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for j, p := range row {
		p.Draw(canvases[0][j])
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// plotNewLeaderHitRatios draws, in one panel, each run's new leader's block-cache hit ratio per
// second from 5 s before its change to 20 s after it (time relative to the change), and the old
// leaders' mean over the 10 s before as a dashed line. It draws nothing (false) when no run has a
// change.
func plotNewLeaderHitRatios(rep *Report, sum *ReadHintsSummary, file string) (bool, error) {
	colors := []color.Color{blue, orange, color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 148, G: 103, B: 189, A: 255},
		color.RGBA{R: 140, G: 86, B: 75, A: 255}, color.RGBA{R: 127, G: 127, B: 127, A: 255}}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: the new leader's block-cache hit ratio around the change", rep.Scenario)
	p.X.Label.Text = "t − change (s)"
	p.Y.Label.Text = "hits / lookups"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.X.Min, p.X.Max = -5, 20
	ymin, old, nOld := 1.0, 0.0, 0
	drawn := 0
	for i, run := range sum.Runs {
		if run.ChangeT <= 0 || run.NewLeader == 0 || run.Change == "" || strings.HasPrefix(run.Change, "hints toggled") {
			continue
		}
		var xy plotter.XYs
		for _, s := range run.Nodes {
			t := s.T - 1 - run.ChangeT // the second (t-1, t] starts at t-1
			if t < -5 || t > 20 {
				continue
			}
			for _, n := range s.Nodes {
				if n.Node == run.NewLeader && n.HitRatio != nil && n.CacheHits+n.CacheMisses >= 100 {
					xy = append(xy, plotter.XY{X: t, Y: *n.HitRatio})
					ymin = min(ymin, *n.HitRatio)
				}
			}
		}
		if len(xy) == 0 {
			continue
		}
		ln, err := plotter.NewLine(xy)
		if err != nil {
			return false, err
		}
		ln.Color = colors[i%len(colors)]
		ln.Width = vg.Points(1.5)
		p.Add(ln)
		label := "hints " + onOff(run.HintsOn)
		if run.Variant != "" {
			label = run.Variant
		}
		p.Legend.Add(label, ln)
		if run.OldLeaderHitRatio != nil {
			old += *run.OldLeaderHitRatio
			nOld++
		}
		drawn++
	}
	if drawn == 0 {
		return false, nil
	}
	ymin = max(0, math.Floor((ymin-0.02)*20)/20)
	p.Y.Min, p.Y.Max = ymin, 1
	if nOld > 0 {
		ref, err := plotter.NewLine(plotter.XYs{{X: -5, Y: old / float64(nOld)}, {X: 20, Y: old / float64(nOld)}})
		if err != nil {
			return false, err
		}
		ref.Color = color.Black
		ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ref)
		p.Legend.Add("old leader, 10 s before (mean)", ref)
	}
	v, err := plotter.NewLine(plotter.XYs{{X: 0, Y: ymin}, {X: 0, Y: 1}})
	if err != nil {
		return false, err
	}
	v.Color = red
	v.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(v)
	return true, p.Save(8*vg.Inch, 4.5*vg.Inch, file)
}
