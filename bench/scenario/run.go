package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Options override a scenario's settings for one invocation; zero fields keep the scenario's.
type Options struct {
	Dir      string // data directories (required)
	Out      string // report.json and PNGs (required)
	Duration time.Duration
	Records  int
	Threads  int
	// Splits overrides the scenario's pre-split into equal ranges (`--splits`): the unit of a move
	// in the join scenarios, so smaller ranges for the same data.
	Splits int
	// SurgeThreads overrides the client threads a surge scenario adds at its surge
	// (`--surge-threads`); an error for a scenario without a surge.
	SurgeThreads int
	// CacheBytes is each node's block cache (default 8 MiB, small so the hit ratio moves).
	CacheBytes int64
	// Progress receives a text progress bar, one update per second; nil for none.
	Progress io.Writer
	// Device overrides the scenario's emulated disk per node (nil: the scenario's, or DefaultDevice);
	// NoEmulatedDisk turns emulated disks off (`shoal bench scenario --no-emulated-disk`).
	Device         *emudisk.Options
	NoEmulatedDisk bool
	// Variants, when set, runs only the scenario's variants of these names, in the scenario's order
	// (`shoal bench scenario --variants`); a name the scenario lacks is an error.
	Variants []string
	// RandomValues writes random, incompressible values (`--random-values`; Scenario.RandomValues).
	RandomValues bool
	// FastLoad loads the data (and lets the engines compact it) with the emulated disks' budgets
	// lifted (`--fast-load`), restoring them before the workload: on a 250-IOPS disk a load of
	// incompressible data takes most of a run's time and can stall writes long enough to fail.
	FastLoad bool
	// PageCacheBytes gives every node's emulated disk a modeled page cache of this size
	// (`--page-cache-mib`; emudisk.Options.PageCacheBytes) instead of none; 0: the scenario's.
	PageCacheBytes int64
	// LBaseMaxBytes and TargetFileBytes shape every engine's LSM (`--lbase-kib`, `--target-file-kib`;
	// storage.Options): a variant's own LBaseMaxBytes wins. 0: Pebble's.
	LBaseMaxBytes, TargetFileBytes int64
	// Reverse runs the variants (or the policy on/off pair) in the opposite order (RunRepeated's
	// alternate repetitions).
	Reverse bool
}

// EffectiveDevice is the emulated disk each node gets for sc under opts, or nil for none.
func EffectiveDevice(sc Scenario, opts Options) *emudisk.Options {
	d := &DefaultDevice
	switch {
	case opts.NoEmulatedDisk:
		return nil
	case opts.Device != nil:
		d = opts.Device
	case sc.Device != nil:
		d = sc.Device
	}
	if !d.Enabled() {
		return nil
	}
	c := *d
	if opts.PageCacheBytes > 0 {
		c.PageCacheBytes = opts.PageCacheBytes
	}
	return &c
}

// Settings are the effective settings of a report.
type Settings struct {
	Nodes      int     `json:"nodes"`
	Records    int     `json:"records"`
	DurationS  float64 `json:"duration_s"`
	Threads    int     `json:"threads"`
	Splits     int     `json:"splits,omitempty"`
	ValueBytes int     `json:"value_bytes"`
	// RandomValues: the values written were random bytes (incompressible), not a fixed pattern.
	RandomValues bool `json:"random_values,omitempty"`
	// FastLoad: the data were loaded and compacted with the emulated disks' budgets lifted.
	FastLoad bool `json:"fast_load,omitempty"`
	// LBaseMaxBytes and TargetFileBytes are the engines' LSM shape when set (0: Pebble's; a
	// variant's own base level is in its name).
	LBaseMaxBytes   int64   `json:"lbase_max_bytes,omitempty"`
	TargetFileBytes int64   `json:"target_file_bytes,omitempty"`
	ReadFraction    float64 `json:"read_fraction"`
	CacheBytes      int64   `json:"cache_bytes"`
	// SurgeThreads is the client threads a surge scenario adds at its surge.
	SurgeThreads int `json:"surge_threads,omitempty"`
	// Device is each node's emulated disk; null when the nodes share the machine's disk and page cache.
	Device *emudisk.Options `json:"device"`
}

// Summary totals one run.
type Summary struct {
	Ops        int64   `json:"ops"`
	Throughput float64 `json:"throughput"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Errors     int64   `json:"errors"`
	// ErrorKinds counts the failed operations by kind: the client's error code, or the error's
	// text for an error without one (at most maxErrorKinds kinds; the rest count as "other").
	ErrorKinds map[string]int64 `json:"error_kinds,omitempty"`
}

// maxErrorKinds bounds Summary.ErrorKinds: error texts may name keys and ranges.
const maxErrorKinds = 8

// errorKind is how Summary.ErrorKinds classifies err, given the kinds counted so far.
func errorKind(err error, kinds map[string]int64) string {
	var ce *client.Error
	k := err.Error()
	if errors.As(err, &ce) {
		k = ce.Code.String()
	}
	if len(k) > 120 {
		k = k[:120]
	}
	if _, ok := kinds[k]; !ok && len(kinds) >= maxErrorKinds {
		k = "other"
	}
	return k
}

// errorKindsText is kinds for a progress line: " (kind: n, ...)", or nothing.
func errorKindsText(kinds map[string]int64) string {
	if len(kinds) == 0 {
		return ""
	}
	var parts []string
	for k, n := range kinds {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

// Point is one second of one run. HitRatio is null when the block cache saw no access that second.
type Point struct {
	// Leaders and Replicas are, per node (n1 first), the user ranges it led and held at the end of
	// the second.
	Leaders  []int `json:"leaders,omitempty"`
	Replicas []int `json:"replicas,omitempty"`
	// DiskOps and DiskWaitMs are, per node, the operations of its emulated disk in the second (of
	// which DiskReadOps reads) and the time callers waited for its budget (summed over callers;
	// absent without emulated disks).
	DiskOps     []int64   `json:"disk_ops,omitempty"`
	DiskReadOps []int64   `json:"disk_read_ops,omitempty"`
	DiskWaitMs  []float64 `json:"disk_wait_ms,omitempty"`
	// NodeHitRatio is, per node, its block cache's hit ratio in the second (-1: no access, or the
	// node was down); Compactions and Flushes those its engine finished in the second, Compacting
	// those running at its end. HitRatio is the whole cluster's.
	NodeHitRatio []float64 `json:"node_hit_ratio,omitempty"`
	// NodeServedHitRatio is, per node, the share of the block bytes its own reads loaded that were in
	// its cache (-1: none), without the ranges it streamed out (raft snapshots), whose reads
	// NodeHitRatio counts; NodeStreamBytes the block bytes those streams read in the second.
	NodeServedHitRatio []float64 `json:"node_served_hit_ratio,omitempty"`
	NodeStreamBytes    []int64   `json:"node_stream_bytes,omitempty"`
	Compactions        []int64   `json:"compactions,omitempty"`
	Flushes            []int64   `json:"flushes,omitempty"`
	Compacting         []int64   `json:"compacting,omitempty"`
	T                  float64   `json:"t"`
	Ops                int64     `json:"ops"`
	P50Ms              float64   `json:"p50_ms"`
	P99Ms              float64   `json:"p99_ms"`
	HitRatio           *float64  `json:"hit_ratio"`
	Errors             int64     `json:"errors"`
	// ScanMs is the mean time of the Workload's range aggregations that ended this second (absent
	// without one, or when none ended); ScanErrors counts the failed or short ones.
	ScanMs     *float64 `json:"scan_ms,omitempty"`
	ScanErrors int      `json:"scan_errors,omitempty"`
}

// EventMark is an event as it fired; EndT is when its action returned.
type EventMark struct {
	T     float64 `json:"t"`
	EndT  float64 `json:"end_t"`
	What  string  `json:"what"`
	Label string  `json:"label"` // the scenario's short name of the event (for plots)
	Error string  `json:"error,omitempty"`
	Task  bool    `json:"task,omitempty"`
}

// TaskWindow compares the workload while a background task ran (from the event's start to its end)
// with the steady state before it (after the warm-up).
type TaskWindow struct {
	StartS           float64 `json:"start_s"`
	EndS             float64 `json:"end_s"`
	DurationS        float64 `json:"duration_s"`
	SteadyThroughput float64 `json:"steady_throughput"`
	TaskThroughput   float64 `json:"task_throughput"`
	ThroughputRatio  float64 `json:"throughput_ratio"`
	SteadyP99Ms      float64 `json:"steady_p99_ms"`
	TaskP99Ms        float64 `json:"task_p99_ms"`
	P99Ratio         float64 `json:"p99_ratio"`
}

// RunReport is one run: the policy on or off.
type RunReport struct {
	PolicyOn bool        `json:"policy_on"`
	Variant  string      `json:"variant,omitempty"`
	Summary  Summary     `json:"summary"`
	Series   []Point     `json:"series"`
	Events   []EventMark `json:"events"`
	// Device sums the emulated disks' counters over the nodes for the whole run (load included);
	// absent when the nodes had none.
	Device *emudisk.Stats `json:"device,omitempty"`
	// Compactions are the compactions the nodes' engines finished during the measured workload, by
	// end time: a restarted node's only from its restart on, none of a node down at the end.
	Compactions []CompactionMark `json:"compactions,omitempty"`
	// Decisions are the decision-log entries, from the measured workload on, of the policies the
	// variant switched on (Variant.Pin).
	Decisions []JoinStep `json:"decisions,omitempty"`
	// Task is the window of the first event marked Task, when there is one.
	Task *TaskWindow `json:"task,omitempty"`
	// Join measures a node's join (scenarios with JoinSpareNode).
	Join *JoinReport `json:"join,omitempty"`
}

// Report is what report.json holds.
type Report struct {
	Scenario string      `json:"scenario"`
	Policy   string      `json:"policy"`
	Settings Settings    `json:"settings"`
	Runs     []RunReport `json:"runs"`
	Plots    []string    `json:"plots"`
}

// Run runs sc twice (policy on, then off), each on a fresh cluster, and writes report.json and
// the PNG timelines into opts.Out.
func Run(ctx context.Context, sc Scenario, opts Options) (*Report, error) {
	if opts.Dir == "" || opts.Out == "" {
		return nil, fmt.Errorf("scenario: Dir and Out are required")
	}
	if sc.Nodes <= 0 {
		sc.Nodes = 3
	}
	if sc.Threads <= 0 {
		sc.Threads = 8
	}
	if sc.ValueBytes <= 0 {
		sc.ValueBytes = 256
	}
	if opts.Threads > 0 {
		sc.Threads = opts.Threads
	}
	if opts.Records > 0 {
		sc.Records = opts.Records
	}
	if opts.Splits > 0 {
		sc.Splits = opts.Splits
	}
	sc.RandomValues = sc.RandomValues || opts.RandomValues
	if opts.LBaseMaxBytes < 0 || opts.TargetFileBytes < 0 {
		return nil, fmt.Errorf("scenario %s: --lbase-kib and --target-file-kib: want 0 (Pebble's) or a positive size", sc.Name)
	}
	if opts.PageCacheBytes < 0 {
		return nil, fmt.Errorf("scenario %s: --page-cache-mib: want 0 (the scenario's) or a positive size", sc.Name)
	}
	if dev := EffectiveDevice(sc, opts); opts.PageCacheBytes > 0 && (dev == nil || !dev.NoPageCache) {
		return nil, fmt.Errorf("scenario %s: --page-cache-mib models the page cache of an emulated disk that bypasses the OS's; this run has none (--no-emulated-disk, or a device without the bypass)", sc.Name)
	}
	if opts.SurgeThreads < 0 {
		return nil, fmt.Errorf("scenario %s: --surge-threads %d: want a positive number of client threads", sc.Name, opts.SurgeThreads)
	}
	if opts.SurgeThreads > 0 {
		if sc.SurgeThreads == 0 {
			return nil, fmt.Errorf("scenario %s has no load surge: --surge-threads applies to the join-surge scenarios", sc.Name)
		}
		sc.SurgeThreads = opts.SurgeThreads
	}
	if sc.Records <= 0 {
		sc.Records = 1000
	}
	if opts.Duration > 0 && sc.Duration > 0 && opts.Duration != sc.Duration {
		// Events keep their place in the timeline: offsets scale with the duration.
		f := float64(opts.Duration) / float64(sc.Duration)
		evs := make([]Event, len(sc.Events))
		for i, e := range sc.Events {
			e.At = time.Duration(float64(e.At) * f)
			evs[i] = e
		}
		sc.Events = evs
		sc.Warmup = time.Duration(float64(sc.Warmup) * f)
	}
	if opts.Duration > 0 {
		sc.Duration = opts.Duration
	}
	if sc.Duration <= 0 {
		sc.Duration = 10 * time.Second
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = sc.CacheBytes
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 8 << 20
	}
	if sc.Warmup <= 0 {
		sc.Warmup = 5 * time.Second
	}
	vs, err := selectVariants(sc.Variants, opts.Variants)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if opts.Reverse {
		vs = append([]Variant(nil), vs...)
		slices.Reverse(vs)
	}
	sc.Variants = vs
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Scenario: sc.Name, Policy: sc.Policy, Settings: Settings{
		Nodes: sc.Nodes, Records: sc.Records, DurationS: sc.Duration.Seconds(), Threads: sc.Threads,
		Splits: sc.Splits, SurgeThreads: sc.SurgeThreads, ValueBytes: sc.ValueBytes, RandomValues: sc.RandomValues, FastLoad: opts.FastLoad, ReadFraction: sc.ReadFraction, CacheBytes: opts.CacheBytes,
		LBaseMaxBytes: opts.LBaseMaxBytes, TargetFileBytes: opts.TargetFileBytes,
		Device: EffectiveDevice(sc, opts),
	}}
	if len(sc.Variants) > 0 {
		for i, v := range sc.Variants {
			rr, err := runOnce(ctx, sc, opts, rep.Settings.Device, filepath.Join(opts.Dir, "variant-"+v.Name), true,
				fmt.Sprintf("run %d/%d %s", i+1, len(sc.Variants), v.Name), v)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", v.Name, err)
			}
			rr.Variant = v.Name
			rep.Runs = append(rep.Runs, *rr)
		}
	}
	pair := []bool{true, false}
	if opts.Reverse {
		pair = []bool{false, true}
	}
	for i, on := range pair {
		if len(sc.Variants) > 0 {
			break
		}
		label := "off"
		if on {
			label = "on"
		}
		rr, err := runOnce(ctx, sc, opts, rep.Settings.Device, filepath.Join(opts.Dir, "policy-"+label), on, fmt.Sprintf("run %d/2 %s=%s", i+1, sc.Policy, label), Variant{})
		if err != nil {
			return nil, fmt.Errorf("run with %s %s: %w", sc.Policy, label, err)
		}
		rep.Runs = append(rep.Runs, *rr)
	}
	plots, err := writePlots(rep, opts.Out)
	if err != nil {
		return nil, err
	}
	rep.Plots = plots
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.Out, "report.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	return rep, nil
}

func key(i int) []byte { return fmt.Appendf(nil, "user%09d", i) }

// selectVariants keeps the variants named in want (all but the optional ones when want is empty), in
// the scenario's order.
func selectVariants(all []Variant, want []string) ([]Variant, error) {
	if len(want) == 0 {
		var out []Variant
		for _, v := range all {
			if !v.Optional {
				out = append(out, v)
			}
		}
		return out, nil
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("--variants: the scenario has no variants (it runs its policy on and off)")
	}
	keep := map[string]bool{}
	for _, w := range want {
		keep[w] = true
	}
	var out []Variant
	for _, v := range all {
		if keep[v.Name] {
			out = append(out, v)
			delete(keep, v.Name)
		}
	}
	if len(keep) > 0 {
		names := make([]string, 0, len(all))
		for _, v := range all {
			names = append(names, v.Name)
		}
		unknown := make([]string, 0, len(keep))
		for w := range keep {
			unknown = append(unknown, w)
		}
		sort.Strings(unknown)
		return nil, fmt.Errorf("--variants: unknown %s (the scenario has %s)", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return out, nil
}

// runOnce starts a fresh cluster, waits for it to be fully replicated, loads the records, sets the
// policy, runs the workload with the events and tears the cluster down.
func runOnce(ctx context.Context, sc Scenario, opts Options, device *emudisk.Options, dir string, policyOn bool, label string, variant Variant) (*RunReport, error) {
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "\r\033[K%s: "+format, append([]any{label}, args...)...)
		}
	}
	progress("starting %d nodes", sc.Nodes)
	lbase := opts.LBaseMaxBytes
	if variant.LBaseMaxBytes > 0 {
		lbase = variant.LBaseMaxBytes
	}
	c, err := startCluster(ctx, dir, sc.Nodes, opts.CacheBytes, engineShape{lbaseMaxBytes: lbase,
		targetFileBytes: opts.TargetFileBytes},
		device, sc.KV, variant.KV)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	cl, err := client.New(ctx, client.Config{Addrs: c.addrs(), RequestTimeout: 2 * time.Second, MaxAttempts: 20})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	vals := newValues(sc.ValueBytes, sc.RandomValues)
	env := &Env{c: c, Client: cl, Records: sc.Records, SurgeThreads: sc.SurgeThreads, values: vals}

	progress("waiting for %d-way replication", sc.Nodes)
	deadline := time.Now().Add(90 * time.Second)
	for !benchutil.FullyReplicated(ctx, cl, sc.Nodes) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("cluster not fully replicated after 90s")
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		time.Sleep(200 * time.Millisecond)
	}

	if opts.FastLoad {
		c.setUnthrottled(true)
	}
	var loaded atomic.Int64
	var loadErr atomic.Value
	var wg sync.WaitGroup
	next := atomic.Int64{}
	stopLoad := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopLoad:
				return
			case <-t.C:
				progress("loading %s", benchutil.Bar(float64(loaded.Load())/float64(sc.Records), fmt.Sprintf("%d/%d records", loaded.Load(), sc.Records)))
			}
		}
	}()
	const (
		loadBatch    = 64 // sequential keys per write: one range, one raft proposal
		loadRetryFor = time.Minute
	)
	loadSeed := uint64(time.Now().UnixNano())
	for w := 0; w < sc.Threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w)+501, loadSeed))
			for {
				first := int(next.Add(loadBatch)) - loadBatch
				if first >= sc.Records {
					return
				}
				muts := make([]*pb.Mutation, 0, loadBatch)
				for i := first; i < min(first+loadBatch, sc.Records); i++ {
					muts = append(muts, &pb.Mutation{Key: key(i), Value: vals.next(rng)})
				}
				// Overwrites are idempotent: an ambiguous failure (a leadership change on a
				// loaded machine, writes stalled behind compactions on a slow disk) is simply
				// retried, for up to loadRetryFor.
				var err error
				for attempt, since := 0, time.Now(); ; attempt++ {
					if err = cl.WriteMany(ctx, muts); err == nil || ctx.Err() != nil || time.Since(since) > loadRetryFor {
						break
					}
					time.Sleep(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second))
				}
				if err != nil {
					loadErr.Store(err)
					return
				}
				loaded.Add(int64(len(muts)))
			}
		}()
	}
	wg.Wait()
	close(stopLoad)
	if err, _ := loadErr.Load().(error); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	for _, pin := range []map[string]bool{sc.Pin, variant.Pin} {
		for name, on := range pin {
			if err := cl.SetPolicy(ctx, name, on); err != nil {
				return nil, fmt.Errorf("pin policy %s=%v: %w", name, on, err)
			}
		}
	}
	if sc.Splits > 1 {
		progress("splitting the key space into %d ranges", sc.Splits)
		for i := 1; i < sc.Splits; i++ {
			if _, _, err := cl.Split(ctx, key(i*sc.Records/sc.Splits)); err != nil {
				return nil, fmt.Errorf("split: %w", err)
			}
		}
		for !benchutil.FullyReplicated(ctx, cl, sc.Nodes) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	progress("waiting for the engines to finish compacting the load")
	if err := c.settle(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	if opts.FastLoad {
		c.setUnthrottled(false)
	}
	if variant.PolicyOff {
		policyOn = false
	}
	if sc.Policy != "" {
		if err := cl.SetPolicy(ctx, sc.Policy, policyOn); err != nil {
			return nil, fmt.Errorf("set policy %s=%v: %w", sc.Policy, policyOn, err)
		}
	}
	c.engineDelta() // start the engines' counters from here

	// The measured workload: closed loop, Threads workers, keys chosen by the scenario's Workload
	// (zipfian over every key by default).
	wl := WorkloadOf(sc.Name)
	if reg, ok := Lookup(sc.Name); ok && reg.Duration > 0 && sc.Duration != reg.Duration {
		// The working set moves at the same place in the timeline as the events (--duration).
		wl.ShiftAt = time.Duration(float64(wl.ShiftAt) * float64(sc.Duration) / float64(reg.Duration))
	}
	rr := &RunReport{PolicyOn: policyOn}
	var (
		mu       sync.Mutex
		secHist  = benchutil.NewHist()
		allHist  = benchutil.NewHist()
		secOps   int64
		secErrs  int64
		totalOps int64
		totalErr int64
		errKinds = map[string]int64{}
		perSec   []*hdrhistogram.Snapshot // each second's latencies, for windows
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for w := 0; w < sc.Threads; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w)+1, uint64(start.UnixNano())))
			keys := wl.chooser(rng, sc.Records)
			for wctx.Err() == nil {
				t0 := time.Now()
				read := rng.Float64() < sc.ReadFraction
				k := key(keys.next(read, wl.ShiftAt > 0 && t0.Sub(start) >= wl.ShiftAt))
				var err error
				if read {
					_, _, err = cl.Get(wctx, k)
				} else {
					err = cl.Put(wctx, k, vals.next(rng))
				}
				lat := time.Since(t0)
				if wctx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil {
					secErrs++
					errKinds[errorKind(err, errKinds)]++
				} else {
					secOps++
					_ = secHist.RecordValue(benchutil.ClampUs(lat))
					_ = allHist.RecordValue(benchutil.ClampUs(lat))
				}
				mu.Unlock()
			}
		}(w)
	}

	// The periodic range aggregation, if any: one more client scanning the same rows, timed.
	var (
		scanMu  sync.Mutex
		scanSum time.Duration
		scanN   int
		scanErr int
	)
	if wl.ScanEvery > 0 && wl.ScanRows > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from, to := wl.scanSpan(sc.Records)
			t := time.NewTicker(wl.ScanEvery)
			defer t.Stop()
			for {
				select {
				case <-wctx.Done():
					return
				case <-t.C:
				}
				t0 := time.Now()
				kvs, err := cl.Scan(wctx, key(from), key(to), 0, false)
				d := time.Since(t0)
				if wctx.Err() != nil {
					return
				}
				scanMu.Lock()
				if err != nil || len(kvs) != to-from {
					scanErr++
				} else {
					scanSum += d
					scanN++
				}
				scanMu.Unlock()
			}
		}()
	}

	// Events fire on their own goroutine so a slow one (a restart) does not stall the sampler.
	evDone := make(chan struct{})
	var evMu sync.Mutex
	go func() {
		defer close(evDone)
		for _, e := range sc.Events {
			select {
			case <-wctx.Done():
				return
			case <-time.After(time.Until(start.Add(e.At))):
			}
			at := time.Since(start).Seconds()
			desc, err := e.Do(wctx, env)
			m := EventMark{T: at, EndT: time.Since(start).Seconds(), What: strings.TrimSpace(e.What + " " + desc), Label: e.What, Task: e.Task}
			if err != nil {
				m.Error = err.Error()
			}
			evMu.Lock()
			rr.Events = append(rr.Events, m)
			evMu.Unlock()
		}
	}()

	tick := time.NewTicker(time.Second)
	secs := int(sc.Duration / time.Second)
	if secs < 1 {
		secs = 1
	}
	for s := 1; s <= secs; s++ {
		select {
		case <-ctx.Done():
			tick.Stop()
			cancel()
			wg.Wait()
			return nil, ctx.Err()
		case <-tick.C:
		}
		mu.Lock()
		p := Point{T: float64(s), Ops: secOps, Errors: secErrs,
			P50Ms: benchutil.UsToMs(secHist.ValueAtQuantile(50)), P99Ms: benchutil.UsToMs(secHist.ValueAtQuantile(99))}
		totalOps += secOps
		totalErr += secErrs
		secOps, secErrs = 0, 0
		perSec = append(perSec, secHist.Export())
		secHist.Reset()
		mu.Unlock()
		scanMu.Lock()
		if scanN > 0 {
			ms := benchutil.UsToMs(scanSum.Microseconds()) / float64(scanN)
			p.ScanMs = &ms
		}
		p.ScanErrors = scanErr
		scanSum, scanN, scanErr = 0, 0, 0
		scanMu.Unlock()
		p.Leaders, p.Replicas = c.userReplicas()
		if c.device != nil {
			p.DiskOps, p.DiskReadOps, p.DiskWaitMs = c.deviceDelta()
		}
		h, m, eng := c.engineDelta()
		p.NodeHitRatio, p.Compactions, p.Flushes, p.Compacting = eng.hitRatio, eng.compactions, eng.flushes, eng.compacting
		p.NodeServedHitRatio, p.NodeStreamBytes = eng.servedHitRatio, eng.streamBytes
		if h+m > 0 {
			r := float64(h) / float64(h+m)
			p.HitRatio = &r
		}
		rr.Series = append(rr.Series, p)
		progress("%s", benchutil.Bar(float64(s)/float64(secs), fmt.Sprintf("%2ds/%ds %6d ops/s p99 %.1fms", s, secs, p.Ops, p.P99Ms)))
	}
	tick.Stop()
	cancel()
	wg.Wait()
	<-evDone
	elapsed := float64(secs)
	if len(errKinds) == 0 {
		errKinds = nil
	}
	rr.Summary = Summary{Ops: totalOps, Throughput: float64(totalOps) / elapsed, Errors: totalErr, ErrorKinds: errKinds,
		P50Ms: benchutil.UsToMs(allHist.ValueAtQuantile(50)), P99Ms: benchutil.UsToMs(allHist.ValueAtQuantile(99))}
	if rr.Events == nil {
		rr.Events = []EventMark{}
	}
	rr.Task = taskWindow(rr, perSec, sc.Warmup)
	rr.Join = joinReport(rr, perSec, sc.Warmup, sc.Nodes)
	if device != nil {
		st := c.deviceStats()
		rr.Device = &st
	}
	rr.Compactions = c.compactions(start)
	if names := pinnedOn(variant.Pin); len(names) > 0 {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var derr error
		rr.Decisions, derr = pinnedDecisions(dctx, &Env{Client: cl}, start, names)
		cancel()
		if derr != nil && opts.Progress != nil { // the run's measures stand without them
			fmt.Fprintf(opts.Progress, "%s: the decisions of %s are missing from the report: %v\n", label, strings.Join(names, ", "), derr)
		}
	}
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "\r\033[K%s: %d ops, %.0f ops/s, p50 %.2fms, p99 %.2fms, %d errors%s\n", label,
			rr.Summary.Ops, rr.Summary.Throughput, rr.Summary.P50Ms, rr.Summary.P99Ms, rr.Summary.Errors, errorKindsText(errKinds))
		if w := rr.Task; w != nil {
			fmt.Fprintf(opts.Progress, "%s: task %.1fs-%.1fs: throughput %.0f vs %.0f ops/s steady (%.1f%%), p99 %.2f vs %.2f ms (%.2fx)\n",
				label, w.StartS, w.EndS, w.TaskThroughput, w.SteadyThroughput, 100*w.ThroughputRatio, w.TaskP99Ms, w.SteadyP99Ms, w.P99Ratio)
		}
		for _, e := range rr.Events {
			fmt.Fprintf(opts.Progress, "%s: event at %.1fs: %s %s\n", label, e.T, e.What, e.Error)
		}
		if j := rr.Join; j != nil {
			fmt.Fprintf(opts.Progress, "%s: join %.1fs, first range served after %.1fs, full leader share after %.0fs, worst %ds dip %+.1f%% of %.0f ops/s, "+
				"%d windows over p99 %.1fms (%.1fx steady), excess %.0fms, after/before %.2f\n", label, j.JoinS, j.FirstServedS,
				j.FullShareS, dipWindow, 100*j.WorstDip, j.PreJoinThroughput, j.ViolatingWindows, j.SLOThresholdMs, j.SLOFactor, j.ExcessMs, j.PostJoinRatio)
			for _, o := range j.OldNodes {
				fmt.Fprintf(opts.Progress, "%s: n%d: own reads' hit ratio %.3f before, %.3f during, %.3f after the join; compacting %d of the %d s before, %d s during\n",
					label, o.Node, o.ServedHitBefore, o.ServedHitDuring, o.ServedHitAfter, o.CompactingBeforeS, preJoinS, o.CompactingDuringS)
			}
		}
	}
	return rr, nil
}

// taskWindow measures the first Task event's window against the steady state before it: mean
// throughput and the p99 of all latencies in each. A second counts in a window when its midpoint lies
// in it.
func taskWindow(rr *RunReport, perSec []*hdrhistogram.Snapshot, warmup time.Duration) *TaskWindow {
	var ev *EventMark
	for i := range rr.Events {
		if rr.Events[i].Task && rr.Events[i].Error == "" {
			ev = &rr.Events[i]
			break
		}
	}
	if ev == nil {
		return nil
	}
	measure := func(from, to float64) (float64, float64) {
		tput, p99, n := window(rr.Series, perSec, from, to)
		if n == 0 {
			return math.NaN(), math.NaN()
		}
		return tput, p99
	}
	end := ev.EndT
	if end-ev.T < 1 {
		end = ev.T + 1 // at least one second
	}
	w := &TaskWindow{StartS: ev.T, EndS: ev.EndT, DurationS: ev.EndT - ev.T}
	w.SteadyThroughput, w.SteadyP99Ms = measure(warmup.Seconds(), ev.T)
	w.TaskThroughput, w.TaskP99Ms = measure(ev.T, end)
	if w.SteadyThroughput > 0 {
		w.ThroughputRatio = w.TaskThroughput / w.SteadyThroughput
	}
	if w.SteadyP99Ms > 0 {
		w.P99Ratio = w.TaskP99Ms / w.SteadyP99Ms
	}
	if math.IsNaN(w.ThroughputRatio) || math.IsNaN(w.P99Ratio) {
		return nil
	}
	return w
}

// window is the mean throughput and the p99 of all latencies of the seconds whose midpoint lies in
// [from, to], and how many seconds those are.
func window(series []Point, perSec []*hdrhistogram.Snapshot, from, to float64) (tput, p99Ms float64, n int) {
	h := benchutil.NewHist()
	var ops int64
	for i, p := range series {
		if mid := p.T - 0.5; mid >= from && mid <= to && i < len(perSec) {
			ops += p.Ops
			n++
			h.Merge(hdrhistogram.Import(perSec[i]))
		}
	}
	if n == 0 {
		return 0, 0, 0
	}
	return float64(ops) / float64(n), benchutil.UsToMs(h.ValueAtQuantile(99)), n
}

// KeyDist is how a workload's operations pick their keys.
type KeyDist int

const (
	// Zipfian picks key ranks with Go's rand.Zipf (s = 1.1), scattered over the key space so that
	// hot keys are not adjacent (YCSB's hot set, the default).
	Zipfian KeyDist = iota
	// Uniform picks every key with the same probability.
	Uniform
)

func (d KeyDist) String() string {
	if d == Uniform {
		return "uniform"
	}
	return "zipfian"
}

// Workload is how a scenario's measured operations choose their keys, registered by scenario name
// with SetWorkload (a scenario without one gets the zero value: zipfian over every key, reads and
// overwrites of the same keys).
type Workload struct {
	Keys KeyDist
	// DisjointWrites splits the keys: every fifth one (index % 5 == 4) is only ever written, the
	// others only read, each set with its own distribution of Keys (the journal's 80/20 workload
	// with disjoint read and write keys, so that writes do not warm the cache for reads).
	DisjointWrites bool
	// ShiftAt, when positive, moves the working set at this offset of the run: from then on every
	// rank maps to another key (half the key set away), so the hot keys change. It scales with
	// --duration like the events.
	ShiftAt time.Duration
	// ScanEvery, with ScanRows, adds one client that scans the same ScanRows consecutive keys (in
	// the middle of the key space: a range aggregation) every ScanEvery; each second of the series
	// records the mean time of the scans that ended in it (Point.ScanMs).
	ScanEvery time.Duration
	ScanRows  int
}

var (
	workloadMu sync.Mutex
	workloads  = map[string]Workload{}
)

// SetWorkload sets the workload of the scenario named name (call it next to Register).
func SetWorkload(name string, w Workload) {
	workloadMu.Lock()
	defer workloadMu.Unlock()
	workloads[name] = w
}

// WorkloadOf returns the workload of the scenario named name (the zero value when none was set).
func WorkloadOf(name string) Workload {
	workloadMu.Lock()
	defer workloadMu.Unlock()
	return workloads[name]
}

// scanSpan is the rows [from, to) the aggregation scans: ScanRows keys starting 5/12 into the key
// space (inside a range when the scenario pre-splits into 2, 3, 4 or 6 ranges).
func (w Workload) scanSpan(records int) (from, to int) {
	from = records * 5 / 12
	return from, min(from+w.ScanRows, records)
}

// keyChooser picks the keys of one worker.
type keyChooser struct {
	w                    Workload
	rng                  *rand.Rand
	records              int
	nRead, nWrite        int // sizes of the read and write key sets (both records without DisjointWrites)
	zipfRead, zipfWrites *rand.Zipf
}

func (w Workload) chooser(rng *rand.Rand, records int) *keyChooser {
	k := &keyChooser{w: w, rng: rng, records: records, nRead: records, nWrite: records}
	if w.DisjointWrites {
		k.nWrite = records / 5
		k.nRead = records - k.nWrite
	}
	if w.Keys == Zipfian {
		k.zipfRead = rand.NewZipf(rng, 1.1, 1, uint64(max(k.nRead-1, 1)))
		k.zipfWrites = k.zipfRead
		if w.DisjointWrites {
			k.zipfWrites = rand.NewZipf(rng, 1.1, 1, uint64(max(k.nWrite-1, 1)))
		}
	}
	return k
}

// next returns the index of the key of the next operation, a read or a write; shifted says whether
// the working set has moved.
func (k *keyChooser) next(read, shifted bool) int {
	n, z := k.nRead, k.zipfRead
	if !read {
		n, z = k.nWrite, k.zipfWrites
	}
	if n <= 0 {
		return 0
	}
	var i uint64
	if z != nil {
		// Scatter the zipfian ranks over the key set so hot keys are not adjacent.
		i = (z.Uint64() * 2654435761) % uint64(n)
	} else {
		i = k.rng.Uint64N(uint64(n))
	}
	if shifted {
		i = (i + uint64(n)/2) % uint64(n)
	}
	if !k.w.DisjointWrites {
		return int(i)
	}
	if read { // the read set is every index except each fifth
		return int(i/4*5 + i%4)
	}
	return min(int(i*5+4), k.records-1)
}

// pinnedOn lists the policies pin switches on, sorted.
func pinnedOn(pin map[string]bool) []string {
	var out []string
	for name, on := range pin {
		if on {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// pinnedDecisions returns the decisions of the named policies since start, in seconds of the run.
func pinnedDecisions(ctx context.Context, env *Env, start time.Time, names []string) ([]JoinStep, error) {
	ds, err := decisionsSince(ctx, env, start)
	if err != nil {
		return nil, err
	}
	var out []JoinStep
	for _, d := range ds {
		if slices.Contains(names, d.Policy) {
			out = append(out, stepOf(d, start))
		}
	}
	return out, nil
}

// stepOf is a decision-log entry in seconds of the run.
func stepOf(d decisions.Entry, start time.Time) JoinStep {
	return JoinStep{AtS: round1(d.Time.Sub(start).Seconds()), Policy: d.Policy, Operator: d.Operator,
		Range: d.Range, Reason: d.Reason, Status: d.Status, Notes: d.Notes, Steps: d.Steps}
}
