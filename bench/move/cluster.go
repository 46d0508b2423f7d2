package move

import (
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/bench/benchutil"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// cluster is the benchmark's four nodes.
type cluster struct {
	*benchutil.Cluster
}

func (c cluster) nodes() []*benchutil.Node { return c.Nodes() } // no node is killed here

// replicaOn returns node id's local replica of rangeID, or nil.
func (c cluster) replicaOn(id, rangeID uint64) *replica.Replica {
	for _, n := range c.nodes() {
		if n.KV.NodeID() == id && n.KV.Store() != nil {
			return n.KV.Store().Replica(rangeID)
		}
	}
	return nil
}

// leaderOf returns the node whose local replica of rangeID is the raft leader, or 0.
func (c cluster) leaderOf(rangeID uint64) uint64 {
	for _, n := range c.nodes() {
		if r := n.KV.Store().Replica(rangeID); r != nil && r.IsLeader() {
			return n.KV.NodeID()
		}
	}
	return 0
}

// caughtUp reports whether every node in nodes has applied what the range's leader has.
func (c cluster) caughtUp(rangeID uint64, nodes []uint64) bool {
	lr := c.replicaOn(c.leaderOf(rangeID), rangeID)
	if lr == nil {
		return false
	}
	want := lr.Status().Applied
	for _, n := range nodes {
		if r := c.replicaOn(n, rangeID); r == nil || r.Status().Applied < want {
			return false
		}
	}
	return true
}

// settled reports whether no node is compacting.
func (c cluster) settled() bool {
	for _, n := range c.nodes() {
		if n.Eng.Stats().CompactionsRunning > 0 {
			return false
		}
	}
	return true
}

// nodeStats is the latest reading of one node's counters, refreshed by a poller of its own: a node
// whose locks are held for long (while it applies a large snapshot, Metrics waits for the replica's
// lock) must not stall the sampler.
type nodeStats struct {
	id                                 uint64
	snapBytes, snapsSent, snapsApplied atomic.Uint64
	writeStalls                        atomic.Int64
	// applied is the node's replica of the moved range: its applied index (0: no replica), and
	// whether it leads the range.
	applied atomic.Uint64
	leader  atomic.Bool
}

// pollStats starts one poller per node, reading its Metrics and its replica of rangeID every interval
// until stop is called (stop waits for them, so it must run before the nodes stop).
func (c cluster) pollStats(interval time.Duration, rangeID uint64) (stats []*nodeStats, stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range c.nodes() {
		st := &nodeStats{id: n.KV.NodeID()}
		stats = append(stats, st)
		read := func() {
			m := n.KV.Metrics()
			st.snapBytes.Store(m.Transport.SnapshotBytesSent)
			st.snapsSent.Store(m.Transport.SnapshotsSent)
			st.snapsApplied.Store(m.Loop.SnapshotsApplied)
			st.writeStalls.Store(m.Engine.WriteStalls)
			var rs replica.Status
			if r := n.KV.Store().Replica(rangeID); r != nil {
				rs = r.Status()
			}
			st.applied.Store(rs.Applied)
			st.leader.Store(rs.IsLeader)
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

// leaderApplied is the applied index of the range's leader (0 if none is known).
func leaderApplied(stats []*nodeStats) uint64 {
	for _, st := range stats {
		if st.leader.Load() {
			return st.applied.Load()
		}
	}
	return 0
}

// statsOf is the poller of node id.
func statsOf(stats []*nodeStats, id uint64) *nodeStats {
	for _, st := range stats {
		if st.id == id {
			return st
		}
	}
	return &nodeStats{}
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

// holds reports whether d has a replica on node (a voter, when voter is set).
func holds(d *pb.RangeDescriptor, node uint64, voter bool) bool {
	for _, rd := range d.GetReplicas() {
		if rd.NodeId == node && (!voter || !rd.Learner) {
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
			h.Write(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(len(p.Key))), uint32(len(p.Value))))
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
