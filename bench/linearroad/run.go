package linearroad

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/stream"
)

// Config is one run.
type Config struct {
	Mode     stream.Mode
	Nodes    int           // in-process nodes (default 3)
	Ranges   int           // ranges of the segment span, leaders spread round robin (default 2 per node)
	Vehicles int           // default 4000
	Xways    int           // default 1
	Segments int           // per direction (default 40: about 50 vehicles a segment)
	Duration time.Duration // measured (default 30s), after Warmup (default 5s)
	Warmup   time.Duration
	Senders  int // producer goroutines, each owning a share of the segments (default 16)
	Batch    int // events per Ingest call at most (default 64)
	Dir      string
	Log      func(format string, args ...any)
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
	c, err := benchutil.StartCluster(ctx, dir, cfg.Nodes, benchutil.NodeSpec{})
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
	in, err := stream.NewIngester(stream.IngesterConfig{Client: cl, Mode: cfg.Mode, MaxBatch: cfg.Batch}, JobName)
	if err != nil {
		return Result{}, err
	}
	defer in.Close()
	return measure(ctx, cfg, c, in)
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

// measure runs the generator and the senders; the generator hands each report to the sender owning
// its segment (one producer per key keeps the key's positions in order).
func measure(ctx context.Context, cfg Config, c *benchutil.Cluster, in *stream.Ingester) (Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queues := make([]chan Report, cfg.Senders)
	for i := range queues {
		queues[i] = make(chan Report, 4*cfg.Batch)
	}
	var w window
	var wg sync.WaitGroup
	errc := make(chan error, cfg.Senders)
	for i := range queues {
		wg.Add(1)
		go func(q chan Report) {
			defer wg.Done()
			if err := send(ctx, cfg, in, q, &w); err != nil && ctx.Err() == nil {
				errc <- err
				cancel()
			}
		}(queues[i])
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		generate(ctx, cfg, queues)
	}()
	select {
	case <-time.After(cfg.Warmup):
	case <-ctx.Done():
	}
	before := stateAccesses(c)
	w.measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(cfg.Duration):
	case <-ctx.Done():
	}
	w.measuring.Store(false)
	elapsed := time.Since(start)
	after := stateAccesses(c)
	load, _ := os.ReadFile("/proc/loadavg")
	cancel()
	wg.Wait()
	select {
	case err := <-errc:
		return Result{}, err
	default:
	}
	return result(cfg, &w, elapsed, before, after, string(load)), nil
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
// notification's latency is its batch's round trip.
func send(ctx context.Context, cfg Config, in *stream.Ingester, q chan Report, w *window) error {
	for {
		var batch [][]byte
		select {
		case r := <-q:
			batch = append(batch, r.Encode())
		case <-ctx.Done():
			return nil
		}
		for len(batch) < cfg.Batch && len(q) > 0 {
			batch = append(batch, (<-q).Encode())
		}
		start := time.Now()
		acks, err := in.Send(ctx, batch)
		if err != nil {
			return err
		}
		lat := time.Since(start)
		if !w.measuring.Load() {
			continue
		}
		w.events.Add(int64(len(acks)))
		w.mu.Lock()
		for _, a := range acks {
			if a.Status == pb.IngestResult_FAILED {
				w.mu.Unlock()
				return errors.New("event failed: " + a.Err)
			}
			if len(a.Output) > 0 {
				w.tolls = append(w.tolls, lat)
			}
		}
		w.mu.Unlock()
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
	r := Result{Mode: cfg.Mode.String(), Nodes: cfg.Nodes, Ranges: cfg.Ranges, Seconds: elapsed.Seconds(), Events: w.events.Load(),
		Tolls: int64(len(w.tolls)), Retries: after.retries - before.retries, LoadAvg: load}
	if len(r.LoadAvg) > 0 && r.LoadAvg[len(r.LoadAvg)-1] == '\n' {
		r.LoadAvg = r.LoadAvg[:len(r.LoadAvg)-1]
	}
	r.EventsPerSec = float64(r.Events) / r.Seconds
	if l, rem := after.local-before.local, after.remote-before.remote; l+rem > 0 {
		r.LocalShare = float64(l) / float64(l+rem)
	}
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
