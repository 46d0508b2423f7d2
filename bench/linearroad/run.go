package linearroad

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/stream"
)

// Arm is one of the benchmark's baselines: where the producer sends events and whether the
// alignment controller (the stream_align policy) runs.
type Arm struct {
	Name       string
	Mode       stream.Mode
	Controller bool
}

// Arms are the baselines, in the order of a run: tasks placed by a hash of the key (state mostly
// remote); tasks placed aligned once, never migrated; aligned with the controller (events follow
// every leadership move, ranges split where the events are). "aligned" is the controller's routing
// without the controller.
var Arms = []Arm{
	{Name: "unaligned", Mode: stream.Unaligned},
	{Name: "placed", Mode: stream.Placed},
	{Name: "controller", Mode: stream.Aligned, Controller: true},
	{Name: "aligned", Mode: stream.Aligned},
}

// ParseArm looks an arm up by name.
func ParseArm(name string) (Arm, error) {
	for _, a := range Arms {
		if a.Name == name {
			return a, nil
		}
	}
	return Arm{}, fmt.Errorf("arm %q: want unaligned, placed, controller or aligned", name)
}

// Config is one run.
type Config struct {
	Arm      Arm
	Nodes    int           // in-process nodes (default 3)
	Ranges   int           // ranges of the segment span, leaders spread round robin (default 2 per node)
	Vehicles int           // default 4000
	Xways    int           // default 1
	Segments int           // per direction (default 40: about 50 vehicles a segment)
	Duration time.Duration // measured (default 30s), after Warmup (default 5s)
	Warmup   time.Duration
	Senders  int // producer goroutines, each owning a share of the segments (default 16)
	Batch    int // events per Ingest call at most (default 64)
	// JoinAt, when set, adds a node this far into the measured window: incremental_join moves
	// replicas and leaderships to it (and rebalance evens out the rest) in every arm.
	JoinAt time.Duration
	// AlignEvents, AlignLatency and AlignSaturated are stream_align's floor (events/s per range), its
	// backlog latency (a range's p90) and the utilization at which it deems a node saturated, in the
	// controller arm (0: the policy's defaults; AlignSaturated above 1: no node is ever saturated).
	AlignEvents    float64
	AlignLatency   time.Duration
	AlignSaturated float64
	// AlignFor is how long a range must stay hot before the controller splits it (0: the policy's
	// default).
	AlignFor time.Duration
	// AlignSamples is how many sampled events a range's recent windows must hold before the controller
	// splits it (0: the policy's default, 256 — five one-second windows at about 50 events/s).
	AlignSamples uint64
	// CPUProfile, when set, is where a CPU profile of the measured window is written (the nodes,
	// their tasks and the producers all run in this process).
	CPUProfile string
	Dir        string
	Log        func(format string, args ...any)
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Nodes, 3)
	def(&c.Ranges, 2*c.Nodes)
	def(&c.Vehicles, 4000)
	def(&c.Xways, 1)
	def(&c.Segments, 40)
	def(&c.Senders, 16)
	def(&c.Batch, 64)
	if c.Duration <= 0 {
		c.Duration = 30 * time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = 5 * time.Second
	}
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
	return c
}

// Result is a run's measurement over its measured window.
type Result struct {
	Arm          string  `json:"arm"`
	Mode         string  `json:"mode"`
	Nodes        int     `json:"nodes"`
	Ranges       int     `json:"ranges"`
	Seconds      float64 `json:"seconds"`
	Events       int64   `json:"events"`
	EventsPerSec float64 `json:"events_per_sec"`
	Tolls        int64   `json:"toll_notifications"`
	TollP50Ms    float64 `json:"toll_p50_ms"`
	TollP99Ms    float64 `json:"toll_p99_ms"`
	// LocalShare is the share of the job's state reads and writes served by the node running the
	// task (summed over the nodes, measured window only).
	LocalShare float64 `json:"local_share"`
	Retries    uint64  `json:"retries"`
	LoadAvg    string  `json:"loadavg"`
	// With JoinAt: the events/s and local share before and after the node joined, and how many of
	// the span's ranges the new node led at the end.
	EventsPerSecBeforeJoin float64 `json:"events_per_sec_before_join,omitempty"`
	EventsPerSecAfterJoin  float64 `json:"events_per_sec_after_join,omitempty"`
	LocalShareAfterJoin    float64 `json:"local_share_after_join,omitempty"`
	NewNodeLeads           int     `json:"new_node_leads,omitempty"`
	// RangesAtEnd are the segment span's ranges at the end (more than Ranges: the controller split).
	RangesAtEnd int `json:"ranges_at_end"`
	// Splits are the stream_align splits the autopilot made during the run; Abstentions its notes
	// of a backlogged range it did not split because no node had spare capacity.
	Splits      int `json:"controller_splits"`
	Abstentions int `json:"controller_abstentions"`
	// CPUUtil is the process's CPU time over the measured window, a share of all the machine's cores
	// (the nodes, their tasks and the producers share the process).
	CPUUtil float64 `json:"cpu_util"`
	// With JoinAt, seconds from the join (1-s bins; 0: never otherwise, -1: not back by the end of
	// the window): until every later bin's state accesses were all local (JoinLocalS) and no later
	// event was answered RETRY (JoinRoutedS); JoinAlignedS is the later of the two — from then on
	// each event reached its range's leader at its first send and was applied there. JoinSettledS:
	// until the span's ranges stopped splitting or changing leaders; JoinFirstEventS: until the new
	// node's tasks applied their first events. EventsPerSecSettled: the bins after both (at least 3).
	JoinLocalS      float64 `json:"join_local_100_s,omitempty"`
	JoinRoutedS     float64 `json:"join_routed_s,omitempty"`
	JoinAlignedS    float64 `json:"join_aligned_s,omitempty"`
	JoinSettledS    float64 `json:"join_settled_s,omitempty"`
	JoinFirstEventS float64 `json:"join_new_node_first_event_s,omitempty"`
	// JoinRerouteMaxS is the longest run of one-second bins after the join with events answered
	// RETRY: how long events went to a node no longer leading their range before they followed.
	JoinRerouteMaxS     float64 `json:"join_reroute_max_s,omitempty"`
	EventsPerSecSettled float64 `json:"events_per_sec_settled,omitempty"`
	// Check is the exactly-once checker's verdict (check.go).
	Check Check `json:"exactly_once"`
	// Timeline are the measured window's one-second bins.
	Timeline []Bin `json:"timeline"`
}

// Run starts cfg.Nodes in-process nodes, spreads the segment span's ranges and leaders over them,
// and runs the job from cfg.Senders producers for cfg.Warmup + cfg.Duration.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	dir := cfg.Dir
	if dir == "" {
		d, err := benchutil.TempDir()
		if err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	spec := benchutil.NodeSpec{}
	spec.Config.Autopilot.Policies.StreamAlign = policy.StreamAlignConfig{MinEvents: cfg.AlignEvents,
		BacklogLatency: cfg.AlignLatency, Saturated: cfg.AlignSaturated, HotFor: cfg.AlignFor,
		MinSamples: cfg.AlignSamples}
	c, err := benchutil.StartCluster(ctx, dir, cfg.Nodes, spec)
	if err != nil {
		return Result{}, err
	}
	defer c.Stop()
	cl, err := client.New(ctx, client.Config{Addrs: c.Addrs()})
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	if err := setUp(ctx, cfg, c, cl); err != nil {
		return Result{}, err
	}
	if err := startArm(ctx, cfg, cl); err != nil {
		return Result{}, err
	}
	in, err := stream.NewIngester(stream.IngesterConfig{Client: cl, Mode: cfg.Arm.Mode, MaxBatch: cfg.Batch}, JobName)
	if err != nil {
		return Result{}, err
	}
	defer in.Close()
	r, chk, err := measure(ctx, cfg, c, cl, in)
	if err != nil {
		return r, err
	}
	if r.Check, err = chk.verify(ctx, func(ctx context.Context, k []byte) ([]byte, bool, error) { return cl.Get(ctx, k) }); err != nil {
		return r, fmt.Errorf("exactly-once check: %w", err)
	}
	return r, finish(ctx, cfg, c, cl, &r)
}

// startArm lets the placement change during the run, the same in every arm (a joining node gets
// its share, rebalance evens leaderships out), and switches the controller on in its arm.
func startArm(ctx context.Context, cfg Config, cl *client.Client) error {
	if err := cl.SetPolicy(ctx, policy.NameRebalance, true); err != nil {
		return fmt.Errorf("switch rebalance on: %w", err)
	}
	if err := cl.SetPolicy(ctx, policy.NameStreamAlign, cfg.Arm.Controller); err != nil {
		return fmt.Errorf("switch stream_align: %w", err)
	}
	return nil
}

// finish counts the span's ranges, the new node's leaderships and the controller's splits.
func finish(ctx context.Context, cfg Config, c *benchutil.Cluster, cl *client.Client, r *Result) error {
	rs, err := cl.UserRanges(ctx)
	if err != nil {
		return err
	}
	var joined uint64
	if cfg.JoinAt > 0 && c.Len() > cfg.Nodes {
		joined = c.Node(c.Len() - 1).KV.NodeID()
	}
	for _, st := range rs {
		d := st.GetDesc()
		if bytes.HasPrefix(d.GetStartKey(), []byte(SegPrefix)) {
			r.RangesAtEnd++
			if joined != 0 && st.GetLeaderNodeId() == joined {
				r.NewNodeLeads++
			}
		}
	}
	ds, _, err := cl.Decisions(ctx)
	if err != nil {
		return err
	}
	for _, d := range ds {
		switch {
		case d.Policy != policy.NameStreamAlign:
		case d.Status == decisions.StatusSucceeded:
			r.Splits++
		case d.Status == policy.StatusAbstains:
			r.Abstentions++
		}
	}
	return nil
}

// setUp holds the placement still, splits the segment span into cfg.Ranges ranges and gives range j
// a leader on node j mod cfg.Nodes.
func setUp(ctx context.Context, cfg Config, c *benchutil.Cluster, cl *client.Client) error {
	replicated := func() bool { return benchutil.FullyReplicated(ctx, cl, min(3, cfg.Nodes)) }
	if err := benchutil.WaitFor(ctx, 90*time.Second, replicated); err != nil {
		return fmt.Errorf("wait for replication: %w", err)
	}
	for _, p := range []string{policy.NameRebalance, policy.NameMerge, policy.NameLoadSplit, policy.NameShed} {
		if err := cl.SetPolicy(ctx, p, false); err != nil {
			return fmt.Errorf("switch %s off: %w", p, err)
		}
	}
	var all [][]byte
	for x := 0; x < cfg.Xways; x++ {
		for d := 0; d < 2; d++ {
			for s := 0; s < cfg.Segments; s++ {
				all = append(all, SegmentKey(uint8(x), uint8(d), uint8(s)))
			}
		}
	}
	starts := [][]byte{[]byte(SegPrefix)}
	for j := 1; j < cfg.Ranges; j++ {
		starts = append(starts, all[j*len(all)/cfg.Ranges])
	}
	for _, k := range starts {
		if _, _, err := cl.Split(ctx, k); err != nil {
			return fmt.Errorf("split at %q: %w", k, err)
		}
	}
	if err := benchutil.WaitFor(ctx, 90*time.Second, replicated); err != nil {
		return fmt.Errorf("wait for replication after the splits: %w", err)
	}
	for j, k := range starts {
		want := c.Node(j % cfg.Nodes).KV.NodeID()
		err := benchutil.WaitFor(ctx, 30*time.Second, func() bool {
			lr, err := cl.Lookup(ctx, k)
			if err != nil {
				return false
			}
			if lr.GetLeaderNodeId() == want {
				return true
			}
			_ = cl.TransferLeader(ctx, lr.GetRange().GetRangeId(), want)
			return false
		})
		if err != nil {
			return fmt.Errorf("move the leadership of the range at %q to node %d: %w", k, want, err)
		}
	}
	cfg.Log("%d ranges of the segment span, leaders spread over %d nodes", cfg.Ranges, cfg.Nodes)
	return nil
}

// window holds what the senders measured.
type window struct {
	measuring atomic.Bool
	events    atomic.Int64
	mu        sync.Mutex
	tolls     []time.Duration
}

// senders are the producers of a run and their checkers.
type senders struct {
	wg     sync.WaitGroup
	errc   chan error
	checks []*checker
}

// startSenders starts the generator and the senders; the generator hands each report to the sender
// owning its segment (one producer per key keeps the key's positions in order).
func startSenders(ctx context.Context, cancel context.CancelFunc, cfg Config, in *stream.Ingester, w *window) *senders {
	s := &senders{errc: make(chan error, cfg.Senders)}
	queues := make([]chan Report, cfg.Senders)
	for i := range queues {
		queues[i] = make(chan Report, 4*cfg.Batch)
		chk := newChecker()
		s.checks = append(s.checks, chk)
		s.wg.Add(1)
		go func(q chan Report) {
			defer s.wg.Done()
			if err := send(ctx, cfg, in, q, w, chk); err != nil && ctx.Err() == nil {
				s.errc <- err
				cancel()
			}
		}(queues[i])
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		generate(ctx, cfg, queues)
	}()
	return s
}

// stop waits for the senders (their context ended) and merges their checkers.
func (s *senders) stop() (*checker, error) {
	s.wg.Wait()
	all := newChecker()
	for _, c := range s.checks {
		all.merge(c)
	}
	select {
	case err := <-s.errc:
		return all, err
	default:
		return all, nil
	}
}

// measure runs the senders for the warm-up and the measured window, a sampler filling the window's
// bins, and the join.
func measure(ctx context.Context, cfg Config, c *benchutil.Cluster, cl *client.Client, in *stream.Ingester) (Result, *checker, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var w window
	snd := startSenders(ctx, cancel, cfg, in, &w)
	select {
	case <-time.After(cfg.Warmup):
	case <-ctx.Done():
	}
	before := stateAccesses(c)
	stopProfile, err := startProfile(cfg.CPUProfile)
	if err != nil {
		return Result{}, nil, err
	}
	cpu0 := processCPU()
	w.measuring.Store(true)
	start := time.Now()
	smp := newSampler(cfg, c, cl, &w, start, before)
	sctx, stopSampler := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		smp.run(sctx)
	}()
	j, jerr := joinDuring(ctx, cfg, c, &w)
	if jerr == nil {
		select {
		case <-time.After(time.Until(start.Add(cfg.Duration))):
		case <-ctx.Done():
		}
	}
	w.measuring.Store(false)
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	stopProfile()
	after := stateAccesses(c)
	load, _ := os.ReadFile("/proc/loadavg")
	stopSampler()
	<-sampled
	cancel()
	chk, err := snd.stop()
	if err = errors.Join(jerr, err); err != nil {
		return Result{}, chk, err
	}
	r := result(cfg, &w, elapsed, before, after, string(load))
	r.Timeline = smp.bins
	r.CPUUtil = cpu.Seconds() / elapsed.Seconds() / float64(runtime.NumCPU())
	if !j.at.IsZero() {
		r.EventsPerSecBeforeJoin = float64(j.events) / j.at.Sub(start).Seconds()
		r.EventsPerSecAfterJoin = float64(r.Events-j.events) / (elapsed - j.at.Sub(start)).Seconds()
		r.LocalShareAfterJoin = share(after.local-j.acc.local, after.remote-j.acc.remote)
		r.joinFigures(j.at.Sub(start).Seconds())
	}
	return r, chk, nil
}

// joinMark is the measurement when a node joined.
type joinMark struct {
	at     time.Time
	events int64
	acc    accesses
}

// joinDuring adds a node cfg.JoinAt into the measured window (nothing without JoinAt).
func joinDuring(ctx context.Context, cfg Config, c *benchutil.Cluster, w *window) (joinMark, error) {
	if cfg.JoinAt <= 0 || cfg.JoinAt >= cfg.Duration {
		return joinMark{}, nil
	}
	select {
	case <-time.After(cfg.JoinAt):
	case <-ctx.Done():
		return joinMark{}, nil
	}
	j := joinMark{at: time.Now(), events: w.events.Load(), acc: stateAccesses(c)}
	if _, err := c.Add(ctx); err != nil {
		return j, fmt.Errorf("add a node: %w", err)
	}
	cfg.Log("a node joined at %s into the measured window", cfg.JoinAt)
	return j, nil
}

func generate(ctx context.Context, cfg Config, queues []chan Report) {
	g := NewGenerator(1, cfg.Vehicles, cfg.Xways, cfg.Segments)
	for ctx.Err() == nil {
		for _, r := range g.Tick() {
			h := fnv.New32a()
			h.Write(SegmentKey(r.Xway, r.Dir, r.Seg))
			select {
			case queues[h.Sum32()%uint32(len(queues))] <- r:
			case <-ctx.Done():
				return
			}
		}
	}
}

// send sends its queue's reports in batches of what is waiting (up to cfg.Batch); a toll
// notification's latency is its batch's round trip. Every batch's acknowledgements go to chk.
func send(ctx context.Context, cfg Config, in *stream.Ingester, q chan Report, w *window, chk *checker) error {
	for {
		var reps []Report
		select {
		case r := <-q:
			reps = append(reps, r)
		case <-ctx.Done():
			return nil
		}
		for len(reps) < cfg.Batch && len(q) > 0 {
			reps = append(reps, <-q)
		}
		values := make([][]byte, len(reps))
		for i, r := range reps {
			values[i] = r.Encode()
		}
		evs, err := in.Events(values)
		if err != nil {
			return err
		}
		start := time.Now()
		acks, err := in.SendEvents(ctx, evs)
		chk.record(evs, reps, acks)
		if err != nil {
			return err
		}
		if w.measuring.Load() {
			w.add(acks, time.Since(start))
		}
	}
}

// add counts a batch's events and its toll notifications' latency.
func (w *window) add(acks []stream.Ack, lat time.Duration) {
	w.events.Add(int64(len(acks)))
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range acks {
		if len(a.Output) > 0 {
			w.tolls = append(w.tolls, lat)
		}
	}
}

type accesses struct{ local, remote, retries uint64 }

func stateAccesses(c *benchutil.Cluster) accesses {
	var a accesses
	for _, n := range c.Nodes() {
		if n == nil {
			continue
		}
		st := n.KV.StreamStats()
		a.local += st.LocalReads + st.LocalWrites
		a.remote += st.RemoteReads + st.RemoteWrites
		a.retries += st.Retries
	}
	return a
}

func result(cfg Config, w *window, elapsed time.Duration, before, after accesses, load string) Result {
	r := Result{Arm: cfg.Arm.Name, Mode: cfg.Arm.Mode.String(), Nodes: cfg.Nodes, Ranges: cfg.Ranges, Seconds: elapsed.Seconds(), Events: w.events.Load(),
		Tolls: int64(len(w.tolls)), Retries: after.retries - before.retries, LoadAvg: load}
	if len(r.LoadAvg) > 0 && r.LoadAvg[len(r.LoadAvg)-1] == '\n' {
		r.LoadAvg = r.LoadAvg[:len(r.LoadAvg)-1]
	}
	r.EventsPerSec = float64(r.Events) / r.Seconds
	r.LocalShare = share(after.local-before.local, after.remote-before.remote)
	slices.Sort(w.tolls)
	pct := func(p float64) float64 {
		if len(w.tolls) == 0 {
			return 0
		}
		return float64(w.tolls[int(p*float64(len(w.tolls)-1))].Microseconds()) / 1000
	}
	r.TollP50Ms, r.TollP99Ms = pct(0.50), pct(0.99)
	return r
}
