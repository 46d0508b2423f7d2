package scenario

import (
	"context"
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
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/bench/report"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Options override a scenario's settings for one invocation; zero fields keep the scenario's.
type Options struct {
	Dir      string // data directories (required)
	Out      string // report.json and PNGs (required)
	Duration time.Duration
	Records  int
	Threads  int
	// Rate, when set, paces the workload at this many operations a second after the warm-up
	// instead of the scenario's fraction of its measured throughput.
	Rate float64
	// Splits overrides the scenario's pre-split into equal ranges.
	Splits int
	// SurgeThreads overrides the client threads a surge adds; an error for a scenario without one.
	SurgeThreads int
	// CacheBytes is each node's block cache.
	CacheBytes int64
	// Device overrides the scenario's emulated disk per node; NoEmulatedDisk turns emulated disks off.
	Device         *emudisk.Options
	NoEmulatedDisk bool
	// Variants, when set, runs only the scenario's variants of these names, in the scenario's order;
	// a name the scenario lacks is an error.
	Variants []string
	// TogglePairs, ToggleWindow and ToggleSkip override a Toggle's schedule; with pairs and window
	// set the duration follows from them.
	TogglePairs              int
	ToggleWindow, ToggleSkip time.Duration
	// Hosts, when set, runs the scenario against the running cluster at these gRPC addresses
	// instead of in-process nodes: once, as its first variant, the nodes' settings their own.
	Hosts []string
	// Reverse runs the variants (or the policy on/off pair) in the opposite order.
	Reverse bool
	// Progress receives a progress bar, one update per second; nil for none.
	Progress io.Writer
}

// EffectiveDevice is the emulated disk each node gets for sc under opts, or nil for none.
func EffectiveDevice(sc Scenario, opts Options) *emudisk.Options {
	d := &DefaultDevice
	switch {
	case opts.NoEmulatedDisk || len(opts.Hosts) > 0:
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
	return &c
}

// Settings are the effective settings of a report.
type Settings struct {
	Nodes     int     `json:"nodes"`
	Records   int     `json:"records"`
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
	Threads   int     `json:"threads"`
	// Pace and OfferedOps: the fraction of the warm-up's throughput offered after it, and the rate
	// that made (the first run's measure, or --rate); 0 for a closed loop.
	Pace         float64  `json:"pace,omitempty"`
	OfferedOps   float64  `json:"offered_ops_per_s,omitempty"`
	Splits       int      `json:"splits,omitempty"`
	ValueBytes   int      `json:"value_bytes"`
	ReadFraction float64  `json:"read_fraction"`
	CacheBytes   int64    `json:"cache_bytes"`
	SurgeThreads int      `json:"surge_threads,omitempty"`
	Toggle       *Toggle  `json:"toggle,omitempty"`
	Hosts        []string `json:"hosts,omitempty"`
	// Store is the engines' LSM shape (null with Hosts: the nodes' own).
	Store *StoreShape `json:"store"`
	// Device is each node's emulated disk; null when the nodes share the machine's disk and page cache.
	Device *emudisk.Options `json:"device"`
}

// A run's seconds, events and checks are the shared report format's, which the simulator writes too.
type (
	Summary    = report.Summary
	Point      = report.Point
	EventMark  = report.EventMark
	NodeSecond = report.NodeSecond
	Check      = report.Check
	Steady     = report.Steady
	Spread     = report.Spread
	JoinReport = report.JoinReport
	JoinStep   = report.JoinStep
)

// RunReport is one run: a variant, or the policy on or off.
type RunReport struct {
	PolicyOn bool   `json:"policy_on"`
	Variant  string `json:"variant,omitempty"`
	// OffsetS is how far the events after the warm-up were moved (Scenario.Offsets).
	OffsetS float64 `json:"offset_s,omitempty"`
	// LevelBytes is n1's bytes per LSM level, L0 first, once the load had settled.
	LevelBytes []int64     `json:"level_bytes,omitempty"`
	Validity   *Validity   `json:"validity"`
	Summary    Summary     `json:"summary"`
	Series     []Point     `json:"series"`
	Events     []EventMark `json:"events"`
	// Device sums the emulated disks' counters over the nodes for the whole run (load included).
	Device *emudisk.Stats `json:"device,omitempty"`
	// Task, Join, ReadHints and Move are the run's scores (Scenario.Score).
	Task      *TaskWindow   `json:"task,omitempty"`
	Join      *JoinReport   `json:"join,omitempty"`
	ReadHints *ReadHintsRun `json:"read_hints,omitempty"`
	Move      *MoveReport   `json:"move,omitempty"`
	// Capacity is a paced run's closed-loop throughput before and after its event (Scenario.Probe).
	Capacity *Capacity `json:"capacity,omitempty"`
	// Decisions are the autopilot's decisions proposed during the measured workload, at their time
	// from its start: what the simulator's calibration compares its own with.
	Decisions []report.Decision `json:"decisions,omitempty"`
}

// Label names the run across repetitions: its variant, or policy=on/off.
func (r RunReport) Label() string {
	if r.Variant != "" {
		return r.Variant
	}
	return "policy=" + onOff(r.PolicyOn)
}

// name is the label with the run's offset, for a report's lines.
func (r RunReport) name() string {
	if r.OffsetS > 0 {
		return fmt.Sprintf("%s +%.0fs", r.Label(), r.OffsetS)
	}
	return r.Label()
}

// Report is what report.json holds.
type Report struct {
	Scenario string      `json:"scenario"`
	Policy   string      `json:"policy"`
	Settings Settings    `json:"settings"`
	Runs     []RunReport `json:"runs"`
	// Checks judge the runs together; Tasks sum up each label's task windows over its runs.
	Checks []Check      `json:"checks"`
	Tasks  []TaskSpread `json:"tasks,omitempty"`
	Plots  []string     `json:"plots"`
}

// Run runs sc once per variant (or with its policy on, then off) and offset, each on a fresh
// cluster, and writes report.json and the PNG timelines into opts.Out. When a validity check fails
// it returns the report and an error that wraps ErrInvalid.
func Run(ctx context.Context, sc Scenario, opts Options) (*Report, error) {
	sc, err := resolve(sc, opts)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	cache := opts.CacheBytes
	if cache <= 0 {
		cache = sc.CacheBytes
	}
	rep := &Report{Scenario: sc.Name, Policy: sc.Policy, Settings: Settings{
		Nodes: sc.Nodes, Records: sc.Records, DurationS: sc.Duration.Seconds(), WarmupS: sc.Warmup.Seconds(), Threads: sc.Threads,
		Splits: sc.Splits, ValueBytes: sc.ValueBytes, ReadFraction: sc.ReadFraction, CacheBytes: cache,
		Toggle: sc.Toggle, Hosts: opts.Hosts, Device: EffectiveDevice(sc, opts), Pace: sc.Pace, OfferedOps: opts.Rate,
	}}
	if len(opts.Hosts) == 0 {
		shape := shapeFor(memTableFor(cache), sc.RandomValues, rep.Settings.Device != nil)
		rep.Settings.Store = &shape
	}
	if sc.Surge != nil {
		rep.Settings.SurgeThreads = sc.Surge.Threads
	}
	runs := sc.Variants
	if len(runs) == 0 {
		runs = []Variant{{Name: ""}, {Name: "", PolicyOff: true}}
	}
	if opts.Reverse {
		runs = slices.Clone(runs)
		slices.Reverse(runs)
	}
	if len(opts.Hosts) > 0 {
		runs = runs[:1]
	}
	offsets := sc.Offsets
	if len(offsets) == 0 || len(opts.Hosts) > 0 {
		offsets = []time.Duration{0}
	}
	total := len(runs) * len(offsets)
	for _, off := range offsets {
		for _, v := range runs {
			name := v.Name
			if name == "" {
				name = "policy-" + onOff(!v.PolicyOff)
			}
			if off > 0 {
				name += fmt.Sprintf("-plus%ds", int(off.Seconds()))
			}
			r := &run{sc: shifted(sc, off), opts: opts, v: v, settings: rep.Settings, dir: filepath.Join(opts.Dir, name),
				label: fmt.Sprintf("run %d/%d %s", len(rep.Runs)+1, total, name), offered: &rep.Settings.OfferedOps}
			rr, err := r.run(ctx)
			if err != nil {
				return nil, fmt.Errorf("run %s: %w", name, err)
			}
			rr.OffsetS = off.Seconds()
			rep.Runs = append(rep.Runs, *rr)
		}
		slices.Reverse(runs) // the next offset runs them in the other order: a drift favours none
	}
	rep.Checks, rep.Tasks = []Check{agreementCheck(rep.Runs)}, taskSpreads(rep.Runs)
	if rep.Plots, err = writePlots(rep, opts.Out); err != nil {
		return nil, err
	}
	if err := benchutil.WriteJSON(filepath.Join(opts.Out, "report.json"), rep); err != nil {
		return nil, err
	}
	printReport(opts.Progress, rep)
	if bad := failures(rep); len(bad) > 0 {
		return rep, fmt.Errorf("scenario %s: %w (%d): %s", sc.Name, ErrInvalid, len(bad), strings.Join(bad, "; "))
	}
	return rep, nil
}

// shifted is sc with its events after the warm-up moved by off.
func shifted(sc Scenario, off time.Duration) Scenario {
	sc.Events = slices.Clone(sc.Events)
	for i := range sc.Events {
		if sc.Events[i].At >= sc.Warmup && off > 0 {
			sc.Events[i].At += off
		}
	}
	return sc
}

// Repeat runs sc n times, repetition k into opts.Out/rep-k (its own report.json and plots) with the
// order of its runs reversed in every other repetition (so that a drift of the machine over the
// invocation favours neither). It returns the reports and their paths, for package analysis, and
// when a repetition failed a validity check an error that wraps ErrInvalid.
func Repeat(ctx context.Context, sc Scenario, opts Options, n int) ([]*Report, []string, error) {
	if n < 2 {
		return nil, nil, fmt.Errorf("repeat: %d repetitions; at least 2 make a spread", n)
	}
	var reps []*Report
	var paths []string
	var invalid []error
	for k := 1; k <= n; k++ {
		o := opts
		o.Out, o.Dir, o.Reverse = filepath.Join(opts.Out, fmt.Sprintf("rep-%d", k)), filepath.Join(opts.Dir, fmt.Sprintf("rep-%d", k)), k%2 == 0
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "repetition %d/%d of %s\n", k, n, sc.Name)
		}
		rep, err := Run(ctx, sc, o)
		if errors.Is(err, ErrInvalid) {
			invalid = append(invalid, fmt.Errorf("repetition %d/%d: %w", k, n, err))
		} else if err != nil {
			return nil, nil, fmt.Errorf("repetition %d/%d: %w", k, n, err)
		}
		// The nodes' data of a finished repetition is not needed again: keep the disk from filling.
		if err := os.RemoveAll(o.Dir); err != nil {
			return nil, nil, err
		}
		reps, paths = append(reps, rep), append(paths, filepath.Join(o.Out, "report.json"))
	}
	return reps, paths, errors.Join(invalid...)
}

// resolve applies opts to sc and fills in the defaults.
func resolve(sc Scenario, opts Options) (Scenario, error) {
	switch {
	case opts.Dir == "" || opts.Out == "":
		return sc, fmt.Errorf("Dir and Out are required")
	case opts.Rate < 0 || math.IsNaN(opts.Rate) || math.IsInf(opts.Rate, 0):
		return sc, fmt.Errorf("--rate %v: want a positive number of operations a second", opts.Rate)
	case opts.SurgeThreads < 0:
		return sc, fmt.Errorf("--surge-threads %d: want a positive number of client threads", opts.SurgeThreads)
	case opts.SurgeThreads > 0 && sc.Surge == nil:
		return sc, fmt.Errorf("it has no load surge: --surge-threads applies to join-surge")
	case (opts.TogglePairs != 0 || opts.ToggleWindow != 0 || opts.ToggleSkip != 0) && sc.Toggle == nil:
		return sc, fmt.Errorf("--pairs, --window and --skip apply to a scenario that toggles its policy (read-hints-overhead)")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	for _, o := range []struct {
		v *int
		o int
	}{{&sc.Threads, opts.Threads}, {&sc.Records, opts.Records}, {&sc.Splits, opts.Splits}} {
		if o.o > 0 {
			*o.v = o.o
		}
	}
	def(&sc.Nodes, 3)
	def(&sc.Threads, 8)
	def(&sc.ValueBytes, 256)
	def(&sc.Records, 1000)
	if len(opts.Hosts) > 0 {
		sc.Nodes = len(opts.Hosts)
	}
	if sc.CacheBytes <= 0 {
		sc.CacheBytes = 8 << 20
	}
	if sc.Warmup <= 0 {
		sc.Warmup = 5 * time.Second
	}
	if sc.Surge != nil && opts.SurgeThreads > 0 {
		s := *sc.Surge
		s.Threads = opts.SurgeThreads
		sc.Surge = &s
	}
	if opts.Duration > 0 && sc.Duration > 0 && opts.Duration != sc.Duration {
		// Events keep their place in the timeline: offsets scale with the duration.
		f := float64(opts.Duration) / float64(sc.Duration)
		sc.Events = slices.Clone(sc.Events)
		for i := range sc.Events {
			sc.Events[i].At = time.Duration(float64(sc.Events[i].At) * f)
		}
		sc.Offsets = slices.Clone(sc.Offsets)
		for i := range sc.Offsets {
			sc.Offsets[i] = time.Duration(float64(sc.Offsets[i]) * f)
		}
		sc.Warmup = time.Duration(float64(sc.Warmup) * f)
		sc.Probe = time.Duration(float64(sc.Probe) * f)
		if sc.Surge != nil {
			s := *sc.Surge
			s.LearnFor = time.Duration(float64(s.LearnFor) * f)
			sc.Surge = &s
		}
		sc.Duration = opts.Duration
	}
	if sc.Duration <= 0 {
		sc.Duration = 10 * time.Second
	}
	if sc.Toggle != nil {
		toggleSchedule(&sc, opts)
	}
	vs, err := selectVariants(sc.Variants, opts.Variants)
	sc.Variants = vs
	return sc, err
}

// toggleSchedule fits the toggle into the run and adds its switches to the events: the window and
// skip of opts or the scenario, as many pairs as fit after the warm-up (at least one: a short run
// gets shorter windows); with pairs and window both given, the run lasts as long as they need.
func toggleSchedule(sc *Scenario, opts Options) {
	t := *sc.Toggle
	if opts.ToggleWindow > 0 {
		t.Window = opts.ToggleWindow
	}
	if opts.ToggleSkip > 0 {
		t.Skip = opts.ToggleSkip
	}
	if opts.TogglePairs > 0 {
		t.Pairs = opts.TogglePairs
	}
	span := sc.Duration - sc.Warmup
	switch {
	case opts.TogglePairs > 0 && opts.ToggleWindow > 0:
		sc.Duration = sc.Warmup + 2*time.Duration(t.Pairs)*t.Window
	case opts.TogglePairs > 0:
		t.Window = span / time.Duration(2*t.Pairs)
	default:
		t.Pairs = max(1, int(span/(2*t.Window)))
		t.Window = span / time.Duration(2*t.Pairs)
	}
	t.Skip = min(t.Skip, t.Window/2)
	sc.Toggle, sc.Events = &t, slices.Clone(sc.Events)
	for k := 0; k < t.Pairs; k++ {
		for h := 0; h < 2; h++ {
			do := PolicyOff
			if (h == 0) == (k%2 == 0) {
				do = PolicyOn
			}
			sc.Events = append(sc.Events, Event{At: sc.Warmup + time.Duration(2*k+h)*t.Window, Do: do})
		}
	}
}

// selectVariants keeps the variants named in want (all but the optional ones when want is empty), in
// the scenario's order.
func selectVariants(all []Variant, want []string) ([]Variant, error) {
	if len(want) > 0 && len(all) == 0 {
		return nil, fmt.Errorf("--variants: the scenario has no variants (it runs its policy on and off)")
	}
	var out []Variant
	var names []string
	for _, v := range all {
		names = append(names, v.Name)
		if len(want) == 0 && !v.Optional || slices.Contains(want, v.Name) {
			out = append(out, v)
		}
	}
	var unknown []string
	for _, w := range want {
		if !slices.Contains(names, w) {
			unknown = append(unknown, w)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("--variants: unknown %s (the scenario has %s)", strings.Join(unknown, ", "), strings.Join(names, ", "))
	}
	return out, nil
}

func key(i int) []byte { return fmt.Appendf(nil, "user%09d", i) }

// run is one run of a scenario: a fresh cluster, the load, the measured workload and its scores.
type run struct {
	sc       Scenario
	opts     Options
	v        Variant
	settings Settings
	dir      string
	label    string
	// offered is the report's paced rate: 0 until the first paced run has measured it.
	offered *float64
}

func (r *run) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, "\r\033[K%s: "+format, append([]any{r.label}, args...)...)
	}
}

// env is what a run's events act on.
type env struct {
	sc      Scenario
	c       *cluster
	cl      *client.Client
	dir     string
	cfg     benchutil.NodeConfig
	value   []byte // every value written without RandomValues: one fixed pattern of letters, which compresses well
	clients *benchutil.Clients
	start   time.Time
	killed  []int
	join    *joinTrace
	busy    uint64 // the node a background task ran on (CompactBusiest, BackupBusiest)
	move    *MoveReport

	mu     sync.Mutex
	perSec []*hdrhistogram.Histogram // each finished second's latencies
}

// userReplicas gives, per node (n1 first), the user ranges it leads and the user replicas it holds.
func (e *env) userReplicas() (leaders, replicas []int) {
	if !e.c.local() {
		return nil, nil
	}
	for _, n := range e.c.Nodes() {
		l, r := userReplicas(n)
		leaders, replicas = append(leaders, l), append(replicas, r)
	}
	return leaders, replicas
}

func (r *run) run(ctx context.Context) (*RunReport, error) {
	sc := r.sc
	e := &env{sc: sc, dir: r.dir, c: &cluster{hosts: r.opts.Hosts}, value: make([]byte, sc.ValueBytes)}
	for i := range e.value {
		e.value[i] = byte('a' + i%26)
	}
	if len(r.opts.Hosts) == 0 {
		r.progress("starting %d nodes", sc.Nodes)
		spec := benchutil.NodeSpec{CacheBytes: r.settings.CacheBytes, MemTableBytes: r.settings.Store.MemTableBytes,
			Device: r.settings.Device,
			Config: benchutil.NodeConfig{KV: kv.Config{QueueInterval: 500 * time.Millisecond}, HeartbeatInterval: 500 * time.Millisecond}}
		spec.Config.Storage.LBaseMaxBytes, spec.Config.Storage.TargetFileBytes = r.settings.Store.LBaseMaxBytes, r.settings.Store.TargetFileBytes
		shape := *r.settings.Store
		spec.PerNode = func(i int, s *benchutil.NodeSpec) { s.MemTableBytes = shape.memTableOf(i) }
		for _, tweak := range []func(*benchutil.NodeConfig){sc.KV, r.v.KV} {
			if tweak != nil {
				tweak(&spec.Config)
			}
		}
		e.cfg = spec.Config
		bc, err := benchutil.StartCluster(ctx, r.dir, sc.Nodes, spec)
		if err != nil {
			return nil, err
		}
		defer bc.Stop()
		e.c.Cluster = bc
		e.c.setUnthrottled(r.settings.Store.FastLoad)
	}
	cl, err := client.New(ctx, client.Config{Addrs: e.c.addrs(), RequestTimeout: 2 * time.Second, MaxAttempts: 20})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	e.cl = cl
	if err := r.load(ctx, e); err != nil {
		return nil, err
	}
	if err := r.prepare(ctx, e); err != nil {
		return nil, err
	}
	levels := e.c.levelBytes()
	rr, err := r.measure(ctx, e)
	if err != nil {
		return nil, err
	}
	rr.LevelBytes = levels
	r.score(ctx, rr, e)
	r.print(rr)
	return rr, nil
}

// replicationFactor is the replicate policy's default: the voters of every range once the cluster
// has at least as many nodes.
const replicationFactor = 3

// load waits for full replication, pins the other policies and loads the records.
func (r *run) load(ctx context.Context, e *env) error {
	sc := r.sc
	want := min(sc.Nodes, replicationFactor)
	r.progress("waiting for %d-way replication", want)
	if err := benchutil.WaitFor(ctx, 90*time.Second, func() bool { return benchutil.FullyReplicated(ctx, e.cl, want) }); err != nil {
		return fmt.Errorf("cluster not fully replicated: %w", err)
	}
	for name, on := range sc.Pin {
		if err := e.cl.SetPolicy(ctx, name, on); err != nil {
			return fmt.Errorf("pin policy %s=%v: %w", name, on, err)
		}
	}
	_, err := benchutil.Load{Records: sc.Records, Batch: 64, Writers: sc.Threads, Key: key, Values: func(w int) func() []byte { return e.values(w, 'l') },
		Progress: func(n int) {
			r.progress("loading %s", benchutil.Bar(float64(n)/float64(sc.Records), fmt.Sprintf("%d/%d records", n, sc.Records)))
		}}.Run(ctx, e.cl)
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	return nil
}

// values returns worker w's source of values: e.value, or with RandomValues random ones, a stream
// per worker and purpose.
func (e *env) values(w int, purpose byte) func() []byte {
	if !e.sc.RandomValues {
		return func() []byte { return e.value }
	}
	rng := rand.NewChaCha8([32]byte{byte(w), byte(w >> 8), purpose})
	return func() []byte {
		v := make([]byte, e.sc.ValueBytes)
		_, _ = rng.Read(v)
		return v
	}
}

// prepare pre-splits, waits for the engines to settle and sets the policy.
func (r *run) prepare(ctx context.Context, e *env) error {
	sc := r.sc
	if sc.Splits > 1 {
		r.progress("splitting the key space into %d ranges", sc.Splits)
		for i := 1; i < sc.Splits; i++ {
			if _, _, err := e.cl.Split(ctx, key(i*sc.Records/sc.Splits)); err != nil {
				return fmt.Errorf("split: %w", err)
			}
		}
		if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, e.cl, min(sc.Nodes, replicationFactor)) }); err != nil {
			return fmt.Errorf("ranges not fully replicated after the split: %w", err)
		}
	}
	// A bulk load leaves its data in L0 in a few wide sublevels (each writer's keys are contiguous),
	// which Pebble's L0 trigger, counting overlapping sublevels, leaves alone: reads then search
	// hundreds of L0 tables until the scenario's full compaction clears them, and that compaction
	// seems to speed the store up. A real store holds most of its data in the bottom level, where a
	// bulk load's ingest would place it: compact the load there.
	r.progress("compacting the load into the bottom level")
	if err := e.c.compactAll(ctx); err != nil {
		return err
	}
	r.progress("waiting for the engines to finish compacting the load")
	if err := e.c.settle(ctx, e.cl, 2*time.Minute); err != nil {
		return err
	}
	e.c.setUnthrottled(false)
	if sc.Policy != "" {
		if err := e.cl.SetPolicy(ctx, sc.Policy, !r.v.PolicyOff); err != nil {
			return fmt.Errorf("set policy %s: %w", sc.Policy, err)
		}
	}
	return nil
}

// measure runs the closed-loop workload with the events and samples every second.
func (r *run) measure(ctx context.Context, e *env) (*RunReport, error) {
	sc := r.sc
	rr := &RunReport{PolicyOn: !r.v.PolicyOff, Variant: r.v.Name, Events: []EventMark{}}
	hints := sc.Score == ScoreReadHints
	e.c.sample(hints) // the nodes' counters from here
	e.start = time.Now()
	seed := uint64(e.start.UnixNano())
	pace := &pacer{} // closed loop through the warm-up
	e.clients = benchutil.StartPacedClients(ctx, sc.Threads, pace.wait, func(w int) func(context.Context) error {
		rng := rand.New(rand.NewPCG(uint64(w)+1, seed))
		zipf := rand.NewZipf(rng, 1.1, 1, uint64(max(sc.Records-1, 1)))
		value := e.values(w, 'w')
		return func(ctx context.Context) error {
			// Zipfian ranks scattered over the key space, so that hot keys are not adjacent.
			k := key(int((zipf.Uint64() * 2654435761) % uint64(sc.Records)))
			if rng.Float64() < sc.ReadFraction {
				_, _, err := e.cl.Get(ctx, k)
				return err
			}
			return e.cl.Put(ctx, k, value())
		}
	})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	evDone := fireEvents(wctx, e, &rr.Events)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	secs := max(int(sc.Duration/time.Second), 1)
	cpu := benchutil.NewCPUMeter()
	for s := 1; s <= secs; s++ {
		select {
		case <-ctx.Done():
			e.clients.Stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
		sec := e.clients.Second()
		e.mu.Lock()
		e.perSec = append(e.perSec, sec.Hist)
		e.mu.Unlock()
		p := Point{T: float64(s), Ops: sec.Ops, Errors: sec.Errors, P50Ms: report.Quantile(sec.Hist, 50), P99Ms: report.Quantile(sec.Hist, 99),
			Nodes: e.c.sample(hints)}
		p.CPU, p.Steal = cpu.Second()
		p.HitRatio = report.ClusterHitRatio(p.Nodes)
		rr.Series = append(rr.Series, p)
		paced := sc.Pace > 0 || r.opts.Rate > 0
		if paced && s == max(int(sc.Warmup/time.Second), 1) {
			if *r.offered == 0 {
				*r.offered = paceRate(sc, r.opts, rr.Series)
			}
			pace.setRate(*r.offered)
		}
		if paced && sc.Probe > 0 && s == int(sc.Probe/time.Second) {
			pace.setRate(0) // the capacity probe: closed loop to the end
		}
		r.progress("%s", benchutil.Bar(float64(s)/float64(secs), fmt.Sprintf("%2ds/%ds %6d ops/s p99 %.1fms", s, secs, p.Ops, p.P99Ms)))
	}
	cancel()
	e.clients.Stop()
	<-evDone
	rr.Decisions = runDecisions(e)
	all, _ := e.clients.Phase()
	var ops int64
	for _, p := range rr.Series {
		ops += p.Ops
	}
	errs, kinds, _ := e.clients.Errors()
	rr.Summary = Summary{Ops: ops, Throughput: float64(ops) / float64(secs), Errors: errs, ErrorKinds: kinds,
		P50Ms: report.Quantile(all, 50), P99Ms: report.Quantile(all, 99)}
	if r.settings.Device != nil {
		st := e.c.deviceStats()
		rr.Device = &st
	}
	return rr, nil
}

// fireEvents fires the scenario's events at their offsets from the workload's start, each marked in
// *marks, on a goroutine of its own so that a slow one (a restart) does not stall the sampler; the
// channel closes when the last has returned or ctx ends. *marks is the goroutine's until then.
func fireEvents(ctx context.Context, e *env, marks *[]EventMark) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, ev := range e.sc.Events {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(e.start.Add(ev.At))):
			}
			at := time.Since(e.start).Seconds()
			desc, err := actions[ev.Do].do(ctx, e)
			m := EventMark{T: at, EndT: time.Since(e.start).Seconds(), What: strings.TrimSpace(string(ev.Do) + " " + desc), Label: string(ev.Do), Task: actions[ev.Do].task}
			if err != nil {
				m.Error = err.Error()
			}
			m.Unfinished = err != nil && ctx.Err() != nil
			*marks = append(*marks, m)
		}
	}()
	return done
}

// score computes the run's scores.
func (r *run) score(ctx context.Context, rr *RunReport, e *env) {
	warmup := r.sc.Warmup.Seconds()
	switch r.sc.Score {
	case ScoreTask:
		rr.Task = taskWindow(rr, e.perSec, warmup)
	case ScoreMove:
		rr.Task, rr.Move = taskWindow(rr, e.perSec, warmup), scoreMove(ctx, rr, e)
	case ScoreJoin:
		rr.Join = joinReport(rr, e, warmup, r.sc.Probe.Seconds())
		rr.Capacity = capacityOf(rr.Series, warmup, r.sc.Probe.Seconds())
	case ScoreReadHints:
		rr.ReadHints = analyzeReadHints(*rr, warmup, r.sc.Toggle)
	}
	end, task := r.sc.Duration, false
	for _, ev := range r.sc.Events {
		if ev.At > r.sc.Warmup {
			end = min(end, ev.At)
		}
		task = task || actions[ev.Do].task
	}
	v := &Validity{Steady: report.SteadyOf(rr.Series, warmup, end.Seconds())}
	v.Checks = report.SteadyChecks(v.Steady)
	if task && rr.Task == nil {
		rr.Task = taskWindow(rr, e.perSec, warmup)
	}
	if task {
		rr.Task.Node = e.busy
	}
	if task {
		v.Checks = append(v.Checks, taskChecks(rr, warmup, r.sc.Score == ScoreTask)...)
	}
	rr.Validity = v
}

// print writes the run's summary and scores to the progress output.
func (r *run) print(rr *RunReport) {
	w := r.opts.Progress
	if w == nil {
		return
	}
	kinds := ""
	for k, n := range rr.Summary.ErrorKinds {
		kinds += fmt.Sprintf(" %s: %d;", k, n)
	}
	fmt.Fprintf(w, "\r\033[K%s: %d ops, %.0f ops/s, p50 %.2fms, p99 %.2fms, %d errors%s\n", r.label,
		rr.Summary.Ops, rr.Summary.Throughput, rr.Summary.P50Ms, rr.Summary.P99Ms, rr.Summary.Errors, kinds)
	for _, e := range rr.Events {
		fmt.Fprintf(w, "%s: event at %.1fs: %s %s\n", r.label, e.T, e.What, e.Error)
	}
	if t := rr.Task; t != nil {
		fmt.Fprintf(w, "%s: task %.1fs-%.1fs: throughput %.0f vs %.0f ops/s steady (%.1f%%), p99 %.2f vs %.2f ms (%.2fx) %s\n",
			r.label, t.StartS, t.EndS, t.TaskThroughput, t.SteadyThroughput, 100*t.ThroughputRatio, t.TaskP99Ms, t.SteadyP99Ms, t.P99Ratio, t.Missing)
	}
	if len(rr.LevelBytes) > 0 {
		fmt.Fprintf(w, "%s: store of n1 after the load, MiB per level L0..: %s\n", r.label, mib(rr.LevelBytes))
	}
	printChecks(w, r.label, rr.Validity.checks())
	if j := rr.Join; j != nil {
		fmt.Fprintf(w, "%s: join %.1fs, first range served after %.1fs, full leader share after %.0fs, worst %ds bin %+.1f%% of %.0f ops/s "+
			"(noise %+.1f%%), %d windows over p99 %.1fms, excess %.0fms, after/before %.2f\n", r.label, j.JoinS, j.FirstServedS,
			j.FullShareS, report.DipBinS, 100*j.WorstDip, j.PreJoinThroughput, 100*j.DipNoise, j.ViolatingWindows, j.SLOThresholdMs, j.ExcessMs, j.PostJoinRatio)
	}
	if c := rr.Capacity; c != nil {
		fmt.Fprintf(w, "%s: capacity (closed loop) %.0f ops/s over %.0f-%.0fs, %.0f ops/s over %.0f-%.0fs: after/before %.2f\n", r.label,
			c.BeforeOps, c.BeforeFromS, c.BeforeToS, c.AfterOps, c.AfterFromS, c.AfterToS, c.Ratio)
	}
	if h := rr.ReadHints; h != nil {
		printReadHints(w, r.label, h)
	}
	if m := rr.Move; m != nil {
		fmt.Fprintf(w, "%s: move %.1fs, %.2fx one snapshot of %.1f MiB at the configured %.1f MiB/s; %.1f MiB sent in %.0f s (%.2fx the rate, "+
			"peak second %.2fx), %d snapshot(s) applied; verified %v\n", r.label, m.DurationS, m.MoveTimeRatio, float64(m.RangeBytes)/(1<<20),
			float64(m.RateBytesPerSec)/(1<<20), float64(m.SnapshotBytes)/(1<<20), m.SendingS, m.SendRateRatio, m.PeakSendRateRatio, m.SnapshotsApplied, m.Verified)
	}
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
	// Node is the node a background task ran on (0: the event names none).
	Node uint64 `json:"node,omitempty"`
	// Missing says why the window is not recorded, or (with figures) not whole: the task failed,
	// never fired, or was still running when the run ended (then the window runs to the end).
	Missing string `json:"missing,omitempty"`
}

// taskWindow measures the first task event against the steady state before it: mean throughput and
// the p99 of all latencies in each (a second counts when its midpoint lies in the window; the
// task's window is at least a second).
func taskWindow(rr *RunReport, perSec []*hdrhistogram.Histogram, warmup float64) *TaskWindow {
	i := slices.IndexFunc(rr.Events, func(e EventMark) bool { return e.Task })
	if i < 0 {
		return &TaskWindow{Missing: "no task event fired within the run"}
	}
	ev := rr.Events[i]
	w := &TaskWindow{StartS: ev.T, EndS: ev.EndT, DurationS: ev.EndT - ev.T}
	switch {
	case ev.Unfinished:
		w.Missing = fmt.Sprintf("the task was still running when the run ended (%.1fs to %.1fs): a longer run is needed", ev.T, ev.EndT)
	case ev.Error != "":
		return &TaskWindow{StartS: ev.T, EndS: ev.EndT, Missing: "the task failed: " + ev.Error}
	}
	var n1, n2 int
	w.SteadyThroughput, w.SteadyP99Ms, n1 = report.Window(rr.Series, perSec, warmup, ev.T)
	w.TaskThroughput, w.TaskP99Ms, n2 = report.Window(rr.Series, perSec, ev.T, max(ev.EndT, ev.T+1))
	if n1 == 0 || n2 == 0 || w.SteadyThroughput == 0 || w.SteadyP99Ms == 0 {
		w.Missing = fmt.Sprintf("no served second before (%d) or during (%d) the task to compare", n1, n2)
		return w
	}
	w.ThroughputRatio, w.P99Ratio = w.TaskThroughput/w.SteadyThroughput, w.TaskP99Ms/w.SteadyP99Ms
	return w
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
