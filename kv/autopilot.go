package kv

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// The autopilot runs on exactly one node: the one leading the meta range. autopilotHost gives it the
// cluster model (model.Source) and carries out its operators' steps (executor.Actuator) through the
// same RPCs an operator would use by hand. Policy switches and node admin states (drain,
// decommission) live in the meta range, so they survive a move of the meta leadership.

// Meta keys of autopilot state.
func metaPolicyKey(name string) []byte { return append([]byte("p"), name...) }
func metaNodeStateKey(node uint64) []byte {
	return append([]byte("s"), []byte(strconv.FormatUint(node, 10))...)
}

type autopilotHost struct {
	n *Node

	mu sync.Mutex
	ap *autopilot.Autopilot
	// samplers maps range id → *model.KeySampler; a sync.Map keeps the per-request lookup off a
	// node-wide lock.
	samplers sync.Map

	opMu     sync.Mutex
	opCounts map[OperatorKey]uint64 // finished decisions by policy, kind, outcome (for /metrics)

	decMu          sync.Mutex
	savedDecisions map[uint64]string // id → JSON as last written to the meta range
}

func newAutopilotHost(n *Node) *autopilotHost { return &autopilotHost{n: n} }

// record notes a request for key on rangeID for load-based splitting (leaders only report it).
func (h *autopilotHost) record(rangeID uint64, key []byte) {
	s, ok := h.samplers.Load(rangeID)
	if !ok {
		s, _ = h.samplers.LoadOrStore(rangeID, model.NewKeySampler(0, rangeID))
	}
	s.(*model.KeySampler).Record(key)
}

// takeSample ends the sampling window of rangeID.
func (h *autopilotHost) takeSample(rangeID uint64, now time.Time) *model.KeySample {
	s, ok := h.samplers.Load(rangeID)
	if !ok {
		return nil
	}
	return s.(*model.KeySampler).Take(now)
}

// watch starts or stops the autopilot as this node gains or loses the meta leadership, and applies
// policy switches stored in the meta range.
func (h *autopilotHost) watch(ctx context.Context) {
	n := h.n
	r := n.store.Replica(replica.MetaRangeID)
	leads := r != nil && r.IsLeader()
	h.mu.Lock()
	ap := h.ap
	h.mu.Unlock()
	switch {
	case leads && ap == nil:
		cfg := n.cfg.Autopilot
		cfg.OnDecision = h.countDecision
		cfg.Policies.Replicate.Factor = n.cfg.ReplicationFactor
		cfg.Policies.Replicate.DeadAfter = n.cfg.DeadNodeTimeout
		ap = autopilot.New(h, h, cfg)
		h.applySwitches(ctx, ap)
		h.loadDecisions(ctx, ap)
		ap.Start()
		h.mu.Lock()
		h.ap = ap
		h.mu.Unlock()
		n.log.Info("autopilot started on this node (it leads the meta range)")
	case !leads && ap != nil:
		ap.Stop()
		h.mu.Lock()
		h.ap = nil
		h.mu.Unlock()
		n.log.Info("autopilot stopped on this node (meta leadership moved)")
	case leads:
		h.applySwitches(ctx, ap)
		h.saveDecisions(ctx, ap)
	}
}

func (h *autopilotHost) stop() {
	h.mu.Lock()
	ap := h.ap
	h.ap = nil
	h.mu.Unlock()
	if ap != nil {
		ap.Stop()
	}
}

func (h *autopilotHost) running() *autopilot.Autopilot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ap
}

// poke asks the autopilot running here, if any, for a reactive round (see autopilot.Poke).
func (h *autopilotHost) poke() {
	if ap := h.running(); ap != nil {
		ap.Poke()
	}
}

func (h *autopilotHost) countDecision(e decisions.Entry) {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	if h.opCounts == nil {
		h.opCounts = map[OperatorKey]uint64{}
	}
	h.opCounts[OperatorKey{Policy: e.Policy, Kind: e.Kind, Outcome: decisions.Outcome(e.Status)}]++
}

func (h *autopilotHost) operatorCounts() map[OperatorKey]uint64 {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	out := make(map[OperatorKey]uint64, len(h.opCounts))
	for k, v := range h.opCounts {
		out[k] = v
	}
	return out
}

// defaultOff lists policies that are off unless switched on.
var defaultOff = map[string]bool{policy.NameMaskCompaction: true}

func (h *autopilotHost) applySwitches(ctx context.Context, ap *autopilot.Autopilot) {
	stored := map[string]bool{}
	kvs, err := h.n.metaScan(ctx, []byte("p"), []byte("q"), 0)
	if err != nil {
		return // keep the switches as they are: the defaults would undo an operator's settings until the next read
	}
	for _, kv := range kvs {
		stored[string(kv.Key[1:])] = string(kv.Value) == "on"
	}
	for _, st := range ap.Policies().List() {
		on := !defaultOff[st.Name]
		if v, ok := stored[st.Name]; ok {
			on = v
		}
		if st.On != on {
			_ = ap.SetPolicy(st.Name, on)
		}
	}
}

// Snapshot implements model.Source from heartbeats and the meta range.
func (h *autopilotHost) Snapshot() *model.Cluster {
	n := h.n
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	descs, err := n.allRanges(ctx)
	if err != nil {
		return model.NewCluster(now, nil, nil) // an empty model proposes nothing
	}
	if md := n.metaDesc(); md != nil {
		descs = append(descs, md)
	}
	// Without the nodes' admin states and join records the model would show a decommissioning node
	// as active, or a joining one as idle, and rebalance would move replicas against them: no round.
	states, joins, err := n.nodeRecords(ctx)
	if err != nil {
		return model.NewCluster(now, nil, nil)
	}
	loads := map[uint64]*pb.RangeLoad{}
	var nodes []*model.Node
	for _, nd := range n.dir.all() {
		st, draining := n.dir.statsOf(nd.NodeId)
		last := n.dir.lastHeard(nd.NodeId)
		mn := &model.Node{ID: nd.NodeId, Addr: nd.Addr, Live: now.Sub(last) <= n.liveWindow(), LastHeartbeat: last,
			Draining: draining || states[nd.NodeId] == pb.NodeAdminState_NODE_DRAINING}
		switch states[nd.NodeId] {
		case pb.NodeAdminState_NODE_DECOMMISSIONING:
			mn.Decommissioning = true
		case decommissioned:
			mn.Decommissioned = true
		}
		if st != nil {
			mn.CPUPercent = st.CpuPercent
			mn.DiskUsed = st.DiskBytes
			mn.BlockCacheHits, mn.BlockCacheMisses = st.BlockCacheHits, st.BlockCacheMisses
			mn.CompactionsRunning, mn.L0Files, mn.MemtableBytes = st.CompactionsRunning, st.L0Files, st.MemtableBytes
			fillModelTasks(mn, st)
			for _, rl := range st.Ranges {
				// Two nodes may both claim a range for a heartbeat after a transfer: the later term's
				// report is the current one.
				if rl.Leader && (loads[rl.RangeId] == nil || rl.Term > loads[rl.RangeId].Term) {
					loads[rl.RangeId] = rl
				}
			}
		}
		mn.Join = joins[nd.NodeId]
		nodes = append(nodes, mn)
	}
	ranges := make([]*model.Range, 0, len(descs))
	for _, d := range descs {
		mr := &model.Range{ID: d.RangeId, StartKey: d.StartKey, EndKey: d.EndKey, Generation: d.Generation,
			System: d.RangeId == replica.MetaRangeID, Leader: n.leaderNodeOf(d.RangeId)}
		for _, rd := range d.Replicas {
			mr.Replicas = append(mr.Replicas, model.Replica{Node: rd.NodeId, Learner: rd.Learner})
		}
		if rl := loads[d.RangeId]; rl != nil {
			mr.ReadQPS, mr.WriteQPS, mr.Bytes = rl.ReadQps, rl.WriteQps, rl.Bytes
			if len(rl.SampleKeys) > 0 && len(rl.SampleKeys) == len(rl.SampleCounts) {
				ks := &model.KeySample{At: time.Unix(0, rl.SampleAtUnixNanos), Requests: rl.SampleRequests}
				for i, k := range rl.SampleKeys {
					ks.Keys = append(ks.Keys, model.KeyCount{Key: k, Count: rl.SampleCounts[i]})
				}
				mr.Sample = ks
			}
		}
		ranges = append(ranges, mr)
	}
	return model.NewCluster(now, nodes, ranges)
}

// nodeRecords reads what the meta range keeps per node: admin states and join records.
func (n *Node) nodeRecords(ctx context.Context) (map[uint64]pb.NodeAdminState, map[uint64]*model.Join, error) {
	states, err := n.adminStates(ctx)
	if err != nil {
		return nil, nil, err
	}
	joins, err := n.joinRecords(ctx)
	if err != nil {
		return nil, nil, err
	}
	return states, joins, nil
}

// adminStates reads the drain/decommission marks of every node from the meta range.
func (n *Node) adminStates(ctx context.Context) (map[uint64]pb.NodeAdminState, error) {
	states := map[uint64]pb.NodeAdminState{}
	kvs, err := n.metaScan(ctx, []byte("s"), []byte("t"), 0)
	if err != nil {
		return nil, fmt.Errorf("read the nodes' admin states from the meta range: %w", err)
	}
	for _, kv := range kvs {
		id, err := strconv.ParseUint(string(kv.Key[1:]), 10, 64)
		if err == nil && len(kv.Value) == 1 {
			states[id] = pb.NodeAdminState(kv.Value[0])
		}
	}
	return states, nil
}

// decommissioned is stored for a node the autopilot emptied (beyond the public enum's values).
const decommissioned = pb.NodeAdminState(100)

func (h *autopilotHost) relocate(ctx context.Context, rangeID, add, remove uint64, step pb.RelocateStep) error {
	resp, err := h.n.RelocateReplica(ctx, &pb.RelocateReplicaRequest{RangeId: rangeID, AddNodeId: add, RemoveNodeId: remove, Step: step})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return &pbError{resp.Error}
	}
	return nil
}

// AddLearner implements executor.Actuator.
func (h *autopilotHost) AddLearner(ctx context.Context, rangeID, node uint64) error {
	return h.relocate(ctx, rangeID, node, 0, pb.RelocateStep_RELOCATE_ADD_LEARNER)
}

// PromoteVoter implements executor.Actuator.
func (h *autopilotHost) PromoteVoter(ctx context.Context, rangeID, node, remove uint64) error {
	return h.relocate(ctx, rangeID, node, remove, pb.RelocateStep_RELOCATE_PROMOTE)
}

// RemoveReplica implements executor.Actuator.
func (h *autopilotHost) RemoveReplica(ctx context.Context, rangeID, node uint64) error {
	return h.relocate(ctx, rangeID, 0, node, pb.RelocateStep_RELOCATE_REMOVE)
}

// TransferLeader implements executor.Actuator.
func (h *autopilotHost) TransferLeader(ctx context.Context, rangeID, to uint64) error {
	if rangeID == replica.MetaRangeID {
		// The autopilot stops on this node once the meta leadership leaves it: save its decision
		// log first, so that the next autopilot restores the outcomes recorded up to now.
		h.mu.Lock()
		ap := h.ap
		h.mu.Unlock()
		if ap != nil {
			h.saveDecisions(ctx, ap)
		}
	}
	resp, err := h.n.TransferLeader(ctx, &pb.TransferLeaderRequest{RangeId: rangeID, NodeId: to})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return &pbError{resp.Error}
	}
	return nil
}

// Split implements executor.Actuator.
func (h *autopilotHost) Split(ctx context.Context, rangeID uint64, key []byte) error {
	resp, err := h.n.Split(ctx, &pb.SplitRequest{Key: key})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return &pbError{resp.Error}
	}
	if resp.Left != nil && resp.Left.RangeId != rangeID {
		return fmt.Errorf("split at %q landed in range %d, not %d", key, resp.Left.RangeId, rangeID)
	}
	return nil
}

// Merge implements executor.Actuator.
func (h *autopilotHost) Merge(ctx context.Context, leftRangeID uint64) error {
	resp, err := h.n.Merge(ctx, &pb.MergeRequest{LeftRangeId: leftRangeID})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return &pbError{resp.Error}
	}
	return nil
}

// MarkDecommissioned implements autopilot.Decommissioner.
func (h *autopilotHost) MarkDecommissioned(ctx context.Context, node uint64) error {
	_, err := h.n.metaCommand(ctx, &pb.Command{Mutations: []*pb.Mutation{{Key: metaNodeStateKey(node), Value: []byte{byte(decommissioned)}}}})
	return err
}

// ---- admin RPCs (forwarded to the meta leader, where the autopilot runs) ----

func (n *Node) onAutopilot(ctx context.Context, local func(*autopilot.Autopilot) error, remote func(context.Context, pb.ShoalClient) (*pb.Error, error)) error {
	return n.onLeader(ctx, replica.MetaRangeID, func(*replica.Replica) error {
		ap := n.ap.running()
		if ap == nil {
			return errCode(pb.ErrorCode_UNAVAILABLE, "the autopilot is starting on this node; retry")
		}
		return local(ap)
	}, remote)
}

// PolicyList implements pb.ShoalServer.
func (n *Node) PolicyList(ctx context.Context, req *pb.PolicyListRequest) (*pb.PolicyListResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.PolicyListResponse{Error: pe}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	resp := &pb.PolicyListResponse{}
	err := n.onAutopilot(ctx, func(ap *autopilot.Autopilot) error {
		for _, st := range ap.Policies().List() {
			resp.Policies = append(resp.Policies, &pb.PolicyStatus{Name: st.Name, On: st.On})
		}
		return nil
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		out, err := c.PolicyList(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.Policies = out.Policies
		return out.Error, nil
	})
	resp.Error = n.pbErr(err)
	return resp, nil
}

// PolicySet implements pb.ShoalServer: the switch is stored in the meta range and applied at once.
func (n *Node) PolicySet(ctx context.Context, req *pb.PolicySetRequest) (*pb.PolicySetResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.PolicySetResponse{Error: pe}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	err := n.onAutopilot(ctx, func(ap *autopilot.Autopilot) error {
		if err := ap.SetPolicy(req.Name, req.On); err != nil {
			return errCode(pb.ErrorCode_INVALID_ARGUMENT, err.Error())
		}
		v := "off"
		if req.On {
			v = "on"
		}
		_, err := n.metaCommand(ctx, &pb.Command{Mutations: []*pb.Mutation{{Key: metaPolicyKey(req.Name), Value: []byte(v)}}})
		return err
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		out, err := c.PolicySet(ctx, req)
		if err != nil {
			return nil, err
		}
		return out.Error, nil
	})
	return &pb.PolicySetResponse{Error: n.pbErr(err)}, nil
}

// Decisions implements pb.ShoalServer.
func (n *Node) Decisions(ctx context.Context, req *pb.DecisionsRequest) (*pb.DecisionsResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.DecisionsResponse{Error: pe}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	resp := &pb.DecisionsResponse{}
	err := n.onAutopilot(ctx, func(ap *autopilot.Autopilot) error {
		b, err := json.Marshal(ap.Decisions().Entries())
		resp.EntriesJson = b
		return err
	}, func(ctx context.Context, c pb.ShoalClient) (*pb.Error, error) {
		out, err := c.Decisions(ctx, req)
		if err != nil {
			return nil, err
		}
		resp.EntriesJson = out.EntriesJson
		return out.Error, nil
	})
	resp.Error = n.pbErr(err)
	return resp, nil
}

// SetNodeState implements pb.ShoalServer: drain, decommission, or back to active.
func (n *Node) SetNodeState(ctx context.Context, req *pb.SetNodeStateRequest) (*pb.SetNodeStateResponse, error) {
	if pe := n.notReady(); pe != nil {
		return &pb.SetNodeStateResponse{Error: pe}, nil
	}
	if n.dir.get(req.NodeId) == nil {
		return &pb.SetNodeStateResponse{Error: invalid("unknown node %d", req.NodeId)}, nil
	}
	if _, ok := pb.NodeAdminState_name[int32(req.State)]; !ok {
		return &pb.SetNodeStateResponse{Error: invalid("unknown node state %d", req.State)}, nil
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	m := &pb.Mutation{Key: metaNodeStateKey(req.NodeId), Value: []byte{byte(req.State)}}
	if req.State == pb.NodeAdminState_NODE_ACTIVE {
		m = &pb.Mutation{Key: metaNodeStateKey(req.NodeId), Delete: true}
	}
	_, err := n.metaCommand(ctx, &pb.Command{Mutations: []*pb.Mutation{m}})
	return &pb.SetNodeStateResponse{Error: n.pbErr(err)}, nil
}

// fillModelTasks copies a node's background-work report into the autopilot's model.
func fillModelTasks(mn *model.Node, st *pb.NodeStats) {
	mn.CompactionDebt = st.CompactionDebtBytes
	mn.LedBefore = st.LedBefore
	for _, t := range st.Tasks {
		mn.Tasks = append(mn.Tasks, model.Task{ID: t.Id, Kind: t.Kind, Name: t.Name, Running: t.Running, Heavy: t.Heavy,
			Bytes: t.Bytes, Since: time.Unix(0, t.SinceUnixNanos), Ranges: t.RangeIds})
	}
	if len(st.LastCompleted) > 0 {
		mn.LastCompleted = make(map[string]time.Time, len(st.LastCompleted))
		for _, c := range st.LastCompleted {
			mn.LastCompleted[c.Kind] = time.Unix(0, c.AtUnixNanos)
		}
	}
}

// transferMinReplays is how many recent replays a transfer target's hit ratio must rest on.
const transferMinReplays = 8

// WarmBeforeTransfer implements executor.Warmer: before the autopilot moves rangeID's leadership to
// node to, it asks the target how warm its cache is for the range (read hints) and waits for it, at
// most HintsConfig.TransferWait (and never more than half the step's remaining time). Warm means
// hints flowing with a small apply lag and a replay hit ratio of at least 90 % of the current
// leader's block-cache hit ratio over the last 10 s. It returns the note for the decision log; the
// transfer follows either way. Ranges that serve almost no reads get no hints, so they are not
// checked (they would always wait the full time).
func (h *autopilotHost) WarmBeforeTransfer(ctx context.Context, rangeID, to uint64, readQPS float64) string {
	n := h.n
	wait := n.cfg.Hints.TransferWait
	ap := h.running()
	if n.hints == nil || wait < 0 || ap == nil || !ap.Policies().Enabled(NameReadHintsPolicy) {
		return ""
	}
	if readQPS < minReadQPSForWarmth {
		return fmt.Sprintf("read hints: warmth of n%d not checked (r%d serves %.1f reads/s; an idle range gets no hints)", to, rangeID, readQPS)
	}
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	crit := hints.DefaultWarmCriteria()
	// Fewer replays than the package default: a receiver now replays a recurring read at most once a
	// second, and one whose disk is saturated applies about a third of its hints (hintLoad), so a
	// range's last few batches hold 8–11 replays. Requiring 16 made every hand-over to a new node wait
	// its full TransferWait with a replay hit ratio of 0.94–1.00 already measured (docs/bench-join.md,
	// session 7).
	crit.MinReplays = transferMinReplays
	leader := n.leaderNodeOf(rangeID)
	ref := "leader's hit ratio unknown"
	// The leader's own reads' ratio, not its whole cache's: the snapshot of this very move streams
	// out of the leader and its compactions read too, all misses, and counting them let a node whose
	// replays hit 0.57 of the time take a range whose clients hit 0.99 (docs/bench-join.md, session 18).
	if ratio, ok := n.dir.servedHitRatio(leader, 10*time.Second); ok {
		crit = crit.RelativeTo(ratio, 0.9)
		ref = fmt.Sprintf("leader n%d own reads' hit ratio %.2f, required %.2f", leader, ratio, crit.MinHitRatio)
	} else if ratio, ok := n.dir.cacheHitRatio(leader, 10*time.Second); ok {
		crit = crit.RelativeTo(ratio, 0.9)
		ref = fmt.Sprintf("leader n%d block-cache hit ratio %.2f, required %.2f", leader, ratio, crit.MinHitRatio)
	}
	cc, err := n.peerConn(to)
	if err != nil {
		return fmt.Sprintf("read hints: warmth of n%d unknown (%v); transferred without waiting", to, err)
	}
	start := time.Now()
	w, warm, err := hints.NewClient(cc, n.ident.ClusterID).WaitWarm(ctx, rangeID, crit, wait)
	took := time.Since(start).Round(10 * time.Millisecond)
	switch {
	case err != nil:
		return fmt.Sprintf("read hints: warmth of n%d unknown after %v (%v); transferred anyway", to, took, err)
	case warm:
		return fmt.Sprintf("read hints: n%d warm after %v (%s; %s)", to, took, w, ref)
	}
	why := "not warm"
	if cerr := crit.Check(w); cerr != nil {
		why = cerr.Error()
	}
	return fmt.Sprintf("read hints: n%d not warm after %v (%s; %s: %s); transferred anyway", to, took, w, ref, why)
}
