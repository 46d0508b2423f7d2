// Package autopilothost runs the autopilot on the node that leads the meta range. It gives the
// autopilot its cluster model (model.Source, from heartbeats and the meta range) and carries out its
// operators' steps (executor.Actuator: relocate, transfer, split, merge, warm before transfer) through
// the same calls an operator would make by hand. Policy switches, nodes' admin states, join records and
// the decision log live in the meta range (package records), so they survive a move of the meta
// leadership.
//
// It decides nothing itself: policies decide, the executor runs their operators; this package only
// reads state for them and performs the steps they ask for.
package autopilothost

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/autopilot"
	"github.com/shoaldb/shoal/autopilot/decisions"
	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/node/directory"
	"github.com/shoaldb/shoal/node/readhints"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
)

// Ranges is what the host needs of the range layer (kv.Service implements it).
type Ranges interface {
	records.MetaStore
	AllRanges(ctx context.Context) ([]*pb.RangeDescriptor, error)
	MetaDesc() *pb.RangeDescriptor
	LeaderNodeOf(rangeID uint64) uint64
	OnLeader(ctx context.Context, rangeID uint64, local func(*replica.Replica) error,
		remote func(context.Context, pb.ShoalClient) (*pb.Error, error)) error
	PBError(err error) *pb.Error
	RelocateReplica(ctx context.Context, req *pb.RelocateReplicaRequest) (*pb.RelocateReplicaResponse, error)
	TransferLeader(ctx context.Context, req *pb.TransferLeaderRequest) (*pb.TransferLeaderResponse, error)
	Split(ctx context.Context, req *pb.SplitRequest) (*pb.SplitResponse, error)
	Merge(ctx context.Context, req *pb.MergeRequest) (*pb.MergeResponse, error)
}

// Deps are the node's parts the host uses.
type Deps struct {
	Ranges Ranges
	Dir    *directory.Directory
	// Store returns the node's replica store (nil before the node started).
	Store func() *replica.Store
	// LiveWindow is how recently a node must have been heard from to count as live.
	LiveWindow func() time.Duration
	// Hints is the node's read hints (nil when off here): transfers then do not wait for warmth.
	Hints *readhints.Service
	// Conn returns the pooled connection to a peer; ClusterID the cluster's id.
	Conn      func(nodeID uint64) (*grpc.ClientConn, error)
	ClusterID func() string
	Logger    *slog.Logger
}

// OperatorKey labels an autopilot operator count.
type OperatorKey struct{ Policy, Kind, Outcome string }

// Host runs the autopilot while this node leads the meta range.
type Host struct {
	cfg  autopilot.Config
	deps Deps
	log  *slog.Logger

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

// New returns a host; Watch starts the autopilot here once this node leads the meta range.
func New(cfg autopilot.Config, deps Deps) *Host {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	return &Host{cfg: cfg, deps: deps, log: deps.Logger}
}

// Record notes a request for key on rangeID for load-based splitting (leaders only report it).
func (h *Host) Record(rangeID uint64, key []byte) {
	s, ok := h.samplers.Load(rangeID)
	if !ok {
		s, _ = h.samplers.LoadOrStore(rangeID, model.NewKeySampler(0, rangeID))
	}
	s.(*model.KeySampler).Record(key)
}

// TakeSample ends the sampling window of rangeID (nil: no request seen).
func (h *Host) TakeSample(rangeID uint64, now time.Time) *model.KeySample {
	s, ok := h.samplers.Load(rangeID)
	if !ok {
		return nil
	}
	return s.(*model.KeySampler).Take(now)
}

// Watch starts or stops the autopilot as this node gains or loses the meta leadership, and applies
// policy switches stored in the meta range. The node calls it every second.
func (h *Host) Watch(ctx context.Context) {
	st := h.deps.Store()
	if st == nil {
		return
	}
	r := st.Replica(replica.MetaRangeID)
	leads := r != nil && r.IsLeader()
	ap := h.running()
	switch {
	case leads && ap == nil:
		cfg := h.cfg
		cfg.OnDecision = h.countDecision
		ap = autopilot.New(h, h, cfg)
		h.applySwitches(ctx, ap)
		h.loadDecisions(ctx, ap)
		ap.Start()
		h.mu.Lock()
		h.ap = ap
		h.mu.Unlock()
		h.log.Info("autopilot started on this node (it leads the meta range)")
	case !leads && ap != nil:
		ap.Stop()
		h.mu.Lock()
		h.ap = nil
		h.mu.Unlock()
		h.log.Info("autopilot stopped on this node (meta leadership moved)")
	case leads:
		h.applySwitches(ctx, ap)
		h.saveDecisions(ctx, ap)
	}
}

// Stop stops the autopilot if it runs here.
func (h *Host) Stop() {
	h.mu.Lock()
	ap := h.ap
	h.ap = nil
	h.mu.Unlock()
	if ap != nil {
		ap.Stop()
	}
}

func (h *Host) running() *autopilot.Autopilot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ap
}

// Poke asks the autopilot running here, if any, for a reactive round (see autopilot.Poke).
func (h *Host) Poke() {
	if ap := h.running(); ap != nil {
		ap.Poke()
	}
}

func (h *Host) countDecision(e decisions.Entry) {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	if h.opCounts == nil {
		h.opCounts = map[OperatorKey]uint64{}
	}
	h.opCounts[OperatorKey{Policy: e.Policy, Kind: e.Kind, Outcome: decisions.Outcome(e.Status)}]++
}

// OperatorCounts counts the decisions that finished while this node ran the autopilot, by policy,
// operator kind and outcome (cumulative over the node's life).
func (h *Host) OperatorCounts() map[OperatorKey]uint64 {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	out := make(map[OperatorKey]uint64, len(h.opCounts))
	for k, v := range h.opCounts {
		out[k] = v
	}
	return out
}

// applySwitches sets each policy as the meta range says, or to the registry's default.
func (h *Host) applySwitches(ctx context.Context, ap *autopilot.Autopilot) {
	stored, err := records.Switches(ctx, h.deps.Ranges)
	if err != nil {
		return // keep the switches as they are: the defaults would undo an operator's settings until the next read
	}
	for _, st := range ap.Policies().List() {
		on := policy.DefaultOn(st.Name)
		if v, ok := stored[st.Name]; ok {
			on = v
		}
		if st.On != on {
			_ = ap.SetPolicy(st.Name, on)
		}
	}
}

// Snapshot implements model.Source from heartbeats and the meta range.
func (h *Host) Snapshot() *model.Cluster {
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	descs, err := h.deps.Ranges.AllRanges(ctx)
	if err != nil {
		return model.NewCluster(now, nil, nil) // an empty model proposes nothing
	}
	if md := h.deps.Ranges.MetaDesc(); md != nil {
		descs = append(descs, md)
	}
	// Without the nodes' admin states and join records the model would show a decommissioning node
	// as active, or a joining one as idle, and rebalance would move replicas against them: no round.
	states, joins, err := records.NodeRecords(ctx, h.deps.Ranges)
	if err != nil {
		return model.NewCluster(now, nil, nil)
	}
	loads := map[uint64]*pb.RangeLoad{}
	replicaReads := map[uint64]float64{} // reads served by replicas that do not lead
	var nodes []*model.Node
	for _, nd := range h.deps.Dir.All() {
		st, draining := h.deps.Dir.StatsOf(nd.NodeId)
		last := h.deps.Dir.LastHeard(nd.NodeId)
		mn := &model.Node{ID: nd.NodeId, Addr: nd.Addr, Locality: nd.Locality, Live: now.Sub(last) <= h.deps.LiveWindow(), LastHeartbeat: last,
			Draining: draining || states[nd.NodeId] == pb.NodeAdminState_NODE_DRAINING}
		switch states[nd.NodeId] {
		case pb.NodeAdminState_NODE_DECOMMISSIONING:
			mn.Decommissioning = true
		case records.Decommissioned:
			mn.Decommissioned = true
		}
		if st != nil {
			mn.CPUPercent, mn.CPUCores, mn.DiskBusy = st.CpuPercent, st.CpuCores, st.DiskBusy
			mn.DiskUsed, mn.Profile = st.DiskBytes, st.Profile
			mn.BlockCacheHits, mn.BlockCacheMisses = st.BlockCacheHits, st.BlockCacheMisses
			mn.CacheBytes, mn.BlockBytes, mn.IndexFilterBytes = st.BlockCacheCapacity, uint64(st.BlockBytes), st.IndexFilterBytes
			mn.CompactionsRunning, mn.L0Files, mn.MemtableBytes = st.CompactionsRunning, st.L0Files, st.MemtableBytes
			fillModelTasks(mn, st)
			for _, rl := range st.Ranges {
				mn.ReadQPS += rl.ReadQps // every replica's reads: where the node's read load comes from
				// Two nodes may both claim a range for a heartbeat after a transfer: the later term's
				// report is the current one.
				if rl.Leader && (loads[rl.RangeId] == nil || rl.Term > loads[rl.RangeId].Term) {
					loads[rl.RangeId] = rl
				} else if !rl.Leader {
					replicaReads[rl.RangeId] += rl.ReadQps
				}
			}
		}
		mn.Join = joins[nd.NodeId]
		nodes = append(nodes, mn)
	}
	ranges := make([]*model.Range, 0, len(descs))
	for _, d := range descs {
		mr := &model.Range{ID: d.RangeId, StartKey: d.StartKey, EndKey: d.EndKey, Generation: d.Generation,
			System: d.RangeId == replica.MetaRangeID, Fenced: len(d.Fences) > 0, Leader: h.deps.Ranges.LeaderNodeOf(d.RangeId)}
		for _, rd := range d.Replicas {
			mr.Replicas = append(mr.Replicas, model.Replica{Node: rd.NodeId, Learner: rd.Learner})
		}
		mr.ReplicaReadQPS = replicaReads[d.RangeId]
		if rl := loads[d.RangeId]; rl != nil {
			mr.ReadQPS, mr.WriteQPS, mr.ScanQPS, mr.Bytes = rl.ReadQps, rl.WriteQps, rl.ScanQps, rl.Bytes
			if len(rl.SampleKeys) > 0 && len(rl.SampleKeys) == len(rl.SampleCounts) {
				ks := &model.KeySample{At: time.Unix(0, rl.SampleAtUnixNanos), Requests: rl.SampleRequests}
				for i, k := range rl.SampleKeys {
					ks.Keys = append(ks.Keys, model.KeyCount{Key: k, Count: rl.SampleCounts[i]})
				}
				mr.Sample = ks
			}
			mr.Latency = latencyOf(rl)
			mr.Access = accessOf(rl)
			mr.StreamQPS, mr.StreamSample = rl.StreamEventsQps, streamSampleOf(rl)
		}
		ranges = append(ranges, mr)
	}
	c := model.NewCluster(now, nodes, ranges)
	// Without them lease_preference proposes nothing and rebalance balances as if none were set.
	c.LeadZones, _ = records.LeadZones(ctx, h.deps.Ranges)
	return c
}

// streamSampleOf is the sample of a leader's stream event keys (nil: none, or malformed).
func streamSampleOf(rl *pb.RangeLoad) *model.KeySample {
	if len(rl.StreamSampleKeys) == 0 || len(rl.StreamSampleKeys) != len(rl.StreamSampleCounts) {
		return nil
	}
	ks := &model.KeySample{At: time.Unix(0, rl.StreamSampleAtUnixNanos)}
	for i, k := range rl.StreamSampleKeys {
		ks.Keys = append(ks.Keys, model.KeyCount{Key: k, Count: rl.StreamSampleCounts[i]})
		ks.Requests += uint64(rl.StreamSampleCounts[i])
	}
	return ks
}

// latencyOf is the latency histogram of a leader's range load (nil: none, or malformed).
func latencyOf(rl *pb.RangeLoad) *model.LatencyHistogram {
	if len(rl.LatencyBuckets) == 0 || len(rl.LatencyBuckets) != len(rl.LatencyCounts) {
		return nil
	}
	return &model.LatencyHistogram{At: time.Unix(0, rl.LatencyAtUnixNanos), Buckets: rl.LatencyBuckets, Counts: rl.LatencyCounts}
}

// fillModelTasks copies a node's background-work report into the autopilot's model.
func fillModelTasks(mn *model.Node, st *pb.NodeStats) {
	mn.CompactionDebt = st.CompactionDebtBytes
	mn.LedBefore = st.LedBefore
	for _, t := range st.Tasks {
		mn.Tasks = append(mn.Tasks, model.Task{ID: t.Id, Kind: t.Kind, Name: t.Name, Running: t.Running, Heavy: t.Heavy,
			Bytes: t.Bytes, Since: time.Unix(0, t.SinceUnixNanos)})
	}
	if len(st.LastCompleted) > 0 {
		mn.LastCompleted = make(map[string]time.Time, len(st.LastCompleted))
		for _, c := range st.LastCompleted {
			mn.LastCompleted[c.Kind] = time.Unix(0, c.AtUnixNanos)
		}
	}
}
