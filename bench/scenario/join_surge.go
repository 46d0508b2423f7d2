package scenario

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
)

// The surge variant of the join scenario (the chapter's §2.3.3, Figure 2.7): the offered load rises
// at t = 30 s and a simple elasticity controller, watching the response time its clients see against
// a target, adds the fourth node when the target is violated for a sustained period; the autopilot's
// incremental_join policy then moves the node's share with the variant's strategy.
//
// The controller is a client-side loop, as in the chapter (a monitor combining the response times
// reported by client processes): it runs SensorThreads clients of the scenario's workload from the
// warm-up on, learns their steady latency for LearnFor (the median of its 2-s windows' means), sets
// its target to chapterTargetFactor × that latency (the chapter: 50 ms over a 40 ms steady mean), and
// from then on evaluates 2-second windows of the mean latency of every client it runs (sensor and
// surge); after TriggerWindows consecutive windows over the target it starts the spare node. Nothing
// in it knows when the surge comes. The autopilot cannot start machines, so the decision to add one
// sits with the controller, as it would with an orchestrator; everything after the node starts is the
// autopilot's.
type surgeConfig struct {
	Scenario       string // its Workload chooses the keys, as for the runner's clients
	Records        int
	ReadFraction   float64
	SensorThreads  int
	LearnFor       time.Duration
	TriggerWindows int
}

func init() {
	const (
		short = iota
		long
	)
	for _, v := range []struct {
		name string
		read float64
		size int
	}{{"join-surge", 0.95, short}, {"join-surge-a", 0.5, short}, {"join-surge-long", 0.95, long}} {
		s := joinBase()
		s.Name, s.ReadFraction = v.name, v.read
		// 14 + 2 sensor threads before the surge, +8 at the surge: 16 → 24, the chapter's 20 → 30.
		s.Threads, s.SurgeThreads = 14, 8
		s.Duration = 150 * time.Second
		ctlAt, surgeAt, learn := 10*time.Second, 30*time.Second, 16*time.Second
		if v.size == long {
			// join-long's data and proportions (join.go): a join of several 10-s bins. The old
			// nodes' compactions begin 35-50 s into such a run and then run nearly continuously,
			// so the controller learns its target after their onset, and the surge comes where
			// join-long's node starts.
			s.Records, s.Duration = 4*s.Records, 360*time.Second
			ctlAt, surgeAt, learn = 50*time.Second, 90*time.Second, 35*time.Second
		}
		cfg := surgeConfig{Scenario: s.Name, Records: s.Records, ReadFraction: s.ReadFraction,
			SensorThreads: 2, LearnFor: learn, TriggerWindows: 3}
		// Incremental and parallel, as in Figure 2.7; the join's other variants stay available by name.
		for i := range s.Variants[2:] {
			s.Variants[2+i].Optional = true
		}
		s.Description = fmt.Sprintf("as %s, but the offered load rises from 16 to 24 threads at t=%s and a latency controller adds the 4th node (incremental vs parallel; Figure 2.7)",
			map[bool]string{true: "join", false: "join-a"}[v.read > 0.9], surgeAt)
		if v.size == long {
			s.Description = fmt.Sprintf("as join-surge with join-long's data (640k records, ranges of ~7 MB) over %s: the controller learns from t=%s, the load rises at t=%s (Figure 2.7 in the chapter's proportions: a join of several bins)",
				s.Duration, ctlAt, surgeAt)
		}
		ctl := &surgeController{cfg: cfg}
		s.Events = []Event{
			{At: 0, What: "balance leaders", Do: BalanceLeaders()},
			{At: ctlAt, What: "controller", Do: ctl.start},
			{At: surgeAt, What: surgeLabel, Do: ctl.surge},
		}
		Register(s)
	}
}

const surgeLabel = "load surge"

type surgeController struct {
	cfg surgeConfig
	tr  *joinTrace // the current run's
}

// start starts the sensor clients and the controller loop; it returns at once.
func (sc *surgeController) start(ctx context.Context, env *Env) (string, error) {
	tr := newTrace("controller")
	sc.tr = tr
	cfg := sc.cfg
	if env.Records > 0 { // --records: the surge's clients choose among the keys the run loaded
		cfg.Records = env.Records
	}
	g := newLoadGen(ctx, env.Client, cfg, env.values, tr.fired)
	tr.mu.Lock()
	tr.load = g
	tr.mu.Unlock()
	g.add(sc.cfg.SensorThreads)
	go sc.loop(ctx, env, tr, g)
	return fmt.Sprintf("%d sensor clients, learning for %s", sc.cfg.SensorThreads, sc.cfg.LearnFor), nil
}

// surge raises the offered load.
func (sc *surgeController) surge(ctx context.Context, env *Env) (string, error) {
	if sc.tr == nil || sc.tr.load == nil {
		return "", fmt.Errorf("no controller running")
	}
	sc.tr.load.add(env.SurgeThreads)
	return fmt.Sprintf("+%d client threads", env.SurgeThreads), nil
}

func (sc *surgeController) loop(ctx context.Context, env *Env, tr *joinTrace, g *loadGen) {
	defer close(tr.done)
	wait := func(until time.Time) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Until(until)):
			return true
		}
	}
	learnEnd := g.base.Add(sc.cfg.LearnFor)
	if !wait(learnEnd.Add(100 * time.Millisecond)) {
		return
	}
	base := g.steadyMean(g.base.Add(2*time.Second), learnEnd) // the first seconds warm the clients up
	if math.IsNaN(base) {
		return
	}
	target := chapterTargetFactor * base
	over := 0
	var firstOver time.Time
	for w := learnEnd; ; w = w.Add(chapterWindowS * time.Second) {
		if !wait(w.Add(chapterWindowS*time.Second + 100*time.Millisecond)) {
			return
		}
		m, n := g.mean(w, w.Add(chapterWindowS*time.Second))
		if n == 0 || m <= target {
			over = 0
			continue
		}
		if over == 0 {
			firstOver = w
		}
		over++
		if over < sc.cfg.TriggerWindows {
			continue
		}
		tr.mu.Lock()
		tr.trigger, tr.violatedSince = time.Now(), firstOver
		tr.triggerWhy = fmt.Sprintf("controller: its clients' 2-s mean latency over the target %.1f ms (%.2f x their %.1f ms steady 2-s mean, the median) for %d windows, last %.1f ms: add a node",
			target, chapterTargetFactor, base, over, m)
		tr.mu.Unlock()
		_, _ = joinNode(ctx, env, tr)
		return
	}
}

// loadGen runs extra closed-loop clients of the scenario's workload and records their operations
// per second since base, so that the report adds them to the run's series.
type loadGen struct {
	ctx  context.Context
	cl   *client.Client
	cfg  surgeConfig
	base time.Time
	vals values

	mu      sync.Mutex
	threads int
	secs    []loadSec
	stopped bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type loadSec struct {
	ops, errs int64
	hist      *hdrhistogram.Histogram
}

func newLoadGen(ctx context.Context, cl *client.Client, cfg surgeConfig, vals values, base time.Time) *loadGen {
	ctx, cancel := context.WithCancel(ctx)
	return &loadGen{ctx: ctx, cancel: cancel, cl: cl, cfg: cfg, base: base, vals: vals}
}

// add starts n more clients.
func (g *loadGen) add(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	for k := 0; k < n; k++ {
		w := g.threads
		g.threads++
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			// The same workload as the runner's clients (run.go).
			rng := rand.New(rand.NewPCG(uint64(w)+1001, uint64(time.Now().UnixNano())))
			keys := WorkloadOf(g.cfg.Scenario).chooser(rng, g.cfg.Records)
			for g.ctx.Err() == nil {
				read := rng.Float64() < g.cfg.ReadFraction
				k := key(keys.next(read, false))
				t0 := time.Now()
				var err error
				if read {
					_, _, err = g.cl.Get(g.ctx, k)
				} else {
					err = g.cl.Put(g.ctx, k, g.vals.next(rng))
				}
				lat := time.Since(t0)
				if g.ctx.Err() != nil {
					return
				}
				g.record(t0.Add(lat), lat, err)
			}
		}()
	}
}

func (g *loadGen) record(at time.Time, lat time.Duration, err error) {
	i := int(at.Sub(g.base) / time.Second)
	if i < 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for len(g.secs) <= i {
		g.secs = append(g.secs, loadSec{hist: benchutil.NewHist()})
	}
	if err != nil {
		g.secs[i].errs++
		return
	}
	g.secs[i].ops++
	_ = g.secs[i].hist.RecordValue(benchutil.ClampUs(lat))
}

// mean is the mean latency (ms) of the operations completed in [from, to) (whole seconds since base)
// and their count.
func (g *loadGen) mean(from, to time.Time) (float64, int64) {
	a, b := int(from.Sub(g.base)/time.Second), int(to.Sub(g.base)/time.Second)
	h := benchutil.NewHist()
	g.mu.Lock()
	for i := max(a, 0); i < b && i < len(g.secs); i++ {
		h.Merge(g.secs[i].hist)
	}
	g.mu.Unlock()
	return h.Mean() / 1000, h.TotalCount()
}

// steadyMean is the median of the 2-s windows' mean latencies (ms) in [from, to), NaN without any
// operation. The trigger compares single 2-s windows with the target, so the target is set from a
// typical window. A mean over the whole learning period follows the old nodes' compaction bursts
// (join-surge-long learns while they compact); in session 19 one run learned 16.7 ms against
// 12.4–14.6 ms in the others and its controller added the node 147 s after the surge.
func (g *loadGen) steadyMean(from, to time.Time) float64 {
	var ms []float64
	for w := from; !w.Add(chapterWindowS * time.Second).After(to); w = w.Add(chapterWindowS * time.Second) {
		if m, n := g.mean(w, w.Add(chapterWindowS*time.Second)); n > 0 {
			ms = append(ms, m)
		}
	}
	return median(ms)
}

func (g *loadGen) stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}

// mergeInto adds the clients' operations to the run's seconds (second i since base is the run's
// second baseT+i), recomputes those seconds' percentiles and the run's summary.
func (g *loadGen) mergeInto(rr *RunReport, perSec []*hdrhistogram.Snapshot, baseT float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var added int64
	for i, s := range g.secs {
		// Run point j covers [j, j+1) s of the run (its T is j+1).
		j := int(baseT + float64(i) + 0.5)
		if j < 0 || j >= len(rr.Series) || j >= len(perSec) {
			continue
		}
		p := &rr.Series[j]
		p.Ops += s.ops
		p.Errors += s.errs
		added += s.ops
		h := hdrhistogram.Import(perSec[j])
		h.Merge(s.hist)
		perSec[j] = h.Export()
		p.P50Ms = benchutil.UsToMs(h.ValueAtQuantile(50))
		p.P99Ms = benchutil.UsToMs(h.ValueAtQuantile(99))
	}
	all := benchutil.NewHist()
	for _, s := range perSec {
		all.Merge(hdrhistogram.Import(s))
	}
	rr.Summary.Ops += added
	if n := len(rr.Series); n > 0 {
		rr.Summary.Throughput = float64(rr.Summary.Ops) / float64(n)
	}
	rr.Summary.P50Ms = benchutil.UsToMs(all.ValueAtQuantile(50))
	rr.Summary.P99Ms = benchutil.UsToMs(all.ValueAtQuantile(99))
}
