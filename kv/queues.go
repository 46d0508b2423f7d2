package kv

import (
	"context"
	"sort"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// runQueues is the node's periodic maintenance: repair meta entries of ranges it leads, split ranges
// that grew past RangeMaxBytes, garbage-collect replicas the cluster removed, and — on the node
// leading the meta range — bring every range to its replication factor.
func (n *Node) runQueues(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	descs, err := n.allRanges(ctx)
	if err != nil {
		return
	}
	metaByID := make(map[uint64]*pb.RangeDescriptor, len(descs))
	for _, d := range descs {
		metaByID[d.RangeId] = d
	}
	var stale []*pb.RangeDescriptor
	for _, r := range n.store.Replicas() {
		if r.IsMeta() {
			continue
		}
		d := r.Desc()
		if d == nil {
			continue
		}
		md := metaByID[d.RangeId]
		if r.IsLeader() {
			if md == nil || md.Generation < d.Generation {
				stale = append(stale, d)
			}
			continue
		}
		if md != nil && md.Generation > d.Generation && !hasNode(md, n.ident.NodeID) && r.LeaderNode() == 0 {
			n.store.RemoveReplica(d.RangeId, "no longer in the range's descriptor")
		}
	}
	if len(stale) > 0 {
		if _, err := n.metaCommand(ctx, &pb.Command{MetaUpdate: &pb.MetaUpdate{Ranges: stale}}); err != nil {
			n.log.Warn("meta repair failed", "err", err)
		}
	}
	n.maybeSplitBySize(ctx)
	if n.leaderNodeOf(replica.MetaRangeID) == n.ident.NodeID {
		if md := n.metaDesc(); md != nil {
			// The meta range first: every other range's availability depends on it.
			descs = append([]*pb.RangeDescriptor{md}, descs...)
		}
		n.replicateQueue(ctx, descs)
	}
}

func hasNode(d *pb.RangeDescriptor, node uint64) bool {
	for _, rd := range d.Replicas {
		if rd.NodeId == node {
			return true
		}
	}
	return false
}

func (n *Node) maybeSplitBySize(ctx context.Context) {
	for _, r := range n.store.Replicas() {
		if r.IsMeta() || !r.IsLeader() {
			continue
		}
		if int64(r.ApproximateBytes()) < n.cfg.RangeMaxBytes {
			continue
		}
		key, err := r.SplitKeyBySize()
		if err != nil || key == nil {
			continue
		}
		if _, _, err := n.splitLocal(ctx, r, key); err != nil {
			n.log.Warn("size split failed", "range", r.RangeID(), "err", err)
		}
		return // one split per pass keeps the meta range and raft traffic calm
	}
}

// replicateQueue adds replicas to under-replicated ranges (one relocation per pass), replacing
// replicas on nodes dead for longer than DeadNodeTimeout.
func (n *Node) replicateQueue(ctx context.Context, descs []*pb.RangeDescriptor) {
	live := n.dir.liveNodes(n.liveWindow())
	liveSet := map[uint64]bool{}
	for _, id := range live {
		liveSet[id] = true
	}
	load := map[uint64]int{}
	for _, d := range descs {
		for _, rd := range d.Replicas {
			load[rd.NodeId]++
		}
	}
	want := n.cfg.ReplicationFactor
	for _, d := range descs {
		voters, learner := 0, uint64(0)
		var dead uint64
		for _, rd := range d.Replicas {
			if rd.Learner {
				learner = rd.NodeId
				continue
			}
			voters++
			if !liveSet[rd.NodeId] && time.Since(n.dir.lastHeard(rd.NodeId)) > n.cfg.DeadNodeTimeout {
				dead = rd.NodeId
			}
		}
		var add, remove uint64
		switch {
		case learner != 0 && liveSet[learner]:
			add = learner // finish an interrupted addition
		case voters < want:
			add = n.pickTarget(d, live, load)
		case dead != 0:
			add, remove = n.pickTarget(d, live, load), dead
			if add == 0 {
				continue
			}
		}
		if add == 0 && remove == 0 {
			continue
		}
		_, err := n.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: d.RangeId, AddNodeId: add, RemoveNodeId: remove})
		if err != nil {
			n.log.Warn("replicate", "range", d.RangeId, "err", err)
		}
		return
	}
}

// pickTarget picks the live node without a replica of d that holds the fewest replicas.
func (n *Node) pickTarget(d *pb.RangeDescriptor, live []uint64, load map[uint64]int) uint64 {
	cands := make([]uint64, 0, len(live))
	for _, id := range live {
		if !hasNode(d, id) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return 0
	}
	sort.Slice(cands, func(i, j int) bool {
		if load[cands[i]] != load[cands[j]] {
			return load[cands[i]] < load[cands[j]]
		}
		return cands[i] < cands[j]
	})
	return cands[0]
}
