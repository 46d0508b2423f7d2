package kv

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// liveWindow is how recently a node must have been heard from to count as live.
func (n *Node) liveWindow() time.Duration {
	w := 4 * n.cfg.HeartbeatInterval
	if w > n.cfg.DeadNodeTimeout {
		w = n.cfg.DeadNodeTimeout
	}
	return w
}

// Join implements pb.ShoalServer: it admits a new node, giving it an id.
func (n *Node) Join(ctx context.Context, req *pb.JoinRequest) (*pb.JoinResponse, error) {
	select {
	case <-n.ready:
	default:
		return &pb.JoinResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}}, nil
	}
	if req.Node == nil || req.Node.Addr == "" {
		return &pb.JoinResponse{Error: invalid("join request without an address")}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	res, err := n.metaCommand(ctx, &pb.Command{IncrementKey: replica.MetaCounterKey("node-id")})
	if err != nil {
		return &pb.JoinResponse{Error: n.pbErr(err)}, nil
	}
	nd := proto.Clone(req.Node).(*pb.NodeDescriptor)
	nd.NodeId = res.Counter
	data, _ := marshal(nd)
	if _, err := n.metaCommand(ctx, &pb.Command{Mutations: []*pb.Mutation{{Key: replica.MetaNodeKey(nd.NodeId), Value: data}}}); err != nil {
		return &pb.JoinResponse{Error: n.pbErr(err)}, nil
	}
	n.dir.upsert(nd)
	n.dir.heard(nd.NodeId, time.Now())
	n.saveDirectory()
	n.log.Info("node joined", "node", nd.NodeId, "addr", nd.Addr)
	return &pb.JoinResponse{NodeId: nd.NodeId, ClusterId: n.ident.ClusterID, Nodes: n.dir.all()}, nil
}

// Heartbeat implements pb.ShoalServer: a peer says it is alive and reports its load.
func (n *Node) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	// Until Start has its identity (a joining node learns it from the Join RPC) n.ident is being
	// written: answer nothing rather than read it; the peer retries at its next heartbeat.
	select {
	case <-n.ready:
	default:
		return &pb.HeartbeatResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}}, nil
	}
	if req.ClusterId != "" && n.ident.ClusterID != "" && req.ClusterId != n.ident.ClusterID {
		return &pb.HeartbeatResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf("heartbeat from cluster %s, this node belongs to %s", req.ClusterId, n.ident.ClusterID)}}, nil
	}
	changed := false
	if req.Node != nil {
		changed = n.dir.upsert(req.Node)
		prev, _ := n.dir.statsOf(req.Node.NodeId)
		n.dir.heard(req.Node.NodeId, time.Now())
		n.dir.recordStats(req.Node.NodeId, req.Stats, req.Draining, req.MetaLeaderNodeId, req.MetaDesc)
		n.bg.Notify() // a peer's status changed: a postponed heavy task may now find an idle candidate
		if prev == nil && req.Stats != nil {
			// The node's first load report: it has started and serves (a node that only registered
			// through Join has not). A join may start now rather than at the autopilot's next round.
			n.ap.poke()
		}
	}
	for _, nd := range req.KnownNodes {
		if n.dir.get(nd.NodeId) == nil && n.dir.upsert(nd) {
			changed = true
		}
	}
	if changed {
		n.saveDirectory()
	}
	return &pb.HeartbeatResponse{KnownNodes: n.dir.all()}, nil
}

// engineStats is the engine's part of this node's report (heartbeats and status pages alike).
func (n *Node) engineStats() *pb.NodeStats {
	es := n.eng.Stats()
	return &pb.NodeStats{
		DiskBytes:               es.DiskBytes,
		BlockCacheHits:          uint64(es.BlockCacheHits),
		BlockCacheMisses:        uint64(es.BlockCacheMisses),
		CompactionsRunning:      uint32(es.CompactionsRunning),
		L0Files:                 uint32(es.L0Files),
		MemtableBytes:           es.MemtableBytes,
		ServedBlockBytes:        es.ServedBlockBytes,
		ServedBlockBytesInCache: es.ServedBlockBytesInCache,
		CompactionDebtBytes:     es.CompactionDebtBytes,
	}
}

// localStats builds this node's load report for a heartbeat: it ends the QPS and key-sample windows,
// so only the heartbeat loop may call it (see currentStats for status pages).
func (n *Node) localStats() *pb.NodeStats {
	st := n.engineStats()
	now := time.Now()
	n.loadMu.Lock()
	defer n.loadMu.Unlock()
	seen := make(map[uint64]loadMark, len(n.loadPrev))
	for _, r := range n.store.Replicas() {
		cur := loadMark{reads: r.Reads.Load(), writes: r.Writes.Load(), at: now}
		leader, term := r.LeaderTerm()
		rl := &pb.RangeLoad{RangeId: r.RangeID(), Leader: leader, Term: term}
		if prev, ok := n.loadPrev[r.RangeID()]; ok {
			if dt := now.Sub(prev.at).Seconds(); dt > 0.05 {
				rl.ReadQps = float64(cur.reads-prev.reads) / dt
				rl.WriteQps = float64(cur.writes-prev.writes) / dt
			} else {
				cur = prev // too soon after the last reading: keep the older mark for a stable rate
			}
		}
		seen[r.RangeID()] = cur
		if rl.Leader {
			rl.Bytes = r.ApproximateBytes()
			// Every leader's window ends here; only busy ranges ship their sample (load_split's input).
			if ks := n.ap.takeSample(r.RangeID(), now); ks != nil && rl.ReadQps+rl.WriteQps >= sampleShipQPS {
				rl.SampleRequests, rl.SampleAtUnixNanos = ks.Requests, ks.At.UnixNano()
				for _, kc := range ks.Keys {
					rl.SampleKeys = append(rl.SampleKeys, kc.Key)
					rl.SampleCounts = append(rl.SampleCounts, kc.Count)
				}
			}
		}
		st.Ranges = append(st.Ranges, rl)
	}
	n.loadPrev = seen
	n.noteLeading(st)
	n.fillBackground(st)
	return st
}

// currentStats is this node's report for status pages: fresh counts and engine figures, with the
// rates of the last heartbeat, leaving the measurement windows (QPS, key samples) alone.
func (n *Node) currentStats() *pb.NodeStats {
	last, _ := n.dir.statsOf(n.ident.NodeID)
	prev := map[uint64]*pb.RangeLoad{}
	for _, rl := range last.GetRanges() {
		prev[rl.RangeId] = rl
	}
	st := n.engineStats()
	for _, r := range n.store.Replicas() {
		leader, term := r.LeaderTerm()
		rl := &pb.RangeLoad{RangeId: r.RangeID(), Leader: leader, Term: term}
		if p := prev[r.RangeID()]; p != nil {
			rl.ReadQps, rl.WriteQps, rl.Bytes = p.ReadQps, p.WriteQps, p.Bytes
		}
		st.Ranges = append(st.Ranges, rl)
	}
	n.fillBackground(st)
	return st
}

// sampleShipQPS is the load above which a range's key sample travels in heartbeats.
const sampleShipQPS = 100

// loadMark is a reading of a replica's request counters, to turn them into rates.
type loadMark struct {
	reads, writes uint64
	at            time.Time
}

func (n *Node) sendHeartbeats(ctx context.Context) {
	st := n.localStats()
	n.dir.recordStats(n.ident.NodeID, st, n.draining.Load(), 0, nil)
	n.dir.heard(n.ident.NodeID, time.Now())
	req := &pb.HeartbeatRequest{ClusterId: n.ident.ClusterID, Node: n.selfDesc(), Stats: st, KnownNodes: n.dir.all(),
		SentUnixNanos: time.Now().UnixNano(), Draining: n.draining.Load()}
	if r := n.store.Replica(replica.MetaRangeID); r != nil {
		req.MetaDesc = r.Desc()
		req.MetaLeaderNodeId = r.LeaderNode()
		if req.MetaLeaderNodeId != 0 {
			n.dir.recordStats(n.ident.NodeID, nil, n.draining.Load(), req.MetaLeaderNodeId, req.MetaDesc)
		}
	}
	// Wake quiesced replicas led from nodes that went silent, so their groups elect a new leader.
	for _, nd := range n.dir.all() {
		if nd.NodeId != n.ident.NodeID && time.Since(n.dir.lastHeard(nd.NodeId)) > 2*n.cfg.HeartbeatInterval+n.cfg.TickInterval*10 {
			n.store.WakeReplicasLedBy(nd.NodeId)
		}
	}
	var wg sync.WaitGroup
	for _, nd := range n.dir.all() {
		if nd.NodeId == n.ident.NodeID {
			continue
		}
		wg.Add(1)
		go func(nd *pb.NodeDescriptor) {
			defer wg.Done()
			c, err := n.peers.client(nd.Addr)
			if err != nil {
				return
			}
			hctx, cancel := context.WithTimeout(ctx, n.cfg.HeartbeatInterval)
			defer cancel()
			resp, err := c.Heartbeat(hctx, req)
			if err != nil || resp.Error != nil {
				return
			}
			n.dir.heard(nd.NodeId, time.Now())
			for _, k := range resp.KnownNodes {
				if n.dir.get(k.NodeId) == nil && n.dir.upsert(k) {
					n.saveDirectory()
				}
			}
		}(nd)
	}
	wg.Wait()
}

// refreshDirectory reloads node descriptors from the meta range (the source of truth).
func (n *Node) refreshDirectory(ctx context.Context) {
	start, end := replica.MetaNodeSpan()
	kvs, err := n.metaScan(ctx, start, end, 0)
	if err != nil {
		return
	}
	changed := false
	for _, kv := range kvs {
		nd := &pb.NodeDescriptor{}
		if proto.Unmarshal(kv.Value, nd) == nil && n.dir.upsert(nd) {
			changed = true
		}
	}
	if changed {
		n.saveDirectory()
	}
}

// Nodes implements pb.ShoalServer.
func (n *Node) Nodes(ctx context.Context, _ *pb.NodesRequest) (*pb.NodesResponse, error) {
	select {
	case <-n.ready:
	default:
		return &pb.NodesResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}}, nil
	}
	n.dir.showStats(n.ident.NodeID, n.currentStats(), n.draining.Load())
	n.dir.heard(n.ident.NodeID, time.Now())
	now := time.Now()
	// A status without the admin states and join records would show decommissioning nodes as live
	// and joins as absent: the caller retries an unavailable answer instead.
	states, joins, err := n.nodeRecords(ctx)
	if err != nil {
		return &pb.NodesResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: err.Error()}}, nil
	}
	var out []*pb.NodeStatus
	for _, nd := range n.dir.all() {
		last := n.dir.lastHeard(nd.NodeId)
		st, draining := n.dir.statsOf(nd.NodeId)
		ns := &pb.NodeStatus{Desc: nd, Draining: draining, Stats: st}
		if !last.IsZero() {
			ns.LastHeartbeatUnixNanos = last.UnixNano()
		}
		age := now.Sub(last)
		switch {
		case age <= n.liveWindow():
			ns.Live, ns.State = true, "live"
		case age <= n.cfg.DeadNodeTimeout:
			ns.State = "suspect"
		default:
			ns.State = "dead"
		}
		switch states[nd.NodeId] {
		case pb.NodeAdminState_NODE_DRAINING:
			draining = true
			ns.Draining = true
		case pb.NodeAdminState_NODE_DECOMMISSIONING:
			ns.State = "decommissioning"
		case decommissioned:
			ns.State, ns.Decommissioned = "decommissioned", true
		}
		if draining && ns.Live {
			ns.State = "draining"
		}
		if st != nil {
			for _, rl := range st.Ranges {
				ns.RangeCount++
				if rl.Leader {
					ns.LeaderCount++
				}
			}
		}
		if j := joins[nd.NodeId]; j != nil {
			ns.Join = joinStatus(j, st)
			if s := joinState(j); s != "" && ns.Live && ns.State == "live" {
				ns.State = s
			}
		}
		out = append(out, ns)
	}
	return &pb.NodesResponse{Nodes: out}, nil
}

// Ranges implements pb.ShoalServer: every range (meta first) with its best known leader.
func (n *Node) Ranges(ctx context.Context, _ *pb.RangesRequest) (*pb.RangesResponse, error) {
	select {
	case <-n.ready:
	default:
		return &pb.RangesResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "node is starting"}}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	descs, err := n.allRanges(ctx)
	if err != nil {
		return &pb.RangesResponse{Error: n.pbErr(err)}, nil
	}
	if md := n.metaDesc(); md != nil {
		descs = append([]*pb.RangeDescriptor{md}, descs...)
	}
	out := make([]*pb.RangeStatus, 0, len(descs))
	for _, d := range descs {
		rs := &pb.RangeStatus{Desc: d, LeaderNodeId: n.leaderNodeOf(d.RangeId)}
		if r := n.store.Replica(d.RangeId); r != nil {
			st := r.Status()
			rs.AppliedIndex = st.Applied
			rs.ApproxBytes = r.ApproximateBytes()
		}
		out = append(out, rs)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Desc.RangeId == replica.MetaRangeID) != (out[j].Desc.RangeId == replica.MetaRangeID) {
			return out[i].Desc.RangeId == replica.MetaRangeID
		}
		return string(out[i].Desc.StartKey) < string(out[j].Desc.StartKey)
	})
	return &pb.RangesResponse{Ranges: out}, nil
}

// relocateLocal changes the replicas of r (led by this node): add a learner on add, let it catch up
// by snapshot, then promote it and drop remove in one joint change; finally record the descriptor in
// the meta range. Each step checks what is already done, so a retried relocation resumes. step
// limits the call to one of those steps (the autopilot's operators run them one at a time).
func (n *Node) relocateLocal(ctx context.Context, r *replica.Replica, add, remove uint64, step pb.RelocateStep) (*pb.RangeDescriptor, error) {
	d := r.Desc()
	if d == nil {
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, "replica not initialized")
	}
	if remove == n.ident.NodeID && step != pb.RelocateStep_RELOCATE_ADD_LEARNER {
		// A leader does not remove itself: hand leadership to another voter, then the caller retries.
		for _, rd := range d.Replicas {
			if rd.NodeId != n.ident.NodeID && !rd.Learner && rd.NodeId != add {
				if err := r.TransferLeadership(rd.NodeId); err == nil {
					time.Sleep(300 * time.Millisecond)
					return nil, errCode(pb.ErrorCode_NOT_LEADER, "leadership moved away before removing the leader's replica")
				}
			}
		}
		return nil, errCode(pb.ErrorCode_UNAVAILABLE, "no other voter to take leadership")
	}
	all := step == pb.RelocateStep_RELOCATE_ALL
	if add != 0 && (all || step == pb.RelocateStep_RELOCATE_ADD_LEARNER) {
		var err error
		if d, err = n.addLearner(ctx, r, add); err != nil {
			return nil, err
		}
		if !all {
			return d, nil
		}
	}
	if step == pb.RelocateStep_RELOCATE_REMOVE {
		add = 0
	}
	if step == pb.RelocateStep_RELOCATE_PROMOTE && add != 0 {
		if rd := replicaOn(d, add); rd == nil {
			return nil, errCode(pb.ErrorCode_INVALID_ARGUMENT, fmt.Sprintf("range %d has no replica on node %d to promote", d.RangeId, add))
		} else if rd.Learner {
			if err := n.waitCaughtUp(ctx, r, rd.ReplicaId); err != nil {
				return nil, err
			}
		}
	}
	var changes []*raftpb.ConfChangeSingle
	next := proto.Clone(d).(*pb.RangeDescriptor)
	if add != 0 {
		if rd := replicaOn(next, add); rd != nil && rd.Learner {
			rd.Learner = false
			changes = append(changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: proto.Uint64(rd.ReplicaId)})
		}
	}
	if remove != 0 {
		if old := replicaOn(next, remove); old != nil {
			keep := next.Replicas[:0]
			for _, rd := range next.Replicas {
				if rd.NodeId != remove {
					keep = append(keep, rd)
				}
			}
			next.Replicas = keep
			changes = append(changes, &raftpb.ConfChangeSingle{Type: raftpb.ConfChangeRemoveNode.Enum(), NodeId: proto.Uint64(old.ReplicaId)})
		}
	}
	if len(changes) == 0 {
		return d, nil
	}
	next.Generation = d.Generation + 1
	if err := r.ChangeReplicas(ctx, next, changes); err != nil {
		return nil, fmt.Errorf("range %d: change replicas: %w", d.RangeId, err)
	}
	d = r.Desc()
	n.updateMeta(ctx, d)
	n.log.Info("replicas changed", "range", d.RangeId, "added", add, "removed", remove, "generation", d.Generation)
	return d, nil
}

func replicaOn(d *pb.RangeDescriptor, node uint64) *pb.ReplicaDescriptor {
	for _, rd := range d.Replicas {
		if rd.NodeId == node {
			return rd
		}
	}
	return nil
}

// addLearner adds a learner on node (unless a replica is there already) and waits until it holds
// (almost) the leader's whole log — normally after one snapshot.
func (n *Node) addLearner(ctx context.Context, r *replica.Replica, node uint64) (*pb.RangeDescriptor, error) {
	d := r.Desc()
	existing := replicaOn(d, node)
	if existing == nil {
		ld := proto.Clone(d).(*pb.RangeDescriptor)
		rid := ld.NextReplicaId
		ld.NextReplicaId++
		ld.Generation++
		ld.Replicas = append(ld.Replicas, &pb.ReplicaDescriptor{NodeId: node, ReplicaId: rid, Learner: true})
		if err := r.ChangeReplicas(ctx, ld, []*raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeAddLearnerNode.Enum(), NodeId: proto.Uint64(rid)}}); err != nil {
			return nil, fmt.Errorf("range %d: add learner on node %d: %w", d.RangeId, node, err)
		}
		d = r.Desc()
		existing = replicaOn(d, node)
		n.updateMeta(ctx, d)
	}
	if existing != nil && existing.Learner {
		if err := n.waitCaughtUp(ctx, r, existing.ReplicaId); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func (n *Node) updateMeta(ctx context.Context, d *pb.RangeDescriptor) {
	if d == nil || d.RangeId == replica.MetaRangeID {
		return
	}
	if _, err := n.metaCommand(ctx, &pb.Command{MetaUpdate: &pb.MetaUpdate{Ranges: []*pb.RangeDescriptor{d}}}); err != nil {
		n.log.Warn("meta update failed; repair queue will retry", "range", d.RangeId, "err", err)
	}
}

// waitCaughtUp waits until the learner replicaID has (almost) the leader's whole log.
func (n *Node) waitCaughtUp(ctx context.Context, r *replica.Replica, replicaID uint64) error {
	for {
		st := r.Status()
		if !st.IsLeader {
			return errCode(pb.ErrorCode_NOT_LEADER, "lost leadership while a learner caught up")
		}
		if lag, ok := st.LaggingPeers[replicaID]; ok && lag <= 2 {
			return nil
		}
		select {
		case <-ctx.Done():
			return errCode(pb.ErrorCode_TIMEOUT, fmt.Sprintf("range %d: learner %d did not catch up in time", r.RangeID(), replicaID))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
