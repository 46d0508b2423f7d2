package node

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/kv"
	"github.com/shoaldb/shoal/node/records"
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
	if pe := n.notReady(); pe != nil {
		return &pb.JoinResponse{Error: pe}, nil
	}
	if req.Node == nil || req.Node.Addr == "" {
		return &pb.JoinResponse{Error: kv.InvalidArgument("join request without an address")}, nil
	}
	ctx, cancel := kv.WithTimeout(ctx)
	defer cancel()
	res, err := n.ProposeMeta(ctx, &pb.Command{IncrementKey: replica.MetaCounterKey("node-id")})
	if err != nil {
		return &pb.JoinResponse{Error: n.PBError(err)}, nil
	}
	nd := proto.Clone(req.Node).(*pb.NodeDescriptor)
	nd.NodeId = res.Counter
	data, _ := proto.Marshal(nd)
	if _, err := n.ProposeMeta(ctx, &pb.Command{Mutations: []*pb.Mutation{{Key: replica.MetaNodeKey(nd.NodeId), Value: data}}}); err != nil {
		return &pb.JoinResponse{Error: n.PBError(err)}, nil
	}
	n.dir.Upsert(nd)
	n.dir.Heard(nd.NodeId, time.Now())
	n.saveDirectory()
	n.log.Info("node joined", "node", nd.NodeId, "addr", nd.Addr)
	return &pb.JoinResponse{NodeId: nd.NodeId, ClusterId: n.ident.ClusterID, Nodes: n.dir.All()}, nil
}

// Heartbeat implements pb.ShoalServer: a peer says it is alive and reports its load.
func (n *Node) Heartbeat(ctx context.Context, req *pb.HeartbeatRequest) (*pb.HeartbeatResponse, error) {
	// Until Start has its identity (a joining node learns it from the Join RPC) n.ident is being
	// written: answer nothing rather than read it; the peer retries at its next heartbeat.
	if pe := n.notReady(); pe != nil {
		return &pb.HeartbeatResponse{Error: pe}, nil
	}
	if req.ClusterId != "" && n.ident.ClusterID != "" && req.ClusterId != n.ident.ClusterID {
		return &pb.HeartbeatResponse{Error: &pb.Error{Code: pb.ErrorCode_INVALID_ARGUMENT,
			Message: fmt.Sprintf("heartbeat from cluster %s, this node belongs to %s", req.ClusterId, n.ident.ClusterID)}}, nil
	}
	changed := false
	if req.Node != nil {
		changed = n.dir.Upsert(req.Node)
		prev, _ := n.dir.StatsOf(req.Node.NodeId)
		n.dir.Heard(req.Node.NodeId, time.Now())
		n.dir.RecordStats(req.Node.NodeId, req.Stats, req.Draining, req.MetaLeaderNodeId, req.MetaDesc)
		n.bg.Notify() // a peer's status changed: a postponed heavy task may now find an idle candidate
		if prev == nil && req.Stats != nil {
			// The node's first load report: it has started and serves (a node that only registered
			// through Join has not). A join may start now rather than at the autopilot's next round.
			n.ap.Poke()
		}
	}
	for _, nd := range req.KnownNodes {
		if n.dir.Get(nd.NodeId) == nil && n.dir.Upsert(nd) {
			changed = true
		}
	}
	if changed {
		n.saveDirectory()
	}
	return &pb.HeartbeatResponse{KnownNodes: n.dir.All()}, nil
}

// engineStats is the engine's part of this node's report (heartbeats and status pages alike).
func (n *Node) engineStats() *pb.NodeStats {
	es := n.eng.Stats()
	st := &pb.NodeStats{
		DiskBytes:               es.DiskBytes,
		BlockCacheHits:          uint64(es.BlockCacheHits),
		BlockCacheMisses:        uint64(es.BlockCacheMisses),
		CompactionsRunning:      uint32(es.CompactionsRunning),
		L0Files:                 uint32(es.L0Files),
		MemtableBytes:           es.MemtableBytes,
		ServedBlockBytes:        es.ServedBlockBytes,
		ServedBlockBytesInCache: es.ServedBlockBytesInCache,
		CompactionDebtBytes:     es.CompactionDebtBytes,
		CpuCores:                float64(runtime.NumCPU()),
		Profile:                 n.eng.Profile(),
		BlockCacheCapacity:      es.BlockCacheCapacity,
		BlockBytes:              uint32(n.eng.BlockBytes()),
	}
	if p, ok := n.hist.Latest(); ok {
		st.CpuPercent, st.DiskBusy = p.CPUPercent, p.DiskBusy
	}
	// The disk's busy share since the last sample (a heartbeat ago), not the history's 5-s point:
	// hotspot_offload must see a hot spot within seconds.
	st.DiskBusy = n.eng.DiskUtilization()
	return st
}

// localStats builds this node's load report for a heartbeat: it ends the QPS and key-sample windows,
// so only the heartbeat loop may call it (see currentStats for status pages).
func (n *Node) localStats() *pb.NodeStats {
	st := n.engineStats()
	now := time.Now()
	n.loadMu.Lock()
	defer n.loadMu.Unlock()
	seen := make(map[uint64]loadMark, len(n.loadPrev))
	placeBy := now.Add(placeBudget)
	for _, r := range n.Store().Replicas() {
		cur := loadMark{reads: r.Reads.Load(), writes: r.Writes.Load(), scans: r.Scans.Load(), at: now}
		leader, term := r.LeaderTerm()
		rl := &pb.RangeLoad{RangeId: r.RangeID(), Leader: leader, Term: term}
		var points uint64 // point reads (scans aside) since the last reading
		if prev, ok := n.loadPrev[r.RangeID()]; ok {
			if dt := now.Sub(prev.at).Seconds(); dt > 0.05 {
				points = (cur.reads - prev.reads) - (cur.scans - prev.scans)
				rl.ReadQps = float64(cur.reads-prev.reads) / dt
				rl.WriteQps = float64(cur.writes-prev.writes) / dt
				rl.ScanQps = float64(cur.scans-prev.scans) / dt
			} else {
				cur = prev // too soon after the last reading: keep the older mark for a stable rate
			}
		}
		seen[r.RangeID()] = cur
		n.fillAccess(rl, r, points, now, placeBy)
		// Every replica's latency window ends here; only the leader's travels (it serves the range).
		lat := n.latency.take(r.RangeID(), now)
		if rl.Leader {
			rl.Bytes = r.ApproximateBytes()
			fillLatency(rl, lat)
			// Every leader's window ends here; only busy ranges ship their sample (load_split's input).
			if ks := n.ap.TakeSample(r.RangeID(), now); ks != nil && rl.ReadQps+rl.WriteQps >= sampleShipQPS {
				rl.SampleRequests, rl.SampleAtUnixNanos = ks.Requests, ks.At.UnixNano()
				for _, kc := range ks.Keys {
					rl.SampleKeys = append(rl.SampleKeys, kc.Key)
					rl.SampleCounts = append(rl.SampleCounts, kc.Count)
				}
			}
			n.fillStreamLoad(rl, now)
		}
		st.Ranges = append(st.Ranges, rl)
	}
	n.loadPrev = seen
	n.latency.retain(seen)
	if n.access != nil {
		n.access.Retain(func(id uint64) bool { _, ok := seen[id]; return ok })
	}
	n.streams.Retain(func(id uint64) bool { _, ok := seen[id]; return ok })
	st.IndexFilterBytes = min(n.indexFilterBytes.Load(), st.BlockCacheCapacity)
	st.PredictedUsage, st.PredictedHitRatio = predictUsage(st, n.cfg.Autopilot.Policies.UsageBalance.Model)
	n.bg.NoteLeading(st)
	n.bg.FillStats(st)
	return st
}

// currentStats is this node's report for status pages: fresh counts and engine figures, with the
// rates of the last heartbeat, leaving the measurement windows (QPS, key samples) alone.
func (n *Node) currentStats() *pb.NodeStats {
	last, _ := n.dir.StatsOf(n.ident.NodeID)
	prev := map[uint64]*pb.RangeLoad{}
	for _, rl := range last.GetRanges() {
		prev[rl.RangeId] = rl
	}
	st := n.engineStats()
	st.PredictedUsage, st.PredictedHitRatio = last.GetPredictedUsage(), last.GetPredictedHitRatio()
	st.IndexFilterBytes = last.GetIndexFilterBytes()
	for _, r := range n.Store().Replicas() {
		leader, term := r.LeaderTerm()
		rl := &pb.RangeLoad{RangeId: r.RangeID(), Leader: leader, Term: term}
		if p := prev[r.RangeID()]; p != nil {
			rl.ReadQps, rl.WriteQps, rl.ScanQps, rl.Bytes = p.ReadQps, p.WriteQps, p.ScanQps, p.Bytes
			copyAccess(rl, p)
		}
		st.Ranges = append(st.Ranges, rl)
	}
	n.bg.FillStats(st)
	return st
}

// fillStreamLoad adds the stream events the node's tasks applied in rl's range since the last
// heartbeat, and a sample of their keys (stream_align's input).
func (n *Node) fillStreamLoad(rl *pb.RangeLoad, now time.Time) {
	q, ks := n.streams.TakeLoad(rl.RangeId, now)
	if ks == nil {
		return
	}
	rl.StreamEventsQps, rl.StreamSampleAtUnixNanos = q, ks.At.UnixNano()
	for _, kc := range ks.Keys {
		rl.StreamSampleKeys = append(rl.StreamSampleKeys, kc.Key)
		rl.StreamSampleCounts = append(rl.StreamSampleCounts, kc.Count)
	}
}

// sampleShipQPS is the load above which a range's key sample travels in heartbeats.
const sampleShipQPS = 100

// loadMark is a reading of a replica's request counters, to turn them into rates.
type loadMark struct {
	reads, writes, scans uint64
	at                   time.Time
}

func (n *Node) sendHeartbeats(ctx context.Context) {
	st := n.localStats()
	// A node catching up after its start takes no leadership yet, as a draining one (package catchup).
	noLeads := n.draining.Load() || n.catchUp.CatchingUp()
	n.dir.RecordStats(n.ident.NodeID, st, noLeads, 0, nil)
	n.dir.Heard(n.ident.NodeID, time.Now())
	req := &pb.HeartbeatRequest{ClusterId: n.ident.ClusterID, Node: n.selfDesc(), Stats: st, KnownNodes: n.dir.All(),
		SentUnixNanos: time.Now().UnixNano(), Draining: noLeads}
	if r := n.Store().Replica(replica.MetaRangeID); r != nil {
		req.MetaDesc = r.Desc()
		req.MetaLeaderNodeId = r.LeaderNode()
		if req.MetaLeaderNodeId != 0 {
			n.dir.RecordStats(n.ident.NodeID, nil, noLeads, req.MetaLeaderNodeId, req.MetaDesc)
		}
	}
	var wg sync.WaitGroup
	for _, nd := range n.dir.All() {
		if nd.NodeId == n.ident.NodeID {
			continue
		}
		wg.Add(1)
		go func(nd *pb.NodeDescriptor) {
			defer wg.Done()
			c, err := n.peers.Client(nd.Addr)
			if err != nil {
				return
			}
			hctx, cancel := context.WithTimeout(ctx, n.cfg.HeartbeatInterval)
			defer cancel()
			resp, err := c.Heartbeat(hctx, req)
			if err != nil || resp.Error != nil {
				return
			}
			n.dir.Heard(nd.NodeId, time.Now())
			for _, k := range resp.KnownNodes {
				if n.dir.Get(k.NodeId) == nil && n.dir.Upsert(k) {
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
	kvs, err := n.ScanMeta(ctx, start, end, 0)
	if err != nil {
		return
	}
	changed := false
	for _, kv := range kvs {
		nd := &pb.NodeDescriptor{}
		if proto.Unmarshal(kv.Value, nd) == nil && n.dir.Upsert(nd) {
			changed = true
		}
	}
	if changed {
		n.saveDirectory()
	}
}

// Nodes implements pb.ShoalServer.
func (n *Node) Nodes(ctx context.Context, _ *pb.NodesRequest) (*pb.NodesResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.NodesResponse{Error: pe}, nil
	}
	n.dir.ShowStats(n.ident.NodeID, n.currentStats(), n.draining.Load())
	n.dir.Heard(n.ident.NodeID, time.Now())
	now := time.Now()
	// A status without the admin states and join records would show decommissioning nodes as live
	// and joins as absent: the caller retries an unavailable answer instead.
	states, joins, err := records.NodeRecords(ctx, n.Service)
	if err != nil {
		return &pb.NodesResponse{Error: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: err.Error()}}, nil
	}
	var out []*pb.NodeStatus
	for _, nd := range n.dir.All() {
		last := n.dir.LastHeard(nd.NodeId)
		st, draining := n.dir.StatsOf(nd.NodeId)
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
		case records.Decommissioned:
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

// kickHeartbeat asks the heartbeat loop to report now rather than at its next interval.
func (n *Node) kickHeartbeat() {
	select {
	case n.hbKick <- struct{}{}:
	default:
	}
}

// heartbeatLoop sends heartbeats every HeartbeatInterval, and at once when a heavy task appears or ends.
// The first goes out at once: a started node's first load report is what makes it live to the
// others and lets the autopilot start its join (see Heartbeat), a whole interval sooner.
func (n *Node) heartbeatLoop() {
	n.loops.Go(func(ctx context.Context) {
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-n.hbKick:
				if !t.Stop() {
					select {
					case <-t.C:
					default:
					}
				}
			}
			n.sendHeartbeats(ctx)
			t.Reset(n.cfg.HeartbeatInterval)
		}
	})
}

// joinStatus describes node's join for the Nodes RPC; st is the node's last reported stats.
func joinStatus(j *model.Join, st *pb.NodeStats) *pb.JoinStatus {
	if j == nil {
		return nil
	}
	js := &pb.JoinStatus{Strategy: j.Strategy, StartedUnixNanos: j.Started.UnixNano(), Target: uint32(j.Target)}
	if !j.FirstServed.IsZero() {
		js.FirstServedUnixNanos = j.FirstServed.UnixNano()
	}
	if !j.Done.IsZero() {
		js.DoneUnixNanos = j.Done.UnixNano()
	}
	for _, rl := range st.GetRanges() {
		if rl.RangeId == replica.MetaRangeID {
			continue
		}
		js.Held++
		if rl.Leader {
			js.Leading++
		}
	}
	return js
}

// joinState is the node state shown while a join is under way: "joining" until the node serves a
// range, then "partially-joined" until the join is complete.
func joinState(j *model.Join) string {
	switch {
	case j == nil || !j.Active():
		return ""
	case j.FirstServed.IsZero():
		return "joining"
	}
	return "partially-joined"
}

// clusterView is the range layer's view of other nodes (kv.Cluster), from the node's directory.
type clusterView struct{ n *Node }

func (v clusterView) Resolve(node uint64) (string, bool)         { return v.n.dir.Resolve(node) }
func (v clusterView) Get(node uint64) *pb.NodeDescriptor         { return v.n.dir.Get(node) }
func (v clusterView) Client(addr string) (pb.ShoalClient, error) { return v.n.peers.Client(addr) }
func (v clusterView) LeaderOf(rangeID uint64) uint64             { return v.n.dir.LeaderOf(rangeID) }
func (v clusterView) MetaLeader() uint64                         { return v.n.dir.MetaLeader() }
func (v clusterView) MetaDesc() *pb.RangeDescriptor              { return v.n.dir.MetaDesc() }
func (v clusterView) SetLeader(rangeID, node uint64)             { v.n.dir.SetLeader(rangeID, node) }
func (v clusterView) MovedLeader(rangeID, node uint64)           { v.n.dir.MovedLeader(rangeID, node) }

// ProbeNodes lists nodes heard from within five heartbeats.
func (v clusterView) ProbeNodes() []uint64 {
	return v.n.dir.LiveNodes(5 * v.n.cfg.HeartbeatInterval)
}

// observer passes the requests the range layer serves to load-based splitting's key samples and to
// read hints.
type observer struct{ n *Node }

func (o observer) Request(rangeID uint64, key []byte) { o.n.ap.Record(rangeID, key) }
func (o observer) Read(rangeID uint64, key []byte)    { o.n.hints.Read(rangeID, key) }
func (o observer) Scan(rangeID uint64, start, end []byte, limit int, reverse bool) {
	o.n.hints.Scan(rangeID, start, end, limit, reverse)
}
func (o observer) Served(rangeID uint64, took time.Duration) { o.n.latency.record(rangeID, took) }

// peerConn returns the pooled node-to-node connection to node id (for services other than the
// public API: read hints).
func (n *Node) peerConn(nodeID uint64) (*grpc.ClientConn, error) {
	addr, ok := n.dir.Resolve(nodeID)
	if !ok {
		return nil, fmt.Errorf("node %d is not in this node's directory", nodeID)
	}
	return n.peers.Conn(addr)
}

// peerClient returns a client of node id's public API.
func (n *Node) peerClient(nodeID uint64) (pb.ShoalClient, error) {
	c, err := n.peerConn(nodeID)
	if err != nil {
		return nil, err
	}
	return pb.NewShoalClient(c), nil
}
