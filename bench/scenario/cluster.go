package scenario

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/client"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// cluster is a run's nodes: in-process ones (a benchutil.Cluster), or none when the run goes to a
// cluster of its own (Options.Hosts). It keeps each node's counters as last read, for per-second
// deltas.
type cluster struct {
	*benchutil.Cluster // nil with Options.Hosts
	hosts              []string
	last               []nodeMark
	track              atomic.Uint64 // a range whose applied index every node's seconds record (the move's)
}

type nodeMark struct {
	n                                   *benchutil.Node // the node the marks were read from: a restart starts them again
	hits, misses                        int64
	recorded, applied, sent, drop, snap uint64
	devOps, devReads, devWait, devBytes int64
	compacted                           int64
}

var errNotLocal = errors.New("this event needs in-process nodes (not with --hosts)")

func (c *cluster) local() bool { return c.Cluster != nil }

// nodeByID is the live node with id, or nil.
func (c *cluster) nodeByID(id uint64) *benchutil.Node {
	if i := c.IndexOf(id); i >= 0 {
		return c.Node(i)
	}
	return nil
}

func (c *cluster) addrs() []string {
	if !c.local() {
		return c.hosts
	}
	return c.Addrs()
}

// sample reads every node's counters and returns what each did since the previous call.
func (c *cluster) sample(hints bool) []NodeSecond {
	if !c.local() {
		return nil
	}
	nodes := c.Nodes()
	out := make([]NodeSecond, len(nodes))
	c.last = append(c.last, make([]nodeMark, len(nodes)-len(c.last))...)
	for i, n := range nodes {
		if n == nil {
			continue
		}
		all, dev := n.KV.Metrics(), c.DeviceStats(i)
		m := all.Engine
		cur := nodeMark{n: n, hits: m.BlockCacheHits, misses: m.BlockCacheMisses, snap: all.Transport.SnapshotBytesSent,
			devOps: dev.ReadOps + dev.WriteOps, devReads: dev.ReadOps, devWait: int64(dev.Throttled), devBytes: dev.ReadBytes + dev.WriteBytes,
			compacted: int64(m.CompactedBytes)}
		if h := n.KV.Hints(); h != nil && hints {
			hm := h.Metrics()
			cur.recorded, cur.applied, cur.sent, cur.drop = hm.Recorded, hm.Applied, hm.BytesSent, hm.DroppedTotal()
		}
		p := c.last[i]
		if p.n != n {
			p = nodeMark{n: n, devOps: cur.devOps, devReads: cur.devReads, devWait: cur.devWait, devBytes: cur.devBytes, compacted: cur.compacted}
		}
		ns := &out[i]
		ns.Node, ns.Compacting = n.KV.NodeID(), m.CompactionsRunning
		ns.Hits, ns.Misses, ns.DiskOps, ns.DiskBytes = cur.hits-p.hits, cur.misses-p.misses, cur.devOps-p.devOps, cur.devBytes-p.devBytes
		ns.CompactedBytes = cur.compacted - p.compacted
		ns.DiskReads = cur.devReads - p.devReads
		ns.DiskWaitMs = math.Round(float64(cur.devWait-p.devWait)/float64(time.Millisecond)*10) / 10
		ns.Recorded, ns.Applied, ns.BytesSent, ns.Dropped = cur.recorded-p.recorded, cur.applied-p.applied, cur.sent-p.sent, cur.drop-p.drop
		ns.Leaders, ns.Replicas = userReplicas(n)
		ns.SnapshotBytes = cur.snap - p.snap
		if r := n.KV.Store().Replica(c.track.Load()); r != nil && c.track.Load() != 0 {
			ns.RangeApplied = r.Status().Applied
		}
		c.last[i] = cur
	}
	return out
}

// userReplicas is the user ranges n leads and holds.
func userReplicas(n *benchutil.Node) (leaders, replicas int) {
	if n == nil || n.KV.Store() == nil {
		return 0, 0
	}
	for _, r := range n.KV.Store().Replicas() {
		if r.RangeID() != client.MetaRangeID {
			replicas++
			if r.IsLeader() {
				leaders++
			}
		}
	}
	return leaders, replicas
}

// setUnthrottled lifts (true) or restores the emulated-disk budgets of every live node: the load and
// its compactions are set-up, not measurement, and on a disk of a few hundred IOPS they would take
// most of a run. A node started later gets a throttled device of its own.
func (c *cluster) setUnthrottled(on bool) {
	for i := 0; c.local() && i < c.Len(); i++ {
		if n := c.Node(i); n != nil {
			n.Eng.SetDeviceUnthrottled(on)
		}
	}
}

// compactAll compacts every live node's engine fully (a no-op without in-process nodes).
func (c *cluster) compactAll(ctx context.Context) error {
	for i := 0; c.local() && i < c.Len(); i++ {
		if n := c.Node(i); n != nil {
			if err := n.Eng.CompactAll(ctx); err != nil {
				return fmt.Errorf("compact n%d after the load: %w", i+1, err)
			}
		}
	}
	return nil
}

// levelBytes is n1's bytes per LSM level, L0 first (nil without in-process nodes).
func (c *cluster) levelBytes() []int64 {
	if !c.local() || c.Node(0) == nil {
		return nil
	}
	var out []int64
	for _, l := range c.Node(0).Eng.DB().Metrics().Levels {
		out = append(out, l.TablesSize)
	}
	return out
}

// deviceStats sums the emulated-disk counters of every node since the cluster started.
func (c *cluster) deviceStats() emudisk.Stats {
	if !c.local() {
		return emudisk.Stats{}
	}
	return c.TotalDeviceStats()
}

// settle waits until no engine has compacted for two seconds in a row (or limit passes): right after
// a bulk load the LSM is still being reshaped, and a run measured then would show that, not the
// steady state. Without in-process nodes it asks the nodes' heartbeats (compactions running) and
// waits for ten quiet seconds. Pebble's compaction debt is no test: with a small base level it stays
// above zero with nothing to run.
func (c *cluster) settle(ctx context.Context, cl *client.Client, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last := map[*benchutil.Node]storage.Stats{}
	need := 4
	if !c.local() {
		need = 20
	}
	for quiet := 0; quiet < need && time.Now().Before(deadline); {
		busy := false
		if c.local() {
			for _, n := range c.Nodes() {
				if n != nil {
					st := n.Eng.Stats()
					prev, seen := last[n]
					busy = busy || !seen || storage.CompactedBetween(prev, st)
					last[n] = st
				}
			}
		} else if ns, err := cl.Nodes(ctx); err == nil {
			for _, n := range ns {
				busy = busy || n.GetStats().GetCompactionsRunning() > 0
			}
		}
		quiet++
		if busy {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// StoreShape is the engines' LSM shape: the memtables, the base level's target size, the L0
// tables' target size (doubling per level below the base); whether the values are random
// (incompressible: the store holds what was written) and the load ran with the emulated disks'
// budgets lifted.
type StoreShape struct {
	MemTableBytes uint64 `json:"memtable_bytes"`
	// MemTableStagger makes node i's memtables MemTableBytes × (1 + MemTableStagger·i): nodes that
	// receive the same writes then flush, and compact, out of phase, as real nodes do, instead of all
	// at once every few seconds (a periodic swing of the whole cluster's throughput).
	MemTableStagger float64 `json:"memtable_stagger"`
	LBaseMaxBytes   int64   `json:"lbase_max_bytes"`
	TargetFileBytes int64   `json:"target_file_bytes"`
	RandomValues    bool    `json:"random_values"`
	FastLoad        bool    `json:"fast_load"`
}

// shapeFor scales Pebble's LSM to memtables of mem. With Pebble's defaults (a 64 MiB base level,
// 2 MiB tables) a store of a few tens of MB lies in the bottom level in a few tables, and each
// flush's compaction rewrites most of it, on every node at once since they receive the same writes:
// throughput then swings with the flush period, and the announced full compaction is one
// whole-store rewrite among many. A base level of a quarter memtable and tables of a sixteenth give
// such a store three or four levels of many tables each; a compaction rewrites a slice of it.
func shapeFor(mem uint64, random, fastLoad bool) StoreShape {
	return StoreShape{MemTableBytes: mem, MemTableStagger: memTableStagger, LBaseMaxBytes: int64(mem / 4), TargetFileBytes: int64(mem / 16),
		RandomValues: random, FastLoad: fastLoad}
}

// memTableStagger spreads the nodes' memtable sizes: with three nodes 1×, 1.3× and 1.6×, whose
// flush periods share no small common multiple.
const memTableStagger = 0.3

// memTableOf is node i's memtable size under shape.
func (s StoreShape) memTableOf(i int) uint64 {
	return uint64(float64(s.MemTableBytes) * (1 + s.MemTableStagger*float64(i)))
}

// memTableFor sizes memtables for a block cache of cacheBytes: Pebble charges two memtables to the
// block cache (the one filling, and the one flushing or kept for reuse), so with the default 32 MiB
// memtables a small cache would hold nothing and every read would miss. An eighth of the cache (at
// least 1 MiB, at most 32 MiB) leaves three quarters of it for blocks on the first node, 60 % on the
// third and 52 % on a fourth, whose memtables the stagger makes 1.6× and 1.9× as large
// (storage.Options.BlockRoomBytes; TestCachesHoldBlocks checks every scenario keeps half).
func memTableFor(cacheBytes int64) uint64 {
	return uint64(min(max(cacheBytes/8, 1<<20), 32<<20))
}
