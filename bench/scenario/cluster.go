package scenario

import (
	"context"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/localnode"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// node is one in-process node: its own Pebble engine in its own directory and its own gRPC server
// on a loopback port, which stays its identity across a kill and restart.
type node struct {
	dir   string
	addr  string
	eng   *storage.Engine
	kv    *kv.Node
	srv   *grpc.Server
	lis   net.Listener
	alive bool
	// last block-cache counters read, for per-second deltas (reset when the node restarts).
	lastHits, lastMisses uint64
	// The engine's block bytes of its own reads (and of them in the cache) and of its streams, as last
	// read by engineDelta.
	lastServedBytes, lastServedInCache, lastStreamBytes uint64
	lastCompactions                                     uint64
	lastFlushes                                         uint64
	// devPast sums the emulated-disk counters of the node's engines closed so far (kills).
	devPast emudisk.Stats
	// devLast is the node's device counters (devPast included) as last read by deviceDelta.
	devLast emudisk.Stats
}

// cluster is a local cluster of in-process nodes; the first bootstraps, the others join it.
type cluster struct {
	dir        string
	mu         sync.Mutex
	nodes      []*node
	cacheBytes int64
	// shape is what every engine gets of storage.Options' LSM shape.
	shape  engineShape
	device *emudisk.Options // each node's emulated disk; nil: none
	cfg    kv.Config
}

func startCluster(ctx context.Context, dir string, n int, cacheBytes int64, eng engineShape, device *emudisk.Options, tweak ...func(*kv.Config)) (*cluster, error) {
	c := &cluster{dir: dir, cacheBytes: cacheBytes, shape: eng, device: device,
		cfg: kv.Config{QueueInterval: 500 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond}}
	for _, t := range tweak {
		if t != nil {
			t(&c.cfg)
		}
	}
	for i := 0; i < n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.stop()
			return nil, err
		}
		nd := &node{dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), addr: lis.Addr().String(), lis: lis}
		c.nodes = append(c.nodes, nd)
		if err := c.startNode(ctx, nd, i == 0, true); err != nil {
			c.stop()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
	}
	return c, nil
}

// engineShape is what a variant changes in every node's engine.
type engineShape struct {
	lbaseMaxBytes   int64
	targetFileBytes int64
}

func (c *cluster) startNode(ctx context.Context, n *node, bootstrap, create bool) error {
	cfg := c.cfg
	cfg.Bootstrap = bootstrap
	if !bootstrap {
		cfg.Join = []string{c.nodes[0].addr}
		if n == c.nodes[0] {
			cfg.Join = []string{c.nodes[1].addr}
		}
	}
	ln, err := localnode.Start(ctx, localnode.Options{Dir: n.dir, Create: create, Addr: n.addr, Listener: n.lis,
		CacheBytes: c.cacheBytes, MemTableBytes: memTableFor(c.cacheBytes),
		LBaseMaxBytes:   c.shape.lbaseMaxBytes,
		TargetFileBytes: c.shape.targetFileBytes, Device: c.device, KV: cfg})
	if err != nil {
		n.lis = nil
		return err
	}
	c.mu.Lock()
	n.eng, n.kv, n.srv, n.alive = ln.Eng, ln.KV, ln.Server(), true
	n.lastHits, n.lastMisses, n.lastCompactions, n.lastFlushes = 0, 0, 0, 0
	n.lastServedBytes, n.lastServedInCache, n.lastStreamBytes = 0, 0, 0
	c.mu.Unlock()
	return nil
}

// kill stops node i abruptly: gRPC server cut, node goroutines stopped, engine closed.
func (c *cluster) kill(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	if !n.alive {
		c.mu.Unlock()
		return
	}
	n.alive = false
	c.mu.Unlock()
	n.srv.Stop()
	n.kv.Stop()
	n.eng.Close()
	n.lis = nil
	c.mu.Lock()
	n.devPast = n.devPast.Add(n.eng.DeviceStats())
	c.mu.Unlock()
}

// setUnthrottled lifts (true) or restores the emulated-disk budgets of every live node
// (Options.FastLoad); a node started later gets a throttled device of its own.
func (c *cluster) setUnthrottled(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.alive {
			n.eng.SetDeviceUnthrottled(on)
		}
	}
}

// deviceStats sums the emulated-disk counters of every node, live or killed, since the cluster started.
func (c *cluster) deviceStats() emudisk.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum emudisk.Stats
	for _, n := range c.nodes {
		sum = sum.Add(n.deviceStats())
	}
	return sum
}

// deviceStats are the node's emulated-disk counters since the cluster started, across kills (c.mu held).
func (n *node) deviceStats() emudisk.Stats {
	if n.alive && n.eng != nil {
		return n.devPast.Add(n.eng.DeviceStats())
	}
	return n.devPast
}

// restart starts a killed node again from its directory.
func (c *cluster) restart(ctx context.Context, i int) error {
	c.mu.Lock()
	alive := c.nodes[i].alive
	c.mu.Unlock()
	if alive {
		return nil
	}
	return c.startNode(ctx, c.nodes[i], false, false)
}

func (c *cluster) stop() {
	for i := range c.nodes {
		c.kill(i)
	}
}

func (c *cluster) addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.addr)
	}
	return out
}

// indexOf maps a node id to the index of the local node holding it, or -1.
func (c *cluster) indexOf(nodeID uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n.alive && n.kv.NodeID() == nodeID {
			return i
		}
	}
	return -1
}

// engineSecond is, per node (n1 first), what its engine did over one interval: its block cache's hit
// ratio (-1: no access, or down), the compactions and flushes it finished and the compactions
// running at the interval's end.
type engineSecond struct {
	hitRatio                         []float64
	servedHitRatio                   []float64
	streamBytes                      []int64
	compactions, flushes, compacting []int64
}

// engineDelta sums the block-cache hits and misses of the live nodes since the previous call, and
// gives each node's engine activity over that time.
func (c *cluster) engineDelta() (hits, misses uint64, per engineSecond) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.nodes)
	per = engineSecond{hitRatio: make([]float64, n), servedHitRatio: make([]float64, n), streamBytes: make([]int64, n),
		compactions: make([]int64, n), flushes: make([]int64, n), compacting: make([]int64, n)}
	since := func(now uint64, last *uint64) uint64 {
		d := now
		if now >= *last {
			d = now - *last // a restarted node's counters start again from 0
		}
		*last = now
		return d
	}
	for i, n := range c.nodes {
		per.hitRatio[i], per.servedHitRatio[i] = -1, -1
		if !n.alive {
			continue
		}
		m := n.kv.Metrics().Engine
		h := since(uint64(m.BlockCacheHits), &n.lastHits)
		ms := since(uint64(m.BlockCacheMisses), &n.lastMisses)
		sb := since(m.ServedBlockBytes, &n.lastServedBytes)
		sc := since(m.ServedBlockBytesInCache, &n.lastServedInCache)
		if sb > 0 {
			per.servedHitRatio[i] = math.Round(float64(min(sc, sb))/float64(sb)*1000) / 1000
		}
		per.streamBytes[i] = int64(since(m.StreamBlockBytes, &n.lastStreamBytes))
		per.compactions[i] = int64(since(uint64(m.CompactionsDone), &n.lastCompactions))
		per.flushes[i] = int64(since(uint64(m.FlushesDone), &n.lastFlushes))
		per.compacting[i] = m.CompactionsRunning
		hits += h
		misses += ms
		if h+ms > 0 {
			per.hitRatio[i] = math.Round(float64(h)/float64(h+ms)*1000) / 1000
		}
	}
	return hits, misses, per
}

// deviceDelta returns, per node (n1 first), the operations its emulated disk served and the time its
// callers waited for its budget since the last call: where a node's disk is the bottleneck, its
// wait grows while its operations stay at the device's IOPS.
func (c *cluster) deviceDelta() (ops, readOps []int64, waitMs []float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops, readOps, waitMs = make([]int64, len(c.nodes)), make([]int64, len(c.nodes)), make([]float64, len(c.nodes))
	for i, n := range c.nodes {
		cur := n.deviceStats()
		ops[i] = cur.ReadOps + cur.WriteOps - n.devLast.ReadOps - n.devLast.WriteOps
		readOps[i] = cur.ReadOps - n.devLast.ReadOps
		waitMs[i] = math.Round(float64(cur.Throttled-n.devLast.Throttled)/float64(time.Millisecond)*10) / 10
		n.devLast = cur
	}
	return ops, readOps, waitMs
}

// CompactionMark is one compaction a node's engine finished, its times in seconds of the run.
type CompactionMark struct {
	Node        int     `json:"node"` // 1-based
	BeginS      float64 `json:"begin_s"`
	EndS        float64 `json:"end_s"`
	Reason      string  `json:"reason"`
	FromLevel   int     `json:"from_level"`
	ToLevel     int     `json:"to_level"`
	InputBytes  uint64  `json:"input_bytes"`
	OutputBytes uint64  `json:"output_bytes"`
	// Span is the engine keys its inputs covered, "[smallest, largest]" quoted; Inputs the same
	// per input level ("L0: 5 tables 12.1 MB [...]"), OutputTables how many tables it wrote.
	Span         string   `json:"span,omitempty"`
	Inputs       []string `json:"inputs,omitempty"`
	OutputTables int      `json:"output_tables,omitempty"`
	Error        string   `json:"error,omitempty"` // a failed or cancelled compaction rewrote nothing
}

// compactions lists the compactions the live nodes' engines finished since start, by end time.
func (c *cluster) compactions(start time.Time) []CompactionMark {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []CompactionMark
	for i, n := range c.nodes {
		if !n.alive {
			continue
		}
		for _, r := range n.eng.CompactionsSince(start) {
			m := CompactionMark{Node: i + 1, BeginS: secondsSince(start, r.Begin), EndS: secondsSince(start, r.End),
				Reason: r.Reason, FromLevel: r.FromLevel, ToLevel: r.ToLevel, InputBytes: r.InputBytes, OutputBytes: r.OutputBytes,
				Span: spanText(r.Span), OutputTables: r.OutputTables, Error: r.Err}
			for _, in := range r.Inputs {
				var ts []string
				for _, t := range in.TableSpans {
					ts = append(ts, spanText(t))
				}
				m.Inputs = append(m.Inputs, fmt.Sprintf("L%d: %d tables %.1f MB %s: %s", in.Level, in.Tables, float64(in.Bytes)/1e6,
					spanText(in.Span), strings.Join(ts, " ")))
			}
			out = append(out, m)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].EndS < out[b].EndS })
	return out
}

func spanText(s storage.Span) string { return fmt.Sprintf("[%q, %q]", s.Smallest, s.Largest) }

func secondsSince(start, t time.Time) float64 { return math.Round(t.Sub(start).Seconds()*100) / 100 }

// userRange returns the status of the user range (the first range that is not the meta range).
func userRange(ctx context.Context, cl *client.Client) (*pb.RangeStatus, error) {
	rs, err := cl.Ranges(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r.GetDesc().GetRangeId() != replica.MetaRangeID {
			return r, nil
		}
	}
	return nil, fmt.Errorf("no user range")
}

// settle waits until no live node's engine has compacted for two seconds in a row
// (storage.CompactedBetween; or limit passes): right after a bulk load the LSM is still being
// reshaped, and a run measured then would show that, not the steady state. Pebble's compaction
// debt is no test: with a small base level (--lbase-kib) it stays above zero with nothing to run.
func (c *cluster) settle(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	quiet := 0
	last := map[*node]storage.Stats{}
	for quiet < 4 && time.Now().Before(deadline) {
		busy := false
		c.mu.Lock()
		for _, n := range c.nodes {
			if n.alive {
				st := n.eng.Stats()
				prev, seen := last[n]
				busy = busy || !seen || storage.CompactedBetween(prev, st)
				last[n] = st
			}
		}
		c.mu.Unlock()
		if busy {
			quiet = 0
		} else {
			quiet++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// memTableFor sizes memtables for a block cache of cacheBytes: Pebble reserves the memtables' size
// out of the block cache, so with the default 32 MiB memtables a small cache would hold nothing and
// every read would miss. An eighth of the cache (at least 1 MiB, at most the 32 MiB default) leaves
// most of it for blocks.
func memTableFor(cacheBytes int64) uint64 {
	return uint64(min(max(cacheBytes/8, 1<<20), 32<<20))
}

// addNode starts one more node, which joins the cluster; it returns its index.
func (c *cluster) addNode(ctx context.Context) (int, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	i := len(c.nodes)
	nd := &node{dir: filepath.Join(c.dir, fmt.Sprintf("n%d", i+1)), addr: lis.Addr().String(), lis: lis}
	c.nodes = append(c.nodes, nd)
	c.mu.Unlock()
	if err := c.startNode(ctx, nd, false, true); err != nil {
		return i, err
	}
	return i, nil
}

// userLeaders is, per node index, the number of user ranges the node leads now (0 for dead nodes).
func (c *cluster) userLeaders() []int {
	leaders, _ := c.userReplicas()
	return leaders
}

// userReplicas gives, per node (n1 first), the user ranges it leads and the user replicas it holds.
func (c *cluster) userReplicas() (leaders, replicas []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	leaders, replicas = make([]int, len(c.nodes)), make([]int, len(c.nodes))
	for i, n := range c.nodes {
		if !n.alive || n.kv.Store() == nil {
			continue
		}
		for _, r := range n.kv.Store().Replicas() {
			if r.RangeID() == replica.MetaRangeID {
				continue
			}
			replicas[i]++
			if r.IsLeader() {
				leaders[i]++
			}
		}
	}
	return leaders, replicas
}
