package ycsb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/magiconair/properties"
	"github.com/pingcap/go-ycsb/pkg/measurement"
	"github.com/pingcap/go-ycsb/pkg/prop"
	// go-ycsb's core workload, registered as "core".
	_ "github.com/pingcap/go-ycsb/pkg/workload"
	goycsb "github.com/pingcap/go-ycsb/pkg/ycsb"

	"github.com/shoaldb/shoal/stopper"
)

// Defaults of Config.
const (
	DefaultMaxDuration        = 10 * time.Minute
	DefaultProgressInterval   = 5 * time.Second
	DefaultAbortAfterFailures = 1000
)

// Operation names, as YCSB reports them. A transaction of workload F that reads and then updates a
// record is one READ_MODIFY_WRITE (its read and its update are not reported on their own).
const (
	OpRead            = "READ"
	OpUpdate          = "UPDATE"
	OpInsert          = "INSERT"
	OpScan            = "SCAN"
	OpDelete          = "DELETE"
	OpReadModifyWrite = "READ_MODIFY_WRITE"
)

// Latencies are recorded in microseconds between these bounds (longer ones count as the maximum).
const (
	minLatencyUs = 1
	maxLatencyUs = int64(60 * time.Second / time.Microsecond)
	sigFigs      = 3
)

// Config describes one benchmark run.
type Config struct {
	// Workload is the core workload: "a" to "f".
	Workload string
	// Target and Hosts label the report (the DB itself is passed to Run); see Open.
	Target string
	Hosts  []string
	// System names the system in the report (default: System(Target)), e.g. "redis" for TargetRESP
	// against a redis-server.
	System string
	// RedisMode is TargetRESP's client mode: RedisModeCluster (default) or RedisModePlain. It must be
	// empty for the other targets.
	RedisMode string
	// Records is the number of records the load phase inserts and the run phase chooses keys from.
	Records int64
	// Ops is the number of operations of the run phase (0: no run phase).
	Ops int64
	// Threads is the number of concurrent workers of both phases.
	Threads int
	// Rate paces the run phase at this many operations a second over all workers, as YCSB's target
	// does: the k-th operation starts no earlier than k/Rate seconds into the phase, and a worker
	// behind that schedule goes on at once (0: every worker as fast as the store answers). A
	// closed loop keeps the store saturated, so every other cost (a restart, a compaction) shows as
	// latency; a paced load leaves headroom. Latencies are each operation's own.
	Rate float64
	// Load runs the load phase (inserting Records records) before the run phase.
	Load bool
	// MaxDuration bounds each phase: a phase still running then is stopped and its report marked
	// truncated. Default: DefaultMaxDuration.
	MaxDuration time.Duration
	// Timeline adds a timeline of both phases to the report: a point every TimelineInterval
	// (default one second).
	Timeline         bool
	TimelineInterval time.Duration
	// Props are go-ycsb properties that override the workload's (e.g. "writeallfields": "true").
	Props map[string]string
	// Progress, if set, receives a progress line every ProgressInterval (default
	// DefaultProgressInterval).
	Progress         io.Writer
	ProgressInterval time.Duration
	// AbortAfterFailures stops a phase whose first AbortAfterFailures operations all failed (a target
	// that does not work), and makes Run return an error. Default: DefaultAbortAfterFailures; negative:
	// never.
	AbortAfterFailures int64
}

// OpStats summarizes one kind of operation. Count includes the failed operations, which are also
// counted in Errors; the latency figures (milliseconds) are over the successful ones.
type OpStats struct {
	Count  int64   `json:"count"`
	Errors int64   `json:"errors"`
	AvgMs  float64 `json:"avg_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Phase is the outcome of the load phase.
type Phase struct {
	Ops         int64              `json:"ops"`
	Errors      int64              `json:"errors"`
	DurationS   float64            `json:"duration_s"`
	Throughput  float64            `json:"throughput_ops_s"`
	Truncated   bool               `json:"truncated"`
	Operations  map[string]OpStats `json:"operations"`
	ErrorSample string             `json:"error_sample,omitempty"`
}

// Point is one interval (Config.TimelineInterval, the last one possibly shorter) of a phase's
// timeline.
type Point struct {
	Phase string  `json:"phase"`
	T     float64 `json:"t"` // seconds from the start of the phase to the end of the interval
	// Unix is the end of the interval in seconds since the Unix epoch, to line the timeline up with
	// events recorded elsewhere (a switch flipped by a script, a node's log).
	Unix       float64 `json:"unix_s"`
	Ops        int64   `json:"ops"`
	Errors     int64   `json:"errors"`
	Throughput float64 `json:"throughput_ops_s"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
}

// Report is the outcome of a benchmark. Its top-level figures are those of the run phase: Ops counts
// the operations completed (successful or not; Errors of them failed), and Throughput is Ops over
// Duration, as YCSB reports its overall throughput.
type Report struct {
	Workload     string             `json:"workload"`
	System       string             `json:"system"`
	Target       string             `json:"target"`
	Hosts        []string           `json:"hosts"`
	Records      int64              `json:"records"`
	Ops          int64              `json:"ops"`
	Threads      int                `json:"threads"`
	Rate         float64            `json:"rate_ops_s,omitempty"` // the run phase's pace (Config.Rate); absent: unpaced
	Distribution string             `json:"distribution"`
	StartedAt    time.Time          `json:"started_at"`
	DurationS    float64            `json:"duration_s"`
	Throughput   float64            `json:"throughput_ops_s"`
	Errors       int64              `json:"errors"`
	Truncated    bool               `json:"truncated"`
	Operations   map[string]OpStats `json:"operations"`
	ErrorSample  string             `json:"error_sample,omitempty"`
	Load         *Phase             `json:"load,omitempty"`
	Properties   map[string]string  `json:"properties"`
	Timeline     []Point            `json:"timeline,omitempty"`
}

// OpNames returns the operations of r in a stable order: YCSB's usual ones first.
func (r *Report) OpNames() []string { return opNames(r.Operations) }

func opNames(ops map[string]OpStats) []string {
	order := map[string]int{OpRead: 0, OpUpdate: 1, OpInsert: 2, OpScan: 3, OpReadModifyWrite: 4, OpDelete: 5}
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		oi, iok := order[names[i]]
		oj, jok := order[names[j]]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		default:
			return names[i] < names[j]
		}
	})
	return names
}

var (
	// stdoutMu serializes the redirection of os.Stdout around go-ycsb's workload creation.
	stdoutMu sync.Mutex
	// measureOnce initializes go-ycsb's global measurement, which its workload F writes to.
	measureOnce sync.Once
)

// Run runs the benchmark cfg describes against db: the load phase if cfg.Load, then the run phase.
// It does not close db. When ctx ends early it returns what it measured so far, marked truncated,
// together with ctx's error.
func Run(ctx context.Context, cfg Config, db goycsb.DB) (*Report, error) {
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = DefaultMaxDuration
	}
	if cfg.TimelineInterval <= 0 {
		cfg.TimelineInterval = time.Second
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.AbortAfterFailures == 0 {
		cfg.AbortAfterFailures = DefaultAbortAfterFailures
	}
	if cfg.System == "" {
		cfg.System = System(cfg.Target)
	}
	if !(cfg.Rate >= 0) {
		return nil, fmt.Errorf("ycsb: rate %v must be 0 (unpaced) or positive", cfg.Rate)
	}
	p, err := cfg.Properties()
	if err != nil {
		return nil, err
	}
	measureOnce.Do(func() {
		mp := properties.NewProperties()
		mustSet(mp, prop.MeasurementType, "histogram")
		measurement.InitMeasure(mp)
	})
	wl, err := createWorkload(p)
	if err != nil {
		return nil, err
	}
	defer wl.Close()

	rep := &Report{
		Workload:     normalizeWorkload(cfg.Workload),
		System:       cfg.System,
		Target:       cfg.Target,
		Hosts:        cfg.Hosts,
		Records:      cfg.Records,
		Threads:      cfg.Threads,
		Rate:         cfg.Rate,
		Distribution: p.GetString(prop.RequestDistribution, prop.RequestDistributionDefault),
		StartedAt:    time.Now().UTC(),
		Operations:   map[string]OpStats{},
		Properties:   p.Map(),
	}
	var tl *timeline
	if cfg.Timeline {
		tl = &timeline{}
	}
	var mu sync.Mutex // held by a worker while it runs workload code; see measuredDB
	mdb := &measuredDB{db: db, mu: &mu}

	if cfg.Load {
		ph := runPhase(ctx, cfg, "load", cfg.Records, func(tctx context.Context) error { return wl.DoInsert(tctx, mdb) }, wl, mdb, tl)
		rep.Load = &Phase{Ops: ph.done, Errors: ph.errors, DurationS: ph.dur.Seconds(), Throughput: ph.throughput(),
			Truncated: ph.done < cfg.Records, Operations: ph.ops, ErrorSample: ph.errSample}
		if err := ph.err(ctx); err != nil {
			rep.Truncated = true
			rep.Timeline = tl.result()
			return rep, fmt.Errorf("load phase: %w", err)
		}
	}
	ph := runPhase(ctx, cfg, "run", cfg.Ops, func(tctx context.Context) error { return wl.DoTransaction(tctx, mdb) }, wl, mdb, tl)
	rep.Ops, rep.Errors, rep.DurationS, rep.Throughput = ph.done, ph.errors, ph.dur.Seconds(), ph.throughput()
	rep.Operations, rep.ErrorSample, rep.Truncated = ph.ops, ph.errSample, ph.done < cfg.Ops
	rep.Timeline = tl.result()
	if err := ph.err(ctx); err != nil {
		return rep, fmt.Errorf("run phase: %w", err)
	}
	return rep, nil
}

// createWorkload creates go-ycsb's core workload from p. The workload announces its key range on
// stdout, which would corrupt a JSON report: its creation runs with os.Stdout pointing at stderr.
func createWorkload(p *properties.Properties) (goycsb.Workload, error) {
	creator := goycsb.GetWorkloadCreator("core")
	if creator == nil {
		return nil, errors.New("go-ycsb core workload is not registered")
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	saved := os.Stdout
	os.Stdout = os.Stderr
	defer func() { os.Stdout = saved }()
	return creator.Create(p)
}

// phaseResult is the outcome of one phase.
type phaseResult struct {
	done, errors int64
	dur          time.Duration
	ops          map[string]OpStats
	errSample    string
	aborted      bool
}

// err is why the phase stopped early, if it did for a reason other than its maximum duration.
func (r phaseResult) err(ctx context.Context) error {
	if r.aborted {
		return fmt.Errorf("stopped after the first %d operations all failed (%s)", r.done, r.errSample)
	}
	return ctx.Err()
}

func (r phaseResult) throughput() float64 {
	if r.dur <= 0 {
		return 0
	}
	return float64(r.done) / r.dur.Seconds()
}

// runPhase runs op total times on cfg.Threads workers, bounded by cfg.MaxDuration and ctx.
func runPhase(ctx context.Context, cfg Config, name string, total int64, op func(context.Context) error,
	wl goycsb.Workload, mdb *measuredDB, tl *timeline) phaseResult {
	pctx, cancel := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancel()
	ph := &phase{cfg: cfg, name: name, total: total, tl: tl, cancel: cancel, start: time.Now()}
	if name == "run" {
		ph.rate = cfg.Rate // the load phase inserts as fast as it can
	}
	tl.startPhase(name, ph.start)

	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		ph.report(stopProgress)
	}()

	threads := make([]*threadState, cfg.Threads)
	var wg sync.WaitGroup
	for i := range cfg.Threads {
		st := newThreadState()
		threads[i] = st
		wg.Go(func() { ph.thread(pctx, i, st, op, wl, mdb) })
	}
	wg.Wait()
	end := time.Now()
	close(stopProgress)
	<-progressDone
	tl.flush(end)

	res := phaseResult{done: ph.done.Load(), errors: ph.errCount.Load(), dur: end.Sub(ph.start), aborted: ph.aborted.Load()}
	res.ops, res.errSample = mergeThreads(threads)
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "[%s workload %s %s] done: %d/%d ops in %.1fs, %.0f ops/s, %d errors\n",
			cfg.Target, normalizeWorkload(cfg.Workload), name, res.done, total, res.dur.Seconds(), res.throughput(), res.errors)
	}
	return res
}

// phase is one phase (load or run) under way: its operations claimed, done and failed.
type phase struct {
	cfg    Config
	name   string
	total  int64
	rate   float64 // operations a second (0: as fast as the threads go)
	tl     *timeline
	cancel context.CancelFunc
	start  time.Time

	claimed, done, errCount atomic.Int64
	aborted, succeeded      atomic.Bool
}

// report flushes the timeline every TimelineInterval and prints progress every ProgressInterval
// until stop is closed.
func (ph *phase) report(stop <-chan struct{}) {
	cfg := ph.cfg
	if cfg.Progress == nil && ph.tl == nil {
		return
	}
	progress := time.NewTicker(cfg.ProgressInterval)
	defer progress.Stop()
	second := time.NewTicker(cfg.TimelineInterval)
	defer second.Stop()
	last, lastT := int64(0), ph.start
	for {
		select {
		case <-stop:
			return
		case now := <-second.C:
			ph.tl.flush(now)
		case now := <-progress.C:
			if cfg.Progress == nil {
				continue
			}
			d := ph.done.Load()
			rate := float64(d-last) / now.Sub(lastT).Seconds()
			fmt.Fprintf(cfg.Progress, "[%s %s %s] %5.1fs: %d/%d ops, %.0f ops/s, %d errors\n",
				cfg.Target, "workload "+normalizeWorkload(cfg.Workload), ph.name,
				now.Sub(ph.start).Seconds(), d, ph.total, rate, ph.errCount.Load())
			last, lastT = d, now
		}
	}
}

// thread runs operations as thread id until the phase's operations are all claimed or pctx ends.
func (ph *phase) thread(pctx context.Context, id int, st *threadState, op func(context.Context) error,
	wl goycsb.Workload, mdb *measuredDB) {
	threads := ph.cfg.Threads
	tctx := wl.InitThread(pctx, id, threads)
	tctx = mdb.InitThread(context.WithValue(tctx, threadKey{}, st), id, threads)
	defer wl.CleanupThread(tctx)
	defer mdb.CleanupThread(tctx)
	for pctx.Err() == nil {
		k := ph.claimed.Add(1)
		if k > ph.total || !pace(pctx, ph.start, k-1, ph.rate) {
			break
		}
		st.calls = st.calls[:0]
		mdb.mu.Lock()
		err := op(tctx)
		mdb.mu.Unlock()
		if pctx.Err() != nil {
			return // stopped mid-operation: its outcome is not a measurement
		}
		kind, lat, opErr := st.classify(err)
		st.record(kind, lat, opErr)
		ph.tl.record(lat, opErr != nil)
		if opErr != nil {
			ph.errCount.Add(1)
		} else {
			ph.succeeded.Store(true)
		}
		if d := ph.done.Add(1); ph.cfg.AbortAfterFailures > 0 && d >= ph.cfg.AbortAfterFailures && !ph.succeeded.Load() {
			ph.aborted.Store(true)
			ph.cancel()
		}
	}
}

// mergeThreads sums the threads' counts and histograms per operation, and keeps the first error
// sample found.
func mergeThreads(threads []*threadState) (map[string]OpStats, string) {
	ops := map[string]OpStats{}
	sample := ""
	merged := map[string]*hdrhistogram.Histogram{}
	counts := map[string]*opCount{}
	for _, st := range threads {
		for k, c := range st.counts {
			if counts[k] == nil {
				counts[k] = &opCount{}
				merged[k] = newHist()
			}
			counts[k].n += c.n
			counts[k].errs += c.errs
			merged[k].Merge(st.hists[k])
			if sample == "" && st.errSample != "" {
				sample = st.errSample
			}
		}
	}
	for k, c := range counts {
		ops[k] = stats(c, merged[k])
	}
	return ops, sample
}

// pace waits until operation k (from 0) of a phase started at start is due at rate operations a
// second (rate 0: at once); false when ctx ended first.
func pace(ctx context.Context, start time.Time, k int64, rate float64) bool {
	if rate <= 0 {
		return true
	}
	due := start.Add(time.Duration(float64(k) / rate * float64(time.Second)))
	return stopper.SleepContext(ctx, time.Until(due)) == nil
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(minLatencyUs, maxLatencyUs, sigFigs) }

func recordLatency(h *hdrhistogram.Histogram, lat time.Duration) {
	us := min(max(lat.Microseconds(), minLatencyUs), maxLatencyUs)
	_ = h.RecordValue(us) // within bounds by construction
}

func usToMs(us float64) float64 { return us / 1000 }

func stats(c *opCount, h *hdrhistogram.Histogram) OpStats {
	s := OpStats{Count: c.n, Errors: c.errs}
	if h.TotalCount() > 0 {
		s.AvgMs = usToMs(h.Mean())
		s.P50Ms = usToMs(float64(h.ValueAtQuantile(50)))
		s.P95Ms = usToMs(float64(h.ValueAtQuantile(95)))
		s.P99Ms = usToMs(float64(h.ValueAtQuantile(99)))
		s.P999Ms = usToMs(float64(h.ValueAtQuantile(99.9)))
		s.MaxMs = usToMs(float64(h.Max()))
	}
	return s
}

// threadKey is the context key of a worker's *threadState.
type threadKey struct{}

type opCount struct{ n, errs int64 }

// call is one DB call made by a transaction.
type call struct {
	op  string
	lat time.Duration
	err error
}

// threadState is one worker's own measurements; only that worker touches it until the phase ends.
type threadState struct {
	calls     []call // of the current transaction
	counts    map[string]*opCount
	hists     map[string]*hdrhistogram.Histogram
	errSample string
}

func newThreadState() *threadState {
	return &threadState{counts: map[string]*opCount{}, hists: map[string]*hdrhistogram.Histogram{}}
}

// classify names the transaction just run from the DB calls it made, and returns its latency (the
// time spent in those calls) and its error (the transaction's own, or the first call's that failed).
func (st *threadState) classify(txErr error) (string, time.Duration, error) {
	var (
		lat   time.Duration
		first error
		names []string
	)
	for _, c := range st.calls {
		lat += c.lat
		if first == nil {
			first = c.err
		}
		names = append(names, c.op)
	}
	if txErr != nil {
		first = txErr
	}
	switch {
	case len(names) == 1:
		return names[0], lat, first
	case len(names) == 2 && names[0] == OpRead && names[1] == OpUpdate:
		return OpReadModifyWrite, lat, first
	case len(names) == 0:
		if first == nil {
			first = errors.New("the workload made no database call")
		}
		return "UNKNOWN", lat, first
	default:
		return strings.Join(names, "+"), lat, first
	}
}

func (st *threadState) record(kind string, lat time.Duration, err error) {
	c := st.counts[kind]
	if c == nil {
		c = &opCount{}
		st.counts[kind] = c
		st.hists[kind] = newHist()
	}
	c.n++
	if err != nil {
		c.errs++
		if st.errSample == "" {
			st.errSample = fmt.Sprintf("%s: %v", kind, err)
		}
		return
	}
	recordLatency(st.hists[kind], lat)
}

// measuredDB wraps the benchmarked DB. go-ycsb's core workload shares its generators between threads
// without synchronization, so workers hold mu whenever they run workload code; measuredDB releases mu
// for the duration of each DB call, so that DB calls run concurrently while key and value generation
// is serialized (it takes microseconds). It times every call and notes it in the worker's threadState.
type measuredDB struct {
	db goycsb.DB
	mu *sync.Mutex
}

func (m *measuredDB) Close() error { return m.db.Close() }

func (m *measuredDB) InitThread(ctx context.Context, id, n int) context.Context {
	return m.db.InitThread(ctx, id, n)
}

func (m *measuredDB) CleanupThread(ctx context.Context) { m.db.CleanupThread(ctx) }

// do runs f outside the workload lock, timing it.
func (m *measuredDB) do(ctx context.Context, op string, f func() error) error {
	st, _ := ctx.Value(threadKey{}).(*threadState)
	m.mu.Unlock()
	start := time.Now()
	err := f()
	lat := time.Since(start)
	m.mu.Lock()
	if st != nil {
		st.calls = append(st.calls, call{op: op, lat: lat, err: err})
	}
	return err
}

func (m *measuredDB) Read(ctx context.Context, table, key string, fields []string) (out map[string][]byte, err error) {
	err = m.do(ctx, OpRead, func() error { out, err = m.db.Read(ctx, table, key, fields); return err })
	return out, err
}

func (m *measuredDB) Scan(ctx context.Context, table, startKey string, count int, fields []string) (out []map[string][]byte, err error) {
	err = m.do(ctx, OpScan, func() error { out, err = m.db.Scan(ctx, table, startKey, count, fields); return err })
	return out, err
}

func (m *measuredDB) Update(ctx context.Context, table, key string, values map[string][]byte) error {
	return m.do(ctx, OpUpdate, func() error { return m.db.Update(ctx, table, key, values) })
}

func (m *measuredDB) Insert(ctx context.Context, table, key string, values map[string][]byte) error {
	return m.do(ctx, OpInsert, func() error { return m.db.Insert(ctx, table, key, values) })
}

func (m *measuredDB) Delete(ctx context.Context, table, key string) error {
	return m.do(ctx, OpDelete, func() error { return m.db.Delete(ctx, table, key) })
}

// timeline collects a point per Config.TimelineInterval. A nil *timeline collects nothing.
type timeline struct {
	mu        sync.Mutex
	phase     string
	start     time.Time
	last      time.Time
	hist      *hdrhistogram.Histogram
	ops, errs int64
	points    []Point
}

func (t *timeline) startPhase(name string, start time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.phase, t.start, t.last = name, start, start
	t.hist = newHist()
	t.ops, t.errs = 0, 0
}

func (t *timeline) record(lat time.Duration, failed bool) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ops++
	if failed {
		t.errs++
		return
	}
	recordLatency(t.hist, lat)
}

// flush closes the interval ending at now.
func (t *timeline) flush(now time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := now.Sub(t.last)
	if d <= 0 {
		return
	}
	pt := Point{Phase: t.phase, T: now.Sub(t.start).Seconds(), Unix: float64(now.UnixNano()) / 1e9, Ops: t.ops, Errors: t.errs, Throughput: float64(t.ops) / d.Seconds()}
	if t.hist.TotalCount() > 0 {
		pt.P50Ms = usToMs(float64(t.hist.ValueAtQuantile(50)))
		pt.P99Ms = usToMs(float64(t.hist.ValueAtQuantile(99)))
	}
	t.points = append(t.points, pt)
	t.last = now
	t.hist.Reset()
	t.ops, t.errs = 0, 0
}

func (t *timeline) result() []Point {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Point(nil), t.points...)
}
