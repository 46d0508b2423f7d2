package move

import (
	"context"
	"fmt"
	"hash/crc64"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/localnode"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// cluster is a local cluster of in-process nodes on loopback; the first bootstraps, the others join.
type cluster struct {
	nodes []*localnode.Node
}

func startCluster(ctx context.Context, dir string, n int, cfg kv.Config, cacheBytes int64) (*cluster, error) {
	c := &cluster{}
	for i := 0; i < n; i++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			c.stop()
			return nil, err
		}
		ncfg := cfg
		if i == 0 {
			ncfg.Bootstrap = true
		} else {
			ncfg.Join = []string{c.nodes[0].Addr}
		}
		ln, err := localnode.Start(ctx, localnode.Options{Dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), Create: true,
			Addr: lis.Addr().String(), Listener: lis, CacheBytes: cacheBytes, KV: ncfg})
		if err != nil {
			lis.Close()
			c.stop()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
		c.nodes = append(c.nodes, ln)
	}
	return c, nil
}

func (c *cluster) stop() {
	for _, n := range c.nodes {
		n.Kill()
	}
}

func (c *cluster) addrs() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.Addr)
	}
	return out
}

// node returns the local node with id, or nil.
func (c *cluster) node(id uint64) *localnode.Node {
	for _, n := range c.nodes {
		if n.KV.NodeID() == id {
			return n
		}
	}
	return nil
}

// replicaOn returns node id's local replica of rangeID, or nil.
func (c *cluster) replicaOn(id, rangeID uint64) *replica.Replica {
	n := c.node(id)
	if n == nil || n.KV.Store() == nil {
		return nil
	}
	return n.KV.Store().Replica(rangeID)
}

// leaderOf returns the node whose local replica of rangeID is the raft leader, or 0.
func (c *cluster) leaderOf(rangeID uint64) uint64 {
	for _, n := range c.nodes {
		if r := n.KV.Store().Replica(rangeID); r != nil && r.IsLeader() {
			return n.KV.NodeID()
		}
	}
	return 0
}

// nodeStats is the latest reading of one node's counters, refreshed by a poller of its own: a node
// whose locks are held for long (while it applies a large snapshot, Metrics waits for the replica's
// lock) must not stall the sampler, and how long a reading took is itself worth reporting.
type nodeStats struct {
	id                                 uint64
	snapBytes, snapsSent, snapsApplied atomic.Uint64
	writeStalls                        atomic.Int64
	// applied is the node's replica of the moved range: its applied index (0: no replica), and
	// whether it leads the range.
	applied atomic.Uint64
	leader  atomic.Bool
	maxCall atomic.Int64 // longest Metrics call (ns)
}

// pollStats starts one poller per node, reading its Metrics and its replica of rangeID every interval until stop is called
// (stop waits for them, so it must run before the nodes stop).
func (c *cluster) pollStats(interval time.Duration, rangeID uint64) (stats []*nodeStats, stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		st := &nodeStats{id: n.KV.NodeID()}
		stats = append(stats, st)
		read := func() {
			t := time.Now()
			m := n.KV.Metrics()
			if d := int64(time.Since(t)); d > st.maxCall.Load() {
				st.maxCall.Store(d)
			}
			st.snapBytes.Store(m.Transport.SnapshotBytesSent)
			st.snapsSent.Store(m.Transport.SnapshotsSent)
			st.snapsApplied.Store(m.Loop.SnapshotsApplied)
			st.writeStalls.Store(m.Engine.WriteStalls)
			if r := n.KV.Store().Replica(rangeID); r != nil {
				rs := r.Status()
				st.applied.Store(rs.Applied)
				st.leader.Store(rs.IsLeader)
			} else {
				st.applied.Store(0)
				st.leader.Store(false)
			}
		}
		read()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					read()
				}
			}
		}()
	}
	var once sync.Once
	return stats, func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

// sums adds up the nodes' latest snapshot bytes and accepted snapshots, and write stalls.
func sums(stats []*nodeStats) (bytes, snapshots uint64, stalls int64) {
	for _, s := range stats {
		bytes += s.snapBytes.Load()
		snapshots += s.snapsSent.Load()
		stalls += s.writeStalls.Load()
	}
	return bytes, snapshots, stalls
}

// settled reports whether no node is compacting.
func (c *cluster) settled() bool {
	for _, n := range c.nodes {
		if st := n.Eng.Stats(); st.CompactionsRunning > 0 {
			return false
		}
	}
	return true
}

// voters lists the voter nodes of d.
func voters(d *pb.RangeDescriptor) []uint64 {
	var out []uint64
	for _, rd := range d.GetReplicas() {
		if !rd.Learner {
			out = append(out, rd.NodeId)
		}
	}
	return out
}

func hasVoter(d *pb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.NodeId == node && !rd.Learner {
			return true
		}
	}
	return false
}

func hasReplica(d *pb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.GetReplicas() {
		if rd.NodeId == node {
			return true
		}
	}
	return false
}

// ReplicaDigest summarizes one replica's copy of the range's data, read from its local state machine.
type ReplicaDigest struct {
	Node    uint64 `json:"node"`
	Applied uint64 `json:"applied_index"`
	Keys    int64  `json:"keys"`
	Bytes   int64  `json:"bytes"`
	CRC64   string `json:"crc64"`
	Error   string `json:"error,omitempty"`
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// digest reads every pair of the replica's local copy, page by page, and checksums keys and values.
func digest(node uint64, r *replica.Replica) ReplicaDigest {
	d := ReplicaDigest{Node: node, Applied: r.Status().Applied}
	h := crc64.New(crcTable)
	var start []byte
	for {
		kvs, _, truncated, err := r.Scan(start, nil, 4096, 0, false)
		if err != nil {
			d.Error = err.Error()
			return d
		}
		for _, p := range kvs {
			var l [8]byte
			putU32(l[:4], uint32(len(p.Key)))
			putU32(l[4:], uint32(len(p.Value)))
			h.Write(l[:])
			h.Write(p.Key)
			h.Write(p.Value)
			d.Keys++
			d.Bytes += int64(len(p.Key) + len(p.Value))
		}
		if !truncated || len(kvs) == 0 {
			break
		}
		start = append(append([]byte(nil), kvs[len(kvs)-1].Key...), 0)
	}
	d.CRC64 = fmt.Sprintf("%016x", h.Sum64())
	if a := r.Status().Applied; a != d.Applied {
		d.Error = fmt.Sprintf("applied index moved from %d to %d during the scan", d.Applied, a)
	}
	return d
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

// nodeLogger writes the nodes' logs (info and above) to w.
func nodeLogger(w interface{ Write([]byte) (int, error) }) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
