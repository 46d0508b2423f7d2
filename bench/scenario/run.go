package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Options override a scenario's settings for one invocation; zero fields keep the scenario's.
type Options struct {
	Dir      string // data directories (required)
	Out      string // report.json and PNGs (required)
	Duration time.Duration
	Records  int
	Threads  int
	// CacheBytes is each node's block cache (default 8 MiB, small so the hit ratio moves).
	CacheBytes int64
	// Progress receives a text progress bar, one update per second; nil for none.
	Progress io.Writer
	// Device overrides the scenario's emulated disk per node (nil: the scenario's, or DefaultDevice);
	// NoEmulatedDisk turns emulated disks off (`shoal bench scenario --no-emulated-disk`).
	Device         *emudisk.Options
	NoEmulatedDisk bool
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
	return &c
}

// Settings are the effective settings of a report.
type Settings struct {
	Nodes        int     `json:"nodes"`
	Records      int     `json:"records"`
	DurationS    float64 `json:"duration_s"`
	Threads      int     `json:"threads"`
	ValueBytes   int     `json:"value_bytes"`
	ReadFraction float64 `json:"read_fraction"`
	CacheBytes   int64   `json:"cache_bytes"`
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
}

// Point is one second of one run. HitRatio is null when the block cache saw no access that second.
type Point struct {
	T        float64  `json:"t"`
	Ops      int64    `json:"ops"`
	P50Ms    float64  `json:"p50_ms"`
	P99Ms    float64  `json:"p99_ms"`
	HitRatio *float64 `json:"hit_ratio"`
	Errors   int64    `json:"errors"`
}

// EventMark is an event as it fired.
type EventMark struct {
	T     float64 `json:"t"`
	What  string  `json:"what"`
	Error string  `json:"error,omitempty"`
}

// RunReport is one run: the policy on or off.
type RunReport struct {
	PolicyOn bool        `json:"policy_on"`
	Summary  Summary     `json:"summary"`
	Series   []Point     `json:"series"`
	Events   []EventMark `json:"events"`
	// Device sums the emulated disks' counters over the nodes for the whole run (load included);
	// absent when the nodes had none.
	Device *emudisk.Stats `json:"device,omitempty"`
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
	}
	if opts.Duration > 0 {
		sc.Duration = opts.Duration
	}
	if sc.Duration <= 0 {
		sc.Duration = 10 * time.Second
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 8 << 20
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Scenario: sc.Name, Policy: sc.Policy, Settings: Settings{
		Nodes: sc.Nodes, Records: sc.Records, DurationS: sc.Duration.Seconds(), Threads: sc.Threads,
		ValueBytes: sc.ValueBytes, ReadFraction: sc.ReadFraction, CacheBytes: opts.CacheBytes,
		Device: EffectiveDevice(sc, opts),
	}}
	for i, on := range []bool{true, false} {
		label := "off"
		if on {
			label = "on"
		}
		rr, err := runOnce(ctx, sc, opts, rep.Settings.Device, filepath.Join(opts.Dir, "policy-"+label), on, fmt.Sprintf("run %d/2 %s=%s", i+1, sc.Policy, label))
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

// runOnce starts a fresh cluster, waits for it to be fully replicated, loads the records, sets the
// policy, runs the workload with the events and tears the cluster down.
func runOnce(ctx context.Context, sc Scenario, opts Options, device *emudisk.Options, dir string, policyOn bool, label string) (*RunReport, error) {
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			fmt.Fprintf(opts.Progress, "\r\033[K%s: "+format, append([]any{label}, args...)...)
		}
	}
	progress("starting %d nodes", sc.Nodes)
	c, err := startCluster(ctx, dir, sc.Nodes, opts.CacheBytes, device)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	cl, err := client.New(ctx, client.Config{Addrs: c.addrs(), RequestTimeout: 2 * time.Second, MaxAttempts: 20})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	env := &Env{c: c, Client: cl}

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

	value := make([]byte, sc.ValueBytes)
	for i := range value {
		value[i] = byte('a' + i%26)
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
	for w := 0; w < sc.Threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= sc.Records {
					return
				}
				if err := cl.Put(ctx, key(i), value); err != nil {
					loadErr.Store(err)
					return
				}
				loaded.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stopLoad)
	if err, _ := loadErr.Load().(error); err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	if sc.Policy != "" {
		if err := cl.SetPolicy(ctx, sc.Policy, policyOn); err != nil {
			return nil, fmt.Errorf("set policy %s=%v: %w", sc.Policy, policyOn, err)
		}
	}
	c.cacheDelta() // start the block-cache counters from here

	// The measured workload: closed loop, Threads workers, zipfian keys.
	rr := &RunReport{PolicyOn: policyOn}
	var (
		mu       sync.Mutex
		secHist  = benchutil.NewHist()
		allHist  = benchutil.NewHist()
		secOps   int64
		secErrs  int64
		totalOps int64
		totalErr int64
	)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for w := 0; w < sc.Threads; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w)+1, uint64(start.UnixNano())))
			zipf := rand.NewZipf(rng, 1.1, 1, uint64(sc.Records-1))
			for wctx.Err() == nil {
				// Scatter the zipfian ranks over the key space so hot keys are not adjacent.
				k := key(int((zipf.Uint64() * 2654435761) % uint64(sc.Records)))
				t0 := time.Now()
				var err error
				if rng.Float64() < sc.ReadFraction {
					_, _, err = cl.Get(wctx, k)
				} else {
					err = cl.Put(wctx, k, value)
				}
				lat := time.Since(t0)
				if wctx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil {
					secErrs++
				} else {
					secOps++
					_ = secHist.RecordValue(benchutil.ClampUs(lat))
					_ = allHist.RecordValue(benchutil.ClampUs(lat))
				}
				mu.Unlock()
			}
		}(w)
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
			m := EventMark{T: at, What: strings.TrimSpace(e.What + " " + desc)}
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
		secHist.Reset()
		mu.Unlock()
		h, m := c.cacheDelta()
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
	rr.Summary = Summary{Ops: totalOps, Throughput: float64(totalOps) / elapsed, Errors: totalErr,
		P50Ms: benchutil.UsToMs(allHist.ValueAtQuantile(50)), P99Ms: benchutil.UsToMs(allHist.ValueAtQuantile(99))}
	if rr.Events == nil {
		rr.Events = []EventMark{}
	}
	if device != nil {
		st := c.deviceStats()
		rr.Device = &st
	}
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, "\r\033[K%s: %d ops, %.0f ops/s, p50 %.2fms, p99 %.2fms, %d errors\n", label,
			rr.Summary.Ops, rr.Summary.Throughput, rr.Summary.P50Ms, rr.Summary.P99Ms, rr.Summary.Errors)
	}
	return rr, nil
}
