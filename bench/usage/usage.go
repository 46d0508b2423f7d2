// Package usage trains the resource-usage model (plan/usage) on this machine: Cruz's procedure
// (thesis §5.3.1), scaled to in-process nodes on emulated disks. After an idle probe, reads run at
// cache hit ratios from 100 % down to about 15 % (uniform reads over a key prefix sized to the
// cache), then writes and scans; for each, an unpaced probe finds saturation and the offered rate
// that gives each usage level is found by binary search; every probe is a sample (its load, observed
// hit ratio and measured usage) for plan/usage's Fit. It also runs the accuracy experiment
// (validate) and the balancer experiment (Balance).
//
// Usage is measured for the cluster as a whole: the process's CPU (user and system, the benchmark's
// clients included) as a share of the machine's cores, plus every node's emulated-disk busy share;
// the load is the cluster's (reads once, writes once per replica). The fitted costs are then a
// node's on a machine of its own. It owns the benchmark's cluster and nothing else; it never
// changes how the nodes run.
package usage

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/node"
	"github.com/shoaldb/shoal/node/accessstats"
	"github.com/shoaldb/shoal/pb"
	planusage "github.com/shoaldb/shoal/plan/usage"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Options configures a training run; zero fields take defaults (Defaults).
type Options struct {
	Nodes      int
	Records    int
	ValueBytes int
	CacheBytes int64
	// Hits are the targeted hit ratios of the read probes; Levels the usage levels each searches, as
	// shares of the way from the idle cluster's usage to the usage at saturation.
	Hits   []float64
	Levels []float64
	// Probe is one probe's measured window; Steps the binary search's probes per level.
	Probe time.Duration
	Steps int
	// Heartbeat is the nodes' heartbeat interval (default node.DefaultHeartbeatInterval); the
	// probes read the heartbeats at that interval. Settle is how long a probe runs its load before
	// it measures (default a second and two heartbeats: a heartbeat reports the interval before
	// it, and the cluster's node list holds the last one received, so a reading lags the load by up
	// to two intervals; with a second of settling, a 3-s probe's load was two thirds the previous
	// probe's: one at 5 455 reads/s read as 8 731 after one at 10 917).
	Heartbeat, Settle time.Duration
	// Clients is the concurrent clients.
	Clients int
	// ScanRows is the rows of one scan.
	ScanRows int
	// ValidateRates, when set, runs the accuracy experiment after training: every workload at each
	// of these offered rates (ops/s), predicted against measured.
	ValidateRates []float64
	// ValidateWarm is each accuracy workload's run at its first rate before its probes: longer
	// than the histograms remember (10–20 s). Default 25 s.
	ValidateWarm time.Duration
	Device       emudisk.Options
	Progress     func(string)
}

// Defaults fills the zero fields.
func (o Options) Defaults() Options {
	if o.Nodes <= 0 {
		o.Nodes = 3
	}
	if o.Records <= 0 {
		o.Records = 40000
	}
	if o.ValueBytes <= 0 {
		o.ValueBytes = 1000
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 4 << 20
	}
	if len(o.Hits) == 0 {
		o.Hits = []float64{1, 0.7, 0.4, 0.15}
	}
	if len(o.Levels) == 0 {
		o.Levels = []float64{0.3, 0.6}
	}
	if o.Probe <= 0 {
		o.Probe = 3 * time.Second
	}
	if o.Steps <= 0 {
		o.Steps = 4
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = node.DefaultHeartbeatInterval
	}
	if o.Settle <= 0 {
		o.Settle = time.Second + 2*o.Heartbeat
	}
	if o.Clients <= 0 {
		o.Clients = 32
	}
	if o.ScanRows <= 0 {
		o.ScanRows = 100
	}
	if o.ValidateWarm <= 0 {
		o.ValidateWarm = 25 * time.Second
	}
	// An emulated disk without the page cache; each budget not given takes the scenarios' default.
	d := &o.Device
	d.NoPageCache = true
	if d.ReadBytesPerSec <= 0 {
		d.ReadBytesPerSec = 64 << 20
	}
	if d.WriteBytesPerSec <= 0 {
		d.WriteBytesPerSec = 64 << 20
	}
	if d.IOPS <= 0 {
		d.IOPS = 2000
	}
	if d.Latency <= 0 {
		d.Latency = 200 * time.Microsecond
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// Probe is one measured probe: what was asked and what was measured.
type Probe struct {
	Kind      string  `json:"kind"` // "read", "write", "scan"
	TargetHit float64 `json:"target_hit,omitempty"`
	Level     float64 `json:"level"`
	Offered   float64 `json:"offered_ops"`
	Achieved  float64 `json:"achieved_ops"`
	Hit       float64 `json:"observed_hit"`
	CPU       float64 `json:"cpu_share"`
	Disk      float64 `json:"disk_busy"`
	Usage     float64 `json:"usage"`
	Errors    int64   `json:"errors"`
	// Compaction is the bytes a second every node's compactions wrote during the probe (as they
	// wrote them: storage.Stats.CompactionWritten), WriteStalls the write stalls the nodes' engines began in it.
	Compaction  float64 `json:"compaction_bytes_per_s"`
	WriteStalls int64   `json:"write_stalls,omitempty"`
	// Load is the cluster's load the heartbeats reported during the probe.
	Load planusage.Load `json:"load"`
	// IndexFilterBytes is the room in each node's cache its index and filter blocks take from the
	// data blocks, as its last heartbeat of the probe reported it (by node ID; node/accessstats).
	IndexFilterBytes map[uint64]uint64 `json:"index_filter_bytes,omitempty"`
	// Upper is the records' bytes above the bottom level per byte of it, the most of any node's at
	// the probe's end (accessstats.UpperShare): how far from compacted the store was.
	Upper  float64 `json:"upper_share"`
	sample planusage.Sample
	polls  []heard
}

// Report is a training run's outcome.
type Report struct {
	// Model is the fit written: of Fits, the most constrained one within a tie of the least held-out
	// error (chooseFit).
	Model  planusage.Model `json:"model"`
	Chosen string          `json:"chosen_fit"`
	Probes []Probe         `json:"probes"`
	// FitMAE is the written model's mean absolute error over the probes it was fitted to (the
	// cluster's usage), FitWorst its largest.
	FitMAE   float64 `json:"fit_mae"`
	FitWorst float64 `json:"fit_worst"`
	Cores    int     `json:"cores"`
	// Accuracy is the accuracy experiment's outcome for Model (with ValidateRates).
	Accuracy *Accuracy `json:"accuracy,omitempty"`
	// Fits are the ways of fitting the probes, each with its held-out error and its accuracy.
	Fits []Candidate `json:"fits"`
	// NoCompaction is the written fit's way of fitting without the compaction term (the probes'
	// compactions unmeasured: their cost falls on the writes and scans), for comparison.
	NoCompaction *Candidate `json:"no_compaction_term,omitempty"`
}

// Candidate is one way of fitting the probes. "at-idle" fixes a node's idle usage at the idle
// probe's (plan/usage FitAtIdle); "free" fits it too (Fit), so that it also carries what the nodes
// use under any load that no load term does (their background: raft, heartbeats, the access
// statistics' placing of sampled keys, the Go runtime); "by-kind" fits it and the read costs to
// the read probes only, then the write and scan costs (FitByKind), so that the write probes, whose
// usage is their compactions' whatever their rate, do not set it. The training writes the one whose
// leave-one-out error over the loaded probes is the least (CVMAE): chosen on the probes, not on
// the accuracy experiment's checks, which measure it.
type Candidate struct {
	Name  string          `json:"name"`
	Model planusage.Model `json:"model"`
	// CVMAE and CVWorst: leave-one-out over the loaded probes, in the cluster's usage.
	CVMAE   float64 `json:"cv_mae"`
	CVWorst float64 `json:"cv_worst"`
	// FitMAE: the error over the probes it was fitted to.
	FitMAE   float64   `json:"fit_mae"`
	FitWorst float64   `json:"fit_worst"`
	Accuracy *Accuracy `json:"accuracy,omitempty"`
	// Error says why the way could not fit these probes (too few of a kind); it is then not chosen.
	Error string `json:"error,omitempty"`
}

// Run trains a model in dir.
func Run(ctx context.Context, dir string, o Options) (*Report, error) {
	o = o.Defaults()
	e, err := start(ctx, dir, o)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	if err := e.load(ctx); err != nil {
		return nil, err
	}
	rep := &Report{Cores: runtime.NumCPU()}
	idle, err := e.probe(ctx, "idle", -1, nil)
	if err != nil {
		return nil, err
	}
	e.idle = idle.Usage
	e.report(idle)
	rep.Probes = append(rep.Probes, idle)
	// The probes' key spans are sized by the cache's room for blocks, not its nominal size.
	room := storage.Options{CacheBytes: o.CacheBytes, MemTableBytes: memTableBytes}.BlockRoomBytes()
	cacheRecords := float64(room) / float64(o.ValueBytes+32)
	for _, h := range o.Hits {
		span := int(math.Min(float64(o.Records), math.Max(cacheRecords/h, 1)))
		if h >= 1 {
			span = int(cacheRecords / 2) // well inside the cache
		}
		op := func(rng *rand.Rand) error {
			_, _, err := e.cl.Get(ctx, key(rng.IntN(span)))
			return err
		}
		e.warm(ctx, op, 2*time.Second)
		ps, err := e.search(ctx, o, "read", h, op)
		if err != nil {
			return rep, err
		}
		rep.Probes = append(rep.Probes, ps...)
	}
	write := func(rng *rand.Rand) error {
		return e.cl.Put(ctx, key(rng.IntN(o.Records)), benchutil.RandomBytes(rng, o.ValueBytes))
	}
	scan := func(rng *rand.Rand) error {
		start := rng.IntN(max(o.Records-o.ScanRows, 1))
		_, err := e.cl.Scan(ctx, key(start), key(start+o.ScanRows), o.ScanRows, false)
		return err
	}
	for _, k := range []struct {
		name string
		op   func(*rand.Rand) error
	}{{"write", write}, {"scan", scan}} {
		ps, err := e.search(ctx, o, k.name, 0, k.op)
		if err != nil {
			return rep, err
		}
		rep.Probes = append(rep.Probes, ps...)
	}
	best, err := rep.fit(o, e.idle/float64(o.Nodes))
	if err != nil {
		return rep, err
	}
	if len(o.ValidateRates) > 0 {
		return rep, rep.validate(ctx, e, o, best)
	}
	return rep, nil
}

// validate runs the checks at o's rates and gives every fit, and the written one without its
// compaction term, its accuracy on them (the checks done before an error count).
func (rep *Report) validate(ctx context.Context, e *env, o Options, best int) error {
	vs, err := e.validate(ctx, o.ValidateRates)
	if len(vs) == 0 {
		return err
	}
	for i := range rep.Fits {
		if rep.Fits[i].Error != "" {
			continue
		}
		var progress func(string)
		if i == best {
			progress = o.Progress
		}
		rep.Fits[i].Accuracy = accuracy(rep.Fits[i].Model, vs, o.Nodes, progress)
	}
	rep.Accuracy = rep.Fits[best].Accuracy
	if nc := rep.NoCompaction; nc != nil && nc.Error == "" {
		nc.Accuracy = accuracy(nc.Model, vs, o.Nodes, nil)
	}
	return err
}

// fit fits every candidate model to the report's probes, writes the chosen one into the report and
// returns its index in rep.Fits.
func (rep *Report) fit(o Options, idlePerNode float64) (int, error) {
	var err error
	samples := make([]planusage.Sample, len(rep.Probes))
	for i, p := range rep.Probes {
		samples[i] = p.sample
	}
	if rep.Fits, err = fitCandidates(samples, idlePerNode); err != nil {
		return 0, err
	}
	for _, c := range rep.Fits {
		if c.Error != "" {
			o.Progress(fmt.Sprintf("fit %s: %s", c.Name, c.Error))
			continue
		}
		o.Progress(fmt.Sprintf("fit %s %+v: held-out error %.3f (worst %.3f), on its own probes %.3f", c.Name, c.Model, c.CVMAE, c.CVWorst, c.FitMAE))
	}
	best := chooseFit(rep.Fits)
	rep.Chosen, rep.Model = rep.Fits[best].Name, rep.Fits[best].Model
	rep.NoCompaction = withoutCompaction(samples, idlePerNode, rep.Chosen)
	rep.FitMAE, rep.FitWorst = rep.Fits[best].FitMAE, rep.Fits[best].FitWorst
	o.Progress(fmt.Sprintf("model (%s) %+v: fit mean error %.3f, worst %.3f", rep.Chosen, rep.Model, rep.FitMAE, rep.FitWorst))
	return best, nil
}

// fitTie is how much larger (relative) a fit's held-out error may be than the least and still be
// preferred for its place in fitCandidates' order: held-out errors this close swap between runs of
// the same experiment. fitPreference puts the more constrained fits first: at-idle keeps the
// measured idle usage, by-kind fits idle and read costs to the read probes only, free fits every
// term to every probe (its idle term was 5.6–8.3 points a node off on the read checks when it won
// by 0.001).
const fitTie = 0.10

var fitPreference = []string{"at-idle", "by-kind", "free"}

// chooseFit is the index of the fit written: of those whose held-out error is within fitTie of the
// least, the first in fitPreference. At-idle (index 0) always fits.
func chooseFit(fits []Candidate) int {
	least := fits[0].CVMAE
	for _, c := range fits {
		if c.Error == "" {
			least = min(least, c.CVMAE)
		}
	}
	for _, name := range fitPreference {
		for i, c := range fits {
			if c.Name == name && c.Error == "" && c.CVMAE <= least*(1+fitTie) {
				return i
			}
		}
	}
	return 0
}

// fitCandidates fits the samples both ways (Candidate) and measures each one's error, held out
// (leave-one-out over the loaded probes: the checks it is for are all under load) and on its own
// samples. A way that cannot fit them (too few samples of a kind) says why; the first, at-idle,
// must fit.
func fitCandidates(samples []planusage.Sample, idle float64) ([]Candidate, error) {
	var out []Candidate
	for i, w := range fitWays(idle) {
		c := candidate(samples, w.name, w.fit)
		if c.Error != "" && i == 0 {
			return nil, fmt.Errorf("fit %s: %s", w.name, c.Error)
		}
		out = append(out, c)
	}
	return out, nil
}

// fitWay is one way of fitting the probes (Candidate).
type fitWay struct {
	name string
	fit  func([]planusage.Sample) (planusage.Model, error)
}

// fitWays are the ways of fitting, in Report.Fits' order; idle is a node's idle usage measured.
func fitWays(idle float64) []fitWay {
	return []fitWay{
		{"at-idle", func(ss []planusage.Sample) (planusage.Model, error) { return planusage.FitAtIdle(ss, idle) }},
		{"free", planusage.Fit},
		{"by-kind", planusage.FitByKind},
	}
}

// candidate fits samples one way and measures its errors, held out (leave-one-out over the loaded
// probes: the checks it is for are all under load) and on its own samples; Error says why it
// could not fit them.
func candidate(samples []planusage.Sample, name string, fit func([]planusage.Sample) (planusage.Model, error)) Candidate {
	loaded := func(s planusage.Sample) bool { return s.Load != planusage.Load{} }
	m, err := fit(samples)
	c := Candidate{Name: name, Model: m}
	if err == nil {
		c.CVMAE, c.CVWorst, err = planusage.CrossValidate(samples, fit, loaded)
	}
	if err != nil {
		return Candidate{Name: name, Error: err.Error()}
	}
	for _, s := range samples {
		d := math.Abs(m.PredictSample(s) - s.Usage)
		c.FitMAE += d / float64(len(samples))
		c.FitWorst = math.Max(c.FitWorst, d)
	}
	return c
}

// withoutCompaction is the way named fitted to samples with their compactions unmeasured.
func withoutCompaction(samples []planusage.Sample, idle float64, name string) *Candidate {
	blind := make([]planusage.Sample, len(samples))
	for i, s := range samples {
		s.Compaction = 0
		blind[i] = s
	}
	for _, w := range fitWays(idle) {
		if w.name == name {
			c := candidate(blind, name, w.fit)
			return &c
		}
	}
	return nil
}

func key(i int) []byte { return fmt.Appendf(nil, "usage/%08d", i) }

// env is a running training cluster.
type env struct {
	o  Options
	c  *benchutil.Cluster
	cl *client.Client
	// idle is the cluster's usage with no load (the first probe).
	idle float64
}

func start(ctx context.Context, dir string, o Options) (*env, error) {
	// Nothing may move ranges while probes measure: placement is not what is being trained.
	cfg := benchutil.NodeConfig{Autopilot: autopilot.Config{Policies: policy.Config{}}}
	// Read hints replay the leaders' reads on the followers: disk and CPU that are not the reads'
	// own cost at their hit ratio.
	cfg.Hints.Off = true
	cfg.HeartbeatInterval = o.Heartbeat
	// A histogram of the last 10–20 s: each accuracy workload runs longer than that before it is
	// measured, so that the prediction is the workload's, not the one before's. So short a window
	// needs more samples than the nodes' default (1 read in 16 over 1–2 min): 1 read in 4, and room
	// for every block of a 64-MiB range.
	cfg.Access = accessstats.Config{Window: 10 * time.Second, SampleEvery: 4, MaxKeys: 1024, MaxSlots: 1 << 15}
	dev := o.Device
	c, err := benchutil.StartCluster(ctx, dir, o.Nodes, benchutil.NodeSpec{CacheBytes: o.CacheBytes, MemTableBytes: memTableBytes,
		Device: &dev, Config: cfg})
	if err != nil {
		return nil, err
	}
	e := &env{o: o, c: c}
	if e.cl, err = client.New(ctx, client.Config{Addrs: c.Addrs(), RequestTimeout: 10 * time.Second, MaxAttempts: 40}); err != nil {
		c.Stop()
		return nil, err
	}
	return e, nil
}

func (e *env) stop() {
	if e.cl != nil {
		e.cl.Close()
	}
	e.c.Stop()
}

// load writes the records unthrottled and compacts them, so that probes read tables on the
// emulated disk.
func (e *env) load(ctx context.Context) error {
	o := e.o
	o.Progress(fmt.Sprintf("waiting for %d voters", min(o.Nodes, 3)))
	if err := benchutil.WaitFor(ctx, 2*time.Minute, func() bool { return benchutil.FullyReplicated(ctx, e.cl, min(o.Nodes, 3)) }); err != nil {
		return fmt.Errorf("replication: %w", err)
	}
	for _, p := range []string{policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit, policy.NameShed} {
		if err := e.cl.SetPolicy(ctx, p, false); err != nil {
			return fmt.Errorf("switch %s off: %w", p, err)
		}
	}
	for _, n := range e.c.Nodes() {
		n.Eng.SetDeviceUnthrottled(true)
	}
	defer func() {
		for _, n := range e.c.Nodes() {
			n.Eng.SetDeviceUnthrottled(false)
		}
	}()
	o.Progress(fmt.Sprintf("loading %d records of %d bytes", o.Records, o.ValueBytes))
	if _, err := (benchutil.Load{Records: o.Records, Batch: 100, Writers: 4, Key: key,
		Values: benchutil.RandomValues(o.ValueBytes, 9)}).Run(ctx, e.cl); err != nil {
		return err
	}
	for _, n := range e.c.Nodes() {
		if err := n.Eng.CompactAll(ctx); err != nil {
			return fmt.Errorf("compact: %w", err)
		}
	}
	return nil
}

// warm runs op unpaced for d (the cache fills with the probe's working set).
func (e *env) warm(ctx context.Context, op func(*rand.Rand) error, d time.Duration) {
	e.run(ctx, op, 0, d)
}

// search measures op unpaced (its saturation: the most it achieves and the usage then), then finds
// by binary search, for each usage level, the offered rate at which the measured usage is that
// share of the way from idle to saturation; every probe is returned.
func (e *env) search(ctx context.Context, o Options, kind string, hit float64, op func(*rand.Rand) error) ([]Probe, error) {
	top, err := e.probe(ctx, kind, 0, op)
	if err != nil {
		return nil, err
	}
	top.TargetHit, top.Level = hit, 1
	out := []Probe{top}
	e.report(top)
	for _, level := range o.Levels {
		want := e.idle + level*(top.Usage-e.idle)
		lo, hi := 0.0, top.Achieved
		for range o.Steps {
			rate := (lo + hi) / 2
			p, err := e.probe(ctx, kind, rate, op)
			if err != nil {
				return out, err
			}
			p.TargetHit, p.Level = hit, level
			out = append(out, p)
			e.report(p)
			if p.Usage < want && p.Achieved >= 0.95*rate {
				lo = rate
			} else {
				hi = rate
			}
		}
	}
	return out, nil
}

func (e *env) report(p Probe) {
	e.o.Progress(fmt.Sprintf("%s hit %.2f level %.2f: offered %.0f/s, achieved %.0f/s, hit %.2f, usage %.2f (cpu %.2f, disk %.2f), compactions %.1f MB/s, %d stalls",
		p.Kind, p.TargetHit, p.Level, p.Offered, p.Achieved, p.Hit, p.Usage, p.CPU, p.Disk, p.Compaction/1e6, p.WriteStalls))
}

// probe runs op at rate for the probe window after Settle, and measures it: the
// usage from the process's CPU and the devices, the load and hit ratios from the nodes' heartbeats.
func (e *env) probe(ctx context.Context, kind string, rate float64, op func(*rand.Rand) error) (Probe, error) {
	if op == nil {
		op = func(*rand.Rand) error { return nil } // the idle probe: nothing to run
		rate = -1
	}
	e.run(ctx, op, rate, e.o.Settle)
	nodes := e.c.Nodes()
	devBefore := make([]emudisk.Stats, len(nodes))
	engBefore := make([]storage.Stats, len(nodes))
	for i, n := range nodes {
		devBefore[i], engBefore[i] = n.Eng.DeviceStats(), n.Eng.Stats()
	}
	cpu0, t0 := benchutil.ProcessCPU(), time.Now()
	var polls []heard
	pollCtx, stopPoll := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the owner: probe, which cancels and waits for it
		defer wg.Done()
		polls = e.poll(pollCtx)
	}()
	done, errs := e.run(ctx, op, rate, e.o.Probe)
	stopPoll()
	wg.Wait()
	dt := time.Since(t0).Seconds()
	if ctx.Err() != nil {
		return Probe{}, ctx.Err()
	}
	p := Probe{Kind: kind, Offered: rate, Achieved: float64(done) / dt, Errors: errs, Hit: 1}
	p.CPU = (benchutil.ProcessCPU() - cpu0).Seconds() / dt / float64(runtime.NumCPU())
	for i, n := range nodes {
		p.Disk += busy(e.o.Device, devBefore[i], n.Eng.DeviceStats(), dt)
		es := n.Eng.Stats()
		p.Compaction += (es.CompactionWritten() - engBefore[i].CompactionWritten()) / dt
		p.WriteStalls += es.WriteStalls - engBefore[i].WriteStalls
	}
	p.Usage = p.CPU + p.Disk
	h := sumHeard(polls)
	if h.measured > 0 {
		p.Hit = float64(h.hits) / float64(h.measured)
	}
	p.Load = h.load
	p.sample = planusage.Sample{Load: h.load, Hit: p.Hit, Usage: p.Usage, Nodes: float64(len(nodes)), Compaction: p.Compaction}
	p.polls = polls
	if p.IndexFilterBytes = lastIndexFilter(polls); len(p.IndexFilterBytes) < len(nodes) {
		// A probe's last reading can be cut off by its end, and right after the cluster starts a
		// node may not have been heard yet: read until every node is, for a few heartbeats.
		p.IndexFilterBytes = e.indexFilterOfAll(ctx, len(nodes))
	}
	lo, hi := storage.DataSpan(false, nil, nil)
	for _, n := range nodes {
		ts, err := n.Eng.Tables(lo, hi, false)
		if err != nil {
			return p, fmt.Errorf("probe %s: %w", kind, err)
		}
		p.Upper = max(p.Upper, accessstats.UpperShare(ts))
	}
	return p, nil
}

// lastIndexFilter is every node's index and filter bytes in the last of polls, by node ID.
func lastIndexFilter(polls []heard) map[uint64]uint64 {
	if len(polls) == 0 {
		return nil
	}
	h := polls[len(polls)-1]
	out := make(map[uint64]uint64, len(h.ids))
	for i, st := range h.stats {
		if i < len(h.ids) {
			out[h.ids[i]] = st.GetIndexFilterBytes()
		}
	}
	return out
}

// indexFilterOfAll reads the nodes' heartbeats until all n have been heard, for at most 20
// heartbeats, and returns every heard node's index and filter bytes.
func (e *env) indexFilterOfAll(ctx context.Context, n int) map[uint64]uint64 {
	var out map[uint64]uint64
	for range 20 {
		if ns, err := e.cl.Nodes(ctx); err == nil {
			out = lastIndexFilter([]heard{heardOf(ns)})
			if len(out) >= n {
				return out
			}
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(e.o.Heartbeat):
		}
	}
	return out
}

// heard is one reading of every node's last heartbeat (ids: the nodes', in the same order).
type heard struct {
	stats []*pb.NodeStats
	ids   []uint64
}

// heardSum is what a probe's readings say together: the cluster's load (the mean of the readings),
// and the measured point reads and hits (summed).
type heardSum struct {
	load           planusage.Load
	measured, hits uint64
}

func sumHeard(polls []heard) heardSum {
	var s heardSum
	for _, h := range polls {
		for _, st := range h.stats {
			l, _, _ := node.HeardLoad(st)
			s.load.Reads += l.Reads / float64(len(polls))
			s.load.Writes += l.Writes / float64(len(polls))
			s.load.Scans += l.Scans / float64(len(polls))
			for _, rl := range st.GetRanges() {
				s.measured += rl.GetMeasuredReads()
				s.hits += rl.GetMeasuredReadHits()
			}
		}
	}
	return s
}

// memTableBytes is the nodes' memtable size: small, since Pebble charges two memtables to the
// block cache (storage.Options.BlockRoomBytes).
const memTableBytes = 1 << 20

// poll reads every node's last heartbeat once a heartbeat interval until ctx ends.
func (e *env) poll(ctx context.Context) []heard {
	t := time.NewTicker(e.o.Heartbeat)
	defer t.Stop()
	var out []heard
	for {
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
		ns, err := e.cl.Nodes(ctx)
		if err != nil {
			continue
		}
		out = append(out, heardOf(ns))
	}
}

// heardOf is one reading of the nodes that have been heard from among ns.
func heardOf(ns []*pb.NodeStatus) heard {
	var h heard
	for _, n := range ns {
		if n.GetStats() != nil {
			h.stats = append(h.stats, n.GetStats())
			h.ids = append(h.ids, n.GetDesc().GetNodeId())
		}
	}
	return h
}

// run runs op from the configured clients for d, paced to rate ops/s (0: as fast as they go), and
// returns the operations that succeeded and failed.
func (e *env) run(ctx context.Context, op func(*rand.Rand) error, rate float64, d time.Duration) (done, errs int64) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var next atomic.Int64 // the next operation's start, Unix nanos
	next.Store(time.Now().UnixNano())
	var ok, bad atomic.Int64
	if rate < 0 {
		<-ctx.Done() // no load: the window passes
		return 0, 0
	}
	var wg sync.WaitGroup
	for w := range e.o.Clients {
		wg.Add(1)
		go func() { // owned by run, which waits for every client
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for ctx.Err() == nil {
				if rate > 0 {
					at := next.Add(int64(float64(time.Second)/rate)) - int64(float64(time.Second)/rate)
					if wait := time.Until(time.Unix(0, at)); wait > 0 {
						select {
						case <-ctx.Done():
							return
						case <-time.After(wait):
						}
					}
				}
				if err := op(rng); err != nil {
					if ctx.Err() == nil {
						bad.Add(1)
					}
					continue
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return ok.Load(), bad.Load()
}

// Check is one accuracy probe: a workload at an offered rate, its measured usage and hit ratio, and
// the model's predictions — from the nodes' loads and histograms by Che's approximation
// (Predicted, PredictedHit), and at the observed hit ratio (PredictedAtHit: the model alone).
// Usage is the cluster's (every node's summed).
type Check struct {
	Workload string `json:"workload"`
	// Store is storeAsLeft or storeCompacted.
	Store          string  `json:"store"`
	Offered        float64 `json:"offered_ops"`
	Achieved       float64 `json:"achieved_ops"`
	Measured       float64 `json:"measured_usage"`
	Predicted      float64 `json:"predicted_usage"`
	PredictedAtHit float64 `json:"predicted_usage_at_observed_hit"`
	ObservedHit    float64 `json:"observed_hit"`
	PredictedHit   float64 `json:"predicted_hit"`
	// PredictedHitLRU is Che's approximation for an LRU cache of the same room (plan/usage
	// HitRatioLRU), PredictedHitWholeRoom the cache's policy in its whole room for blocks (the
	// index and filter blocks' share left in): for comparison.
	PredictedHitLRU       float64 `json:"predicted_hit_lru"`
	PredictedHitWholeRoom float64 `json:"predicted_hit_whole_room"`
	// Upper is the probe's Probe.Upper.
	Upper float64 `json:"upper_share"`
	// Compaction is the bytes a second the nodes' compactions wrote (Probe.Compaction),
	// PredictedCompaction the model's for the load (its writes times CompactPerWrite), which
	// Predicted takes; PredictedAtCompaction is Predicted with the compactions measured instead.
	Compaction float64 `json:"compaction_bytes_per_s"`
	// Load is the cluster's load the heartbeats reported (Probe.Load): with PredictedHit, the
	// reads' hit ratio, the model's terms of Predicted (it is linear in them).
	Load                  planusage.Load `json:"load"`
	PredictedCompaction   float64        `json:"predicted_compaction_bytes_per_s"`
	PredictedAtCompaction float64        `json:"predicted_usage_at_measured_compaction"`
	WriteStalls           int64          `json:"write_stalls,omitempty"`
	// Saturated: the cluster served less than 90 % of the offered rate. The model is trained
	// below saturation (the thesis's procedure stops at 80 % usage); past it the offered load
	// queues, and what was served and measured is what the check predicts from.
	Saturated bool `json:"saturated,omitempty"`
	// PredictedSampledHit is PredictedHit as the sampled reads measure it. A sampled read is an
	// iterator, which loads a block of every level holding its key, where a get stops at the
	// newest: it hits only when all are cached. With a share f = min(Upper, 1) of the keys also
	// above the bottom level, each block cached with the probability H the prediction gives, that
	// is H − f·H·(1 − H) (on a compacted store H itself).
	PredictedSampledHit float64 `json:"predicted_sampled_hit"`
}

// Accuracy sums the checks, over all of them and over the read-only workloads (Reads).
type Accuracy struct {
	Checks []Check      `json:"checks"`
	All    AccuracySums `json:"all"`
	// Reads: uniform, zipfian, zipf-clustered and hotspot reads on the store as the training left
	// it; ReadsCompacted the same once it is compacted.
	Reads          AccuracySums `json:"reads"`
	ReadsCompacted AccuracySums `json:"reads_compacted"`
	// BelowSaturation: every check that served at least 90 % of its offered rate (Check.Saturated).
	BelowSaturation AccuracySums `json:"below_saturation"`
}

// AccuracySums are mean and worst absolute errors over a set of checks: usage in the cluster's
// units (the sum of the nodes'), and per node in points (the cluster's error shared evenly by its
// nodes, ×100: a node's own error is at least that on average), and hit ratio in points.
type AccuracySums struct {
	Checks     int     `json:"checks"`
	UsageMAE   float64 `json:"usage_mae"`
	UsageWorst float64 `json:"usage_worst"`
	WorstCheck string  `json:"usage_worst_check"`
	// NodePointsMAE and NodePointsWorst: UsageMAE and UsageWorst per node, in points.
	NodePointsMAE   float64 `json:"node_points_mae"`
	NodePointsWorst float64 `json:"node_points_worst"`
	// RelativeMAE is the mean of |predicted − measured| / measured.
	RelativeMAE float64 `json:"relative_mae"`
	// ModelMAE and ModelWorst: the model at the observed hit ratio (Che's approximation left out).
	ModelMAE   float64 `json:"model_mae"`
	ModelWorst float64 `json:"model_worst"`
	// AtCompactionNodePointsMAE and AtCompactionNodePointsWorst: NodePointsMAE and
	// NodePointsWorst with the compactions measured (Check.PredictedAtCompaction).
	AtCompactionNodePointsMAE   float64 `json:"at_compaction_node_points_mae"`
	AtCompactionNodePointsWorst float64 `json:"at_compaction_node_points_worst"`
	// HitPointsMAE and HitPointsWorst: predicted against observed hit ratio, in points;
	// SampledHitPointsMAE and SampledHitPointsWorst the same with PredictedSampledHit.
	HitPointsMAE          float64 `json:"hit_points_mae"`
	HitPointsWorst        float64 `json:"hit_points_worst"`
	SampledHitPointsMAE   float64 `json:"sampled_hit_points_mae"`
	SampledHitPointsWorst float64 `json:"sampled_hit_points_worst"`
}

// validated is one accuracy probe with what the model needs to predict it.
type validated struct {
	workload, store string
	p               Probe
}

// readOnly are the workloads of AccuracySums Reads.
var readOnly = map[string]bool{"uniform": true, "zipfian": true, "zipf-clustered": true, "hotspot": true}

// workloads are the accuracy experiment's mixes over the loaded records.
func (e *env) workloads(ctx context.Context) []struct {
	name string
	op   func(*rand.Rand) error
} {
	o := e.o
	n := o.Records
	get := func(i int) error { _, _, err := e.cl.Get(ctx, key(i)); return err }
	perm := rand.New(rand.NewPCG(5, 5)).Perm(n)
	zipf := func(rng *rand.Rand) int { return int(rand.NewZipf(rng, 1.1, 1, uint64(n-1)).Uint64()) }
	put := func(rng *rand.Rand) error {
		return e.cl.Put(ctx, key(rng.IntN(n)), benchutil.RandomBytes(rng, o.ValueBytes))
	}
	scan := func(rng *rand.Rand) error {
		s := rng.IntN(max(n-o.ScanRows, 1))
		_, err := e.cl.Scan(ctx, key(s), key(s+o.ScanRows), o.ScanRows, false)
		return err
	}
	return []struct {
		name string
		op   func(*rand.Rand) error
	}{
		{"uniform", func(rng *rand.Rand) error { return get(rng.IntN(n)) }},
		{"zipfian", func(rng *rand.Rand) error { return get(perm[zipf(rng)]) }},
		{"zipf-clustered", func(rng *rand.Rand) error { return get(zipf(rng)) }},
		{"hotspot", func(rng *rand.Rand) error {
			if rng.Float64() < 0.8 {
				return get(rng.IntN(max(n/5, 1)))
			}
			return get(n/5 + rng.IntN(max(n-n/5, 1)))
		}},
		{"mix-50-50", func(rng *rand.Rand) error {
			if rng.IntN(2) == 0 {
				return put(rng)
			}
			return get(rng.IntN(n))
		}},
		{"scan-heavy", func(rng *rand.Rand) error {
			if rng.Float64() < 0.9 {
				return scan(rng)
			}
			return get(rng.IntN(n))
		}},
	}
}

// The stores the accuracy checks run on: as the training's write probes left it (tables in several
// levels, a record often in more than one), and compacted again, as the training's read probes had
// it.
const (
	storeAsLeft    = "as-left"
	storeCompacted = "compacted"
)

// validate runs every workload, first for ValidateWarm at the first rate — longer than the nodes'
// histograms remember (10–20 s), so that each workload is predicted from its own reads only and
// the caches hold its blocks — then probes it at every rate. The read-only workloads run on the
// store as the training left it, then again once it is compacted; the mixes follow.
func (e *env) validate(ctx context.Context, rates []float64) ([]validated, error) {
	var out []validated
	ws := e.workloads(ctx)
	runs := func(store string, keep func(name string) bool) error {
		for _, w := range ws {
			if !keep(w.name) {
				continue
			}
			e.run(ctx, w.op, rates[0], e.o.ValidateWarm)
			for _, rate := range rates {
				p, err := e.probe(ctx, w.name, rate, w.op)
				if err != nil {
					return err
				}
				p.Offered = rate
				out = append(out, validated{workload: w.name, store: store, p: p})
			}
		}
		return nil
	}
	if err := runs(storeAsLeft, func(n string) bool { return readOnly[n] }); err != nil {
		return out, err
	}
	e.o.Progress("compacting the store for the read checks again")
	for _, n := range e.c.Nodes() {
		if err := n.Eng.CompactAll(ctx); err != nil {
			return out, fmt.Errorf("compact: %w", err)
		}
	}
	if err := runs(storeCompacted, func(string) bool { return true }); err != nil {
		return out, err
	}
	return out, nil
}

// check is m's prediction of one accuracy probe: per heartbeat reading, every node's usage from its
// load and the hit ratio Che's approximation gives its leaders' histograms in its cache.
func check(m planusage.Model, v validated, nodes int) Check {
	p := v.p
	c := Check{Workload: v.workload, Store: v.store, Offered: p.Offered, Achieved: p.Achieved, Measured: p.Usage, ObservedHit: p.Hit, Upper: p.Upper,
		PredictedAtHit: m.Predict(p.Load, p.Hit) + float64(nodes-1)*m.Idle, // every node idles
		Compaction:     p.Compaction, WriteStalls: p.WriteStalls, Saturated: p.Achieved < 0.9*p.Offered, Load: p.Load}
	var reads, hitReads, lruReads, wholeReads float64
	for _, h := range p.polls {
		for _, st := range h.stats {
			l, hist, cache := node.HeardLoad(st)
			whole := wholeRoom(st)
			hit := planusage.HitRatio(hist, cache)
			c.Predicted += m.Predict(l, hit) / float64(len(p.polls))
			c.PredictedAtCompaction += m.PredictAt(l, hit, 0) / float64(len(p.polls))
			c.PredictedCompaction += m.CompactionOf(l) / float64(len(p.polls))
			reads += l.Reads
			hitReads += l.Reads * hit
			lruReads += l.Reads * planusage.HitRatioLRU(hist, cache)
			wholeReads += l.Reads * planusage.HitRatio(hist, whole)
		}
	}
	c.PredictedAtCompaction += p.Compaction * m.Compact
	c.PredictedHit, c.PredictedHitLRU, c.PredictedHitWholeRoom = 1, 1, 1
	if reads > 0 {
		c.PredictedHit, c.PredictedHitLRU, c.PredictedHitWholeRoom = hitReads/reads, lruReads/reads, wholeReads/reads
	}
	c.PredictedSampledHit = c.PredictedHit - math.Min(c.Upper, 1)*c.PredictedHit*(1-c.PredictedHit)
	return c
}

// wholeRoom is st's cache's room for blocks, in blocks, index and filter blocks included.
func wholeRoom(st *pb.NodeStats) float64 {
	if st.GetBlockBytes() == 0 {
		return 0
	}
	return float64(st.GetBlockCacheCapacity()) / float64(st.GetBlockBytes())
}

// accuracy predicts every probe with m and sums the errors (progress, when set, hears each check).
func accuracy(m planusage.Model, vs []validated, nodes int, progress func(string)) *Accuracy {
	acc := &Accuracy{}
	for _, v := range vs {
		c := check(m, v, nodes)
		if progress != nil {
			progress(fmt.Sprintf("check %s (%s, upper %.3f) at %.0f/s: achieved %.0f/s, usage measured %.2f predicted %.2f (at observed hit %.2f, at measured compactions %.2f), compactions %.1f MB/s predicted %.1f, hit observed %.3f predicted %.3f (as sampled %.3f; LRU %.3f, whole room %.3f)",
				c.Workload, c.Store, c.Upper, c.Offered, c.Achieved, c.Measured, c.Predicted, c.PredictedAtHit, c.PredictedAtCompaction, c.Compaction/1e6, c.PredictedCompaction/1e6,
				c.ObservedHit, c.PredictedHit, c.PredictedSampledHit, c.PredictedHitLRU, c.PredictedHitWholeRoom))
		}
		acc.Checks = append(acc.Checks, c)
	}
	acc.All = sums(acc.Checks, nodes, func(Check) bool { return true })
	acc.Reads = sums(acc.Checks, nodes, func(c Check) bool { return readOnly[c.Workload] && c.Store == storeAsLeft })
	acc.ReadsCompacted = sums(acc.Checks, nodes, func(c Check) bool { return readOnly[c.Workload] && c.Store == storeCompacted })
	acc.BelowSaturation = sums(acc.Checks, nodes, func(c Check) bool { return !c.Saturated })
	return acc
}

// sums are the errors over the checks keep accepts.
func sums(cs []Check, nodes int, keep func(Check) bool) AccuracySums {
	var s AccuracySums
	for _, c := range cs {
		if !keep(c) {
			continue
		}
		s.Checks++
		d, dm, dh := math.Abs(c.Predicted-c.Measured), math.Abs(c.PredictedAtHit-c.Measured), 100*math.Abs(c.PredictedHit-c.ObservedHit)
		s.UsageMAE += d
		s.ModelMAE += dm
		s.HitPointsMAE += dh
		ds := 100 * math.Abs(c.PredictedSampledHit-c.ObservedHit)
		s.SampledHitPointsMAE += ds
		s.SampledHitPointsWorst = max(s.SampledHitPointsWorst, ds)
		if c.Measured > 0 {
			s.RelativeMAE += d / c.Measured
		}
		if d > s.UsageWorst {
			s.UsageWorst, s.WorstCheck = d, fmt.Sprintf("%s at %.0f/s", c.Workload, c.Offered)
		}
		s.ModelWorst = max(s.ModelWorst, dm)
		dc := math.Abs(c.PredictedAtCompaction - c.Measured)
		s.AtCompactionNodePointsMAE += dc
		s.AtCompactionNodePointsWorst = max(s.AtCompactionNodePointsWorst, dc)
		s.HitPointsWorst = max(s.HitPointsWorst, dh)
	}
	if s.Checks == 0 {
		return s
	}
	k := float64(s.Checks)
	s.UsageMAE, s.ModelMAE, s.HitPointsMAE, s.RelativeMAE = s.UsageMAE/k, s.ModelMAE/k, s.HitPointsMAE/k, s.RelativeMAE/k
	s.SampledHitPointsMAE /= k
	s.NodePointsMAE, s.NodePointsWorst = 100*s.UsageMAE/float64(nodes), 100*s.UsageWorst/float64(nodes)
	s.AtCompactionNodePointsMAE, s.AtCompactionNodePointsWorst = 100*s.AtCompactionNodePointsMAE/k/float64(nodes), 100*s.AtCompactionNodePointsWorst/float64(nodes)
	return s
}

// busy is the share of dt seconds a device with options o was busy between two readings: its
// operations against its IOPS, its bytes against its bandwidth, whichever is higher (at most 1).
// Unlike the engine's own reading it does not count a window with any wait for the budget as
// saturated: over a probe's seconds a flush's burst would.
func busy(o emudisk.Options, a, b emudisk.Stats, dt float64) float64 {
	u := 0.0
	share := func(n int64, rate float64) {
		if rate > 0 && dt > 0 {
			u = max(u, float64(n)/(rate*dt))
		}
	}
	share(b.ReadOps+b.WriteOps-a.ReadOps-a.WriteOps, float64(o.IOPS))
	share(b.ReadBytes-a.ReadBytes, float64(o.ReadBytesPerSec))
	share(b.WriteBytes-a.WriteBytes, float64(o.WriteBytesPerSec))
	return min(u, 1)
}
