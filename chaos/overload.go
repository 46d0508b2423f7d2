package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/chaos/netfault"
	"github.com/shoaldb/shoal/client"
)

// OverloadConfig configures the overload benchmark: a 3-node cluster of `shoal start` processes is
// offered Factor times the write rate it sustains, open loop (arrivals do not wait for answers),
// once with admission control on and once off, and each node's resident memory is sampled
// throughout (docs/design/admission.md).
type OverloadConfig struct {
	// Bin is the shoal binary; Dir holds the clusters' data and logs (the caller removes it).
	Bin, Dir string
	// Probe is how long the sustainable rate is measured, closed loop (default 20 s: long enough to
	// fill the memtables and caches, so that the steady RSS includes them).
	Probe time.Duration
	// Duration is how long the overload is offered (default 30 s).
	Duration time.Duration
	// Factor multiplies the sustainable rate into the offered one (default 10).
	Factor float64
	// Workers are the closed-loop clients of the probe (default 32).
	Workers int
	// ValueBytes is the size of each written value (default 1024).
	ValueBytes int
	// RequestTimeout is each offered write's deadline (default 10 s): the longer clients wait, the
	// more a node without admission control holds for them.
	RequestTimeout time.Duration
	// MaxOutstanding caps the generator's own requests in flight, to protect the driver; arrivals
	// beyond it are counted as not sent (default 40000).
	MaxOutstanding int
	// ProfileDir, if set, receives each node's heap profile taken near the end of the overload.
	ProfileDir string
	// NodeArgs are more `shoal start` flags for every node of both clusters (e.g. other limits).
	NodeArgs []string
	// Log receives progress lines (default: discarded).
	Log io.Writer
}

func (c OverloadConfig) withDefaults() (OverloadConfig, error) {
	if c.Bin == "" || c.Dir == "" {
		return c, errors.New("overload: Bin and Dir are required")
	}
	if c.Probe == 0 {
		c.Probe = 20 * time.Second
	}
	if c.Duration == 0 {
		c.Duration = 30 * time.Second
	}
	if c.Factor == 0 {
		c.Factor = 10
	}
	if c.Workers == 0 {
		c.Workers = 32
	}
	if c.ValueBytes == 0 {
		c.ValueBytes = 1024
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 10 * time.Second
	}
	if c.MaxOutstanding == 0 {
		c.MaxOutstanding = 40000
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Factor < 1 || c.ValueBytes < 1 || c.Workers < 1 || c.MaxOutstanding < 1 {
		return c, fmt.Errorf("overload: factor %v, value bytes %d, workers %d, max outstanding %d: all must be positive (factor >= 1)",
			c.Factor, c.ValueBytes, c.Workers, c.MaxOutstanding)
	}
	return c, nil
}

// OverloadPhase is one cluster's result.
type OverloadPhase struct {
	Admission bool
	// SustainableOps is the closed-loop write rate this cluster sustained in the probe.
	SustainableOps float64
	// OfferedOps is the arrival rate the generator achieved (asked: Factor × the first cluster's
	// sustainable rate, the same for both clusters).
	OfferedOps, GoodputOps float64
	// Outcomes of the offered writes: acknowledged, refused with OVERLOADED, timed out or
	// ambiguous, failed otherwise, and not sent (the generator's own cap).
	Acked, Overloaded, Timeouts, Other, NotSent int
	// P50Ms and P99Ms are the acknowledged writes' latencies.
	P50Ms, P99Ms float64
	// SteadyRSS is each node's RSS after the probe; PeakRSS the highest sampled under overload
	// (bytes). Drain is how long the cluster took to answer every request once the arrivals stopped.
	SteadyRSS, PeakRSS []int64
	Drain              time.Duration
	// Lost counts acknowledged writes not read back afterwards (must be 0).
	Lost int
	// Samples holds the first error message of each kind (timeout, other).
	Samples map[string]string
	// PeakHeap is each node's highest Go heap in use (go_memstats_heap_inuse_bytes, sampled from
	// /metrics): what requests, proposals and queues occupy, without Pebble's cache and memtables,
	// which live outside the Go heap and are bounded by configuration.
	PeakHeap []int64
	// RSSQuarters is the nodes' highest RSS in each quarter of the overload (bytes, summed over the
	// nodes): flat means bounded, rising means memory grows with the backlog.
	RSSQuarters [4]int64
}

// OverloadReport is the benchmark's outcome.
type OverloadReport struct {
	Factor     float64
	ValueBytes int
	Duration   time.Duration
	Phases     []OverloadPhase
}

// Table renders the report.
func (r *OverloadReport) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "overload: %.0fx the sustainable write rate for %v, %d-byte values, open loop\n", r.Factor, r.Duration, r.ValueBytes)
	fmt.Fprintf(&b, "%-9s %9s %9s %9s %8s %10s %8s %8s %8s %8s %8s %-26s %-26s %7s %5s %s\n", "admission", "sustain/s", "offered/s", "goodput/s",
		"acked", "overloaded", "timeout", "other", "notsent", "p50ms", "p99ms", "steady RSS MiB (n1 n2 n3)", "peak RSS MiB (n1 n2 n3)", "drain", "lost", "peak Go heap MiB")
	for _, p := range r.Phases {
		mode := "off"
		if p.Admission {
			mode = "on"
		}
		fmt.Fprintf(&b, "%-9s %9.0f %9.0f %9.0f %8d %10d %8d %8d %8d %8.1f %8.1f %-26s %-26s %7s %5d %s\n", mode, p.SustainableOps, p.OfferedOps, p.GoodputOps,
			p.Acked, p.Overloaded, p.Timeouts, p.Other, p.NotSent, p.P50Ms, p.P99Ms, mibs(p.SteadyRSS), mibs(p.PeakRSS), p.Drain.Round(100*time.Millisecond), p.Lost, mibs(p.PeakHeap))
	}
	return b.String()
}

func mibs(v []int64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatInt(x>>20, 10)
	}
	return strings.Join(parts, " ")
}

// RunOverload runs the benchmark: admission on, then off, on fresh clusters.
func RunOverload(ctx context.Context, cfg OverloadConfig) (*OverloadReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rep := &OverloadReport{Factor: cfg.Factor, ValueBytes: cfg.ValueBytes, Duration: cfg.Duration}
	var offered float64
	for _, on := range []bool{true, false} {
		p, err := overloadPhase(ctx, cfg, on, &offered)
		if p != nil {
			rep.Phases = append(rep.Phases, *p)
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// overloadPhase runs one cluster. *offered is set by the first phase and reused by the second.
func overloadPhase(ctx context.Context, cfg OverloadConfig, on bool, offered *float64) (*OverloadPhase, error) {
	name := map[bool]string{true: "on", false: "off"}[on]
	logf := func(format string, args ...any) {
		fmt.Fprintf(cfg.Log, "overload[admission %s] %s\n", name, fmt.Sprintf(format, args...))
	}
	oc, err := startOverloadCluster(ctx, cfg, name)
	if err != nil {
		return nil, err
	}
	defer oc.close()
	p := &OverloadPhase{Admission: on, Samples: map[string]string{}}
	w := newOverloadWrites(cfg.ValueBytes, name)

	oc.probe(ctx, cfg, w, p)
	if *offered == 0 {
		*offered = cfg.Factor * p.SustainableOps
	}
	for _, n := range oc.r.nodes {
		p.SteadyRSS = append(p.SteadyRSS, rss(n.pid()))
	}
	logf("sustained %.0f writes/s closed loop (%d workers); offering %.0f/s for %v", p.SustainableOps, cfg.Workers, *offered, cfg.Duration)

	oc.offer(ctx, cfg, w, p, *offered, name, logf)
	logf("offered %.0f/s: %d acknowledged (%.0f/s), %d overloaded, %d timed out, %d other, %d not sent; p99 %.1f ms; peak RSS %s MiB (steady %s); drained in %v",
		p.OfferedOps, p.Acked, p.GoodputOps, p.Overloaded, p.Timeouts, p.Other, p.NotSent, p.P99Ms, mibs(p.PeakRSS), mibs(p.SteadyRSS), p.Drain.Round(time.Millisecond))

	if err := oc.readBack(ctx, w, p); err != nil {
		return p, err
	}
	for k, v := range p.Samples {
		logf("first %s error: %s", k, v)
	}
	logf("RSS of the three nodes by quarter of the overload: %s MiB; peak Go heap per node %s MiB", mibs(p.RSSQuarters[:]), mibs(p.PeakHeap))
	logf("read back: %d acknowledged writes missing", p.Lost)
	return p, nil
}

// overloadCluster is one phase's three nodes and its two clients.
type overloadCluster struct {
	r  *run
	pn netfault.Network
	// once makes one attempt per write: a refusal or timeout is an outcome to count, not to retry
	// (retries would multiply the offered load).
	once *client.Client
	// retrying serves the probe and the read-back.
	retrying *client.Client
}

// startOverloadCluster starts three nodes with admission control on or off (name) and connects the
// clients. On an error, what was started is stopped.
func startOverloadCluster(ctx context.Context, cfg OverloadConfig, name string) (oc *overloadCluster, err error) {
	dir := filepath.Join(cfg.Dir, "admission-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pn, err := netfault.NewPlain(3)
	if err != nil {
		return nil, err
	}
	oc = &overloadCluster{pn: pn, r: &run{cfg: Config{Bin: cfg.Bin, Dir: dir, Nodes: 3, StartTimeout: 30 * time.Second, NodeArgs: append([]string{"--admission", name}, cfg.NodeArgs...), Log: cfg.Log},
		t0: time.Now(), report: &Report{Ops: map[string]int{}, Actions: map[string]int{}}, net: pn}}
	defer func() {
		if err != nil {
			oc.close()
		}
	}()
	if err := oc.r.startCluster(ctx); err != nil {
		return nil, err
	}
	var addrs []string
	for i := range oc.r.nodes {
		addrs = append(addrs, pn.Addrs(i).Advertise)
	}
	if oc.once, err = client.New(ctx, client.Config{Addrs: addrs, RequestTimeout: cfg.RequestTimeout, MaxAttempts: 1}); err != nil {
		return nil, err
	}
	if oc.retrying, err = client.New(ctx, client.Config{Addrs: addrs, RequestTimeout: 5 * time.Second}); err != nil {
		return nil, err
	}
	return oc, nil
}

// close closes the clients and stops the nodes.
func (oc *overloadCluster) close() {
	for _, cl := range []*client.Client{oc.retrying, oc.once} {
		if cl != nil {
			cl.Close()
		}
	}
	oc.r.stopAll()
}

// overloadWrites makes the phase's keys and value and remembers which writes were acknowledged.
type overloadWrites struct {
	value []byte
	name  string
	seq   atomic.Uint64
	acked sync.Map // key -> struct{}
}

func newOverloadWrites(valueBytes int, name string) *overloadWrites {
	w := &overloadWrites{value: make([]byte, valueBytes), name: name}
	for i := range w.value {
		w.value[i] = byte('a' + i%26)
	}
	return w
}

// nextKey spreads the keys over 256 prefixes (and so over the ranges).
func (w *overloadWrites) nextKey() []byte {
	n := w.seq.Add(1)
	return fmt.Appendf(nil, "%02x/ov/%s/%010d", rand.IntN(256), w.name, n)
}

// probe finds the rate the cluster sustains: closed loop, cfg.Workers writers with the retrying
// client, for cfg.Probe.
func (oc *overloadCluster) probe(ctx context.Context, cfg OverloadConfig, w *overloadWrites, p *OverloadPhase) {
	pctx, cancel := context.WithTimeout(ctx, cfg.Probe)
	defer cancel()
	var probed atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				k := w.nextKey()
				if err := oc.retrying.Put(pctx, k, w.value); err == nil {
					w.acked.Store(string(k), struct{}{})
					probed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	p.SustainableOps = float64(probed.Load()) / cfg.Probe.Seconds()
}

// offer runs the overload: open loop at offered writes/s for cfg.Duration, each write one attempt,
// with the nodes' memory sampled throughout; then it waits for every answer (the drain).
func (oc *overloadCluster) offer(ctx context.Context, cfg OverloadConfig, w *overloadWrites, p *OverloadPhase, offered float64, name string, logf func(string, ...any)) {
	start := time.Now()
	stopSampling := make(chan struct{})
	sampleDone := oc.sampleMemory(ctx, p, start, cfg.Duration, stopSampling)
	hist := hdrhistogram.New(1, 60_000_000, 3) // µs
	var mu sync.Mutex
	sample := func(kind string, err error) {
		mu.Lock()
		if _, ok := p.Samples[kind]; !ok {
			p.Samples[kind] = err.Error()
		}
		mu.Unlock()
	}
	var outstanding atomic.Int64
	var nAcked, nOver, nTimeout, nOther, nNotSent atomic.Int64
	var sent int64
	var owg sync.WaitGroup
	for {
		el := time.Since(start)
		if el >= cfg.Duration || ctx.Err() != nil {
			break
		}
		due := int64(el.Seconds() * offered)
		for ; sent < due; sent++ {
			if outstanding.Load() >= int64(cfg.MaxOutstanding) {
				nNotSent.Add(1)
				continue
			}
			outstanding.Add(1)
			owg.Add(1)
			go func() {
				defer owg.Done()
				defer outstanding.Add(-1)
				k := w.nextKey()
				t0 := time.Now()
				err := oc.once.Put(ctx, k, w.value)
				switch {
				case err == nil:
					w.acked.Store(string(k), struct{}{})
					nAcked.Add(1)
					mu.Lock()
					_ = hist.RecordValue(time.Since(t0).Microseconds())
					mu.Unlock()
				case errors.Is(err, client.ErrOverloaded):
					nOver.Add(1)
				case errors.Is(err, client.ErrTimeout), errors.Is(err, client.ErrAmbiguous):
					nTimeout.Add(1)
					sample("timeout", err)
				default:
					nOther.Add(1)
					sample("other", err)
				}
			}()
		}
		time.Sleep(time.Millisecond)
	}
	arrivals := time.Since(start)
	if cfg.ProfileDir != "" {
		for i := range oc.r.nodes {
			if err := fetchHeap(ctx, oc.pn.Addrs(i).HTTP, filepath.Join(cfg.ProfileDir, fmt.Sprintf("heap-%s-n%d.pb.gz", name, i+1))); err != nil {
				logf("heap profile of n%d: %v", i+1, err)
			}
		}
	}
	drainStart := time.Now()
	owg.Wait()
	p.Drain = time.Since(drainStart)
	close(stopSampling)
	<-sampleDone
	p.OfferedOps = float64(sent-nNotSent.Load()) / arrivals.Seconds()
	p.GoodputOps = float64(nAcked.Load()) / arrivals.Seconds()
	p.Acked, p.Overloaded, p.Timeouts, p.Other, p.NotSent = int(nAcked.Load()), int(nOver.Load()), int(nTimeout.Load()), int(nOther.Load()), int(nNotSent.Load())
	p.P50Ms = float64(hist.ValueAtQuantile(50)) / 1000
	p.P99Ms = float64(hist.ValueAtQuantile(99)) / 1000
}

// sampleMemory records the nodes' peak RSS (every 100 ms, also per quarter of the overload, which
// starts at start and lasts d) and peak Go heap (every 500 ms) in p until stop is closed; the
// returned channel is closed when it has stopped.
func (oc *overloadCluster) sampleMemory(ctx context.Context, p *OverloadPhase, start time.Time, d time.Duration, stop <-chan struct{}) <-chan struct{} {
	p.PeakRSS = make([]int64, len(oc.r.nodes))
	p.PeakHeap = make([]int64, len(oc.r.nodes))
	done := make(chan struct{})
	go func() {
		defer close(done)
		var lastHeap time.Time
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			var sum int64
			for i, n := range oc.r.nodes {
				v := rss(n.pid())
				p.PeakRSS[i] = max(p.PeakRSS[i], v)
				sum += v
			}
			if q := int(4 * time.Since(start) / d); q >= 0 && q < 4 {
				p.RSSQuarters[q] = max(p.RSSQuarters[q], sum)
			}
			if time.Since(lastHeap) >= 500*time.Millisecond {
				lastHeap = time.Now()
				for i := range oc.r.nodes {
					p.PeakHeap[i] = max(p.PeakHeap[i], heapInUse(ctx, oc.pn.Addrs(i).HTTP))
				}
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// readBack counts the acknowledged writes that are missing: it reads everything back, one key
// prefix at a time.
func (oc *overloadCluster) readBack(ctx context.Context, w *overloadWrites, p *OverloadPhase) error {
	found := map[string]bool{}
	for b := 0; b < 256; b++ {
		lo, hi := fmt.Appendf(nil, "%02x/", b), fmt.Appendf(nil, "%02x0", b)
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		kvs, err := oc.retrying.Scan(sctx, lo, hi, 0, false)
		cancel()
		if err != nil {
			return fmt.Errorf("read back prefix %02x: %w", b, err)
		}
		for _, kv := range kvs {
			found[string(kv.Key)] = true
		}
	}
	w.acked.Range(func(k, _ any) bool {
		if !found[k.(string)] {
			p.Lost++
		}
		return true
	})
	return nil
}

// heapInUse reads go_memstats_heap_inuse_bytes from a node's /metrics (0 if it does not answer in
// time: a node starved of CPU may not).
func heapInUse(ctx context.Context, httpAddr string) int64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return int64(v)
		}
	}
	return 0
}

// fetchHeap saves a node's heap profile.
func fetchHeap(ctx context.Context, httpAddr, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/debug/pprof/heap", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET heap profile: %s", resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// rss reads a process's resident set size in bytes (0 if it is gone).
func rss(pid int) int64 {
	if pid == 0 {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
