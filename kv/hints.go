package kv

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/replica"
)

// Read hints (package hints, docs/design/read-hints.md) on a node: the leader of a range records every
// read it serves, ships the descriptions to the range's other replicas, and they replay them so their
// block caches follow the leader's. This file wires the node's hints.Module: capture in Get and Scan,
// peers and spans from the local replicas' descriptors, shipping over the node's pooled peer
// connections, the cluster-wide switch (the autopilot policy read_hints), warm after restart and for
// new replicas, and forgetting ranges that left the node. Warm before transfer is in autopilot.go.

// NameReadHintsPolicy is the autopilot policy whose switch turns read hints on and off cluster-wide
// (autopilot/policy/read_hints.go): off, no node captures reads and the autopilot transfers
// leaderships without asking the target for its warmth.
const NameReadHintsPolicy = "read_hints"

// Defaults of HintsConfig.
const (
	// DefaultRestartWarm bounds how long a restarting node warms its replicas from their peers'
	// hot-key summaries before it starts raft (and so before any of its replicas can campaign).
	DefaultRestartWarm = 2 * time.Second
	// DefaultHintsSwitchInterval is how often a node reads the read_hints switch from the meta range
	// (HintsConfig.SwitchInterval).
	DefaultHintsSwitchInterval = 2 * time.Second
	// minHintsSwitchInterval: each read of the switch is a meta-range read on every node.
	minHintsSwitchInterval = 10 * time.Millisecond
	// minReadQPSForWarmth: below this read rate a range gets too few hints for its warmth to be
	// measured, so a transfer does not wait for it.
	minReadQPSForWarmth = 1.0
)

// DefaultReplayEvery is how often a receiver replays the same recurring read at most
// (hints.ApplierConfig.ReplayEvery), unless HintsConfig.ReplayAll or Tuning says otherwise.
const DefaultReplayEvery = time.Second

// HintsConfig configures read hints on a node. The zero value is on: hints to every other replica,
// all applied, the applied fraction adapted to the node's CPU load and, while it leads ranges, its
// disk's (hintLoad).
type HintsConfig struct {
	// Off builds no hints module: this node records no reads, refuses hints (the service answers
	// Unimplemented) and, when it runs the autopilot, transfers leaderships without a warmth check.
	Off bool
	// Target: ship each range's hints to every other replica (default) or only to the first voter.
	Target hints.Target
	// Fraction of received hints replayed (default 1). Lower values apply a hash-selected subset.
	Fraction float64
	// FixedFraction turns the load-adaptive behaviour off: Fraction is applied whatever the CPU load,
	// and every read served is captured. By default the fraction falls from Fraction at 70 % CPU to
	// 10 % at 90 %, where applying stops, and a leader at 90 % CPU or more records only half of its
	// reads (hints.BufferConfig.Load) until its load falls below 80 %.
	FixedFraction bool
	// ReplayAll replays every hint, as the journal does. By default a read seen only once (not
	// repeated within its batch nor within 2 s) is skipped: those are the long tail of the workload,
	// which misses on the leader too and stays in no cache (hints.ApplierConfig.RecurringOnly); the
	// leader does not even ship them (hints.BufferConfig.RecurringOnly); and a recurring read is
	// replayed at most once per DefaultReplayEvery (hints.ApplierConfig.ReplayEvery).
	ReplayAll bool
	// DiskWeight is what a saturated disk counts for in the load the applied fraction adapts to, on a
	// node that leads a range (default DefaultHintsDiskWeight; negative: the disk is not counted).
	DiskWeight float64
	// DiskReadShare is the most of the engine's block-cache misses that replays may cause while the
	// node leads a user range and its disk is saturated (hints.DiskBudget; default
	// DefaultHintsDiskReadShare; negative: no budget).
	DiskReadShare float64
	// TransferWait bounds how long an autopilot leadership transfer waits for the target to be warm
	// (default hints.DefaultTransferWait; negative: do not check).
	TransferWait time.Duration
	// RestartWarm bounds the warm-up from peers' hot keys when a node restarts (default
	// DefaultRestartWarm; negative: none). It delays the start of the node's raft groups by at most
	// that long.
	RestartWarm time.Duration
	// SwitchInterval is how often the node reads the cluster-wide read_hints switch (default
	// DefaultHintsSwitchInterval): a switch takes effect on a node within that long. Each read is one
	// meta-range read; benchmarks that toggle hints every few seconds shorten it.
	SwitchInterval time.Duration
	// Tuning sets the module's buffer, shipper, applier and hot-key parameters (zero: the hints
	// package's defaults). NodeID, ClusterID, Peers, Target, the applied fraction and the load signal
	// come from the node and the fields above.
	Tuning hints.Config
}

func (c *HintsConfig) setDefaults() {
	if c.Fraction <= 0 {
		c.Fraction = 1
	}
	if c.DiskWeight == 0 {
		c.DiskWeight = DefaultHintsDiskWeight
	}
	if c.DiskReadShare == 0 {
		c.DiskReadShare = DefaultHintsDiskReadShare
	}
	if c.TransferWait == 0 {
		c.TransferWait = hints.DefaultTransferWait
	}
	if c.RestartWarm == 0 {
		c.RestartWarm = DefaultRestartWarm
	}
	if c.SwitchInterval == 0 {
		c.SwitchInterval = DefaultHintsSwitchInterval
	}
}

// Validate reports a configuration that cannot work.
func (c HintsConfig) Validate() error {
	if c.Off {
		return nil
	}
	if c.Fraction > 1 {
		return fmt.Errorf("read hints: fraction %v must be in (0, 1]", c.Fraction)
	}
	if c.DiskWeight > 1 {
		return fmt.Errorf("read hints: disk weight %v must be in (0, 1], or negative to ignore the disk", c.DiskWeight)
	}
	if c.DiskReadShare > 1 {
		return fmt.Errorf("read hints: disk read share %v must be in (0, 1], or negative for no budget", c.DiskReadShare)
	}
	if c.SwitchInterval < 0 || (c.SwitchInterval > 0 && c.SwitchInterval < minHintsSwitchInterval) {
		return fmt.Errorf("read hints: switch interval %v must be at least %v (0: the default)", c.SwitchInterval, minHintsSwitchInterval)
	}
	mc := c.moduleConfig(0, "", func(uint64) []uint64 { return nil }, nil)
	return mc.Validate()
}

func (c HintsConfig) moduleConfig(nodeID uint64, clusterID string, peers hints.PeersFunc, load hints.LoadFunc) hints.Config {
	mc := c.Tuning
	mc.NodeID, mc.ClusterID, mc.Peers, mc.Target = nodeID, clusterID, peers, c.Target
	mc.Applier.Fraction = c.Fraction
	if mc.Applier.Fraction <= 0 {
		mc.Applier.Fraction = 1
	}
	mc.Applier.Adaptive = !c.FixedFraction
	mc.Applier.RecurringOnly = !c.ReplayAll
	if mc.Applier.ReplayEvery == 0 && !c.ReplayAll {
		// A hot read arrives in nearly every batch; once a second keeps its blocks warm.
		mc.Applier.ReplayEvery = DefaultReplayEvery
	}
	mc.Applier.Load = load
	// The sender withholds the one-off reads its peers' recurring-only replay would drop, and a
	// saturated sender (adaptive mode) records only a sample of its reads.
	mc.Buffer.RecurringOnly = !c.ReplayAll
	if !c.FixedFraction {
		mc.Buffer.Load = load
	}
	return mc
}

// nodeHints is the node's read-hints state.
type nodeHints struct {
	m *hints.Module
	// on is the cluster-wide switch (the read_hints policy), as last read from the meta range.
	on atomic.Bool
	// spans caches the local replicas' spans for replays (refreshed every spanTTL).
	spans sync.Map // range id → *hintSpan
	cpu   *hints.CPULoad

	mu    sync.Mutex
	known map[uint64]bool // ranges with a local replica at the last reconciliation
}

type hintSpan struct {
	start, end []byte
	meta, ok   bool
	at         time.Time
}

const spanTTL = 500 * time.Millisecond

// initHints builds the node's hints module (nil when off). The node's identity may still be unknown
// (a new node learns it when it joins): Start sets it.
func (n *Node) initHints() error {
	if n.cfg.Hints.Off {
		return nil
	}
	h := &nodeHints{known: map[uint64]bool{}}
	h.on.Store(true)
	h.cpu = hints.NewCPULoad()
	load := hintLoad(h.cpu.Load, n.eng.DiskUtilization, n.leadsUserRange, n.cfg.Hints.DiskWeight)
	cfg := n.cfg.Hints.moduleConfig(n.ident.NodeID, n.ident.ClusterID, n.hintPeers, load)
	if n.cfg.Hints.DiskReadShare > 0 && !n.cfg.Hints.FixedFraction {
		cfg.Applier.DiskBudget.Share = n.cfg.Hints.DiskReadShare
		cfg.Applier.DiskBudget.Saturated = diskSaturated(n.eng.DiskUtilization, n.leadsUserRange)
		cfg.Applier.DiskBudget.Misses = func() uint64 { return uint64(max(n.eng.Stats().BlockCacheMisses, 0)) }
	}
	m, err := hints.New(cfg, hints.NewStreamSender(n.hintConn), hints.NewEngineReader(n.eng, n.hintSpan))
	if err != nil {
		return fmt.Errorf("read hints: %w", err)
	}
	h.m = m
	n.hints = h
	// A warm-up put off because the node was busy runs when a leadership is about to move here.
	m.SetWarmUp(func(ctx context.Context, rangeID uint64) {
		n.logWarmUp("warmed a replica whose warm-up was put off", rangeID, n.warmRange(ctx, rangeID))
	})
	return nil
}

// Hints is the node's read-hints module, nil when read hints are off on this node (HintsConfig.Off).
func (n *Node) Hints() *hints.Module {
	if n.hints == nil {
		return nil
	}
	return n.hints.m
}

// HintsOn reports whether this node captures reads now: its module exists and the cluster's
// read_hints switch is on.
func (n *Node) HintsOn() bool { return n.hints != nil && n.hints.on.Load() }

// recordRead captures a point read served by this node's leader replica of rangeID.
func (n *Node) recordRead(rangeID uint64, key []byte) {
	if n.HintsOn() {
		n.hints.m.Record(rangeID, key)
	}
}

// recordScan captures a scan served by this node's leader replica of rangeID.
func (n *Node) recordScan(rangeID uint64, start, end []byte, limit int, reverse bool) {
	if n.HintsOn() {
		n.hints.m.RecordScan(rangeID, start, end, limit, reverse)
	}
}

// localStore returns the replica store once the node has loaded it (nil before). Replays and the
// warm-up at restart may run before the node serves requests.
func (n *Node) localStore() *replica.Store { return n.storeRef.Load() }

// hintPeers lists the nodes of rangeID's other replicas: voters first (in descriptor order), then
// learners. With TargetOne the first voter gets the hints.
func (n *Node) hintPeers(rangeID uint64) []uint64 {
	st := n.localStore()
	if st == nil {
		return nil
	}
	r := st.Replica(rangeID)
	if r == nil {
		return nil
	}
	d := r.Desc()
	if d == nil {
		return nil
	}
	self := n.NodeID()
	out := make([]uint64, 0, len(d.Replicas))
	for _, learners := range []bool{false, true} {
		for _, rd := range d.Replicas {
			if rd.Learner == learners && rd.NodeId != self {
				out = append(out, rd.NodeId)
			}
		}
	}
	return out
}

// hintSpan implements hints.SpanFunc from the local replica's descriptor (cached for spanTTL: a
// replay with a span a split just shrank reads a key of the neighbouring range, which is harmless).
func (n *Node) hintSpan(rangeID uint64) (start, end []byte, meta, ok bool) {
	now := time.Now()
	if v, found := n.hints.spans.Load(rangeID); found {
		s := v.(*hintSpan)
		if now.Sub(s.at) < spanTTL {
			return s.start, s.end, s.meta, s.ok
		}
	}
	s := &hintSpan{at: now}
	if st := n.localStore(); st != nil {
		if r := st.Replica(rangeID); r != nil {
			if d := r.Desc(); d != nil {
				s.start, s.end, s.meta, s.ok = d.StartKey, d.EndKey, r.IsMeta(), true
			}
		}
	}
	n.hints.spans.Store(rangeID, s)
	return s.start, s.end, s.meta, s.ok
}

// hintConn is the node's pooled connection to a peer (the auth token and TLS options apply).
func (n *Node) hintConn(nodeID uint64) (grpc.ClientConnInterface, error) { return n.peerConn(nodeID) }

// startHints runs the module once the node has its identity and its store.
func (n *Node) startHints() {
	if n.hints == nil {
		return
	}
	n.hints.m.SetIdentity(n.ident.NodeID, n.ident.ClusterID)
	n.hints.m.Start()
	n.every(n.cfg.Hints.SwitchInterval, n.refreshHintsSwitch)
	n.every(time.Second, n.reconcileHintRanges)
}

func (n *Node) stopHints() {
	if n.hints != nil {
		n.hints.m.Close()
	}
}

// refreshHintsSwitch reads the read_hints policy switch from the meta range (no entry: on).
func (n *Node) refreshHintsSwitch(ctx context.Context) {
	key := metaPolicyKey(NameReadHintsPolicy)
	kvs, err := n.metaScan(ctx, key, append(key[:len(key):len(key)], 0), 1)
	if err != nil {
		return // keep the last known state
	}
	on := len(kvs) == 0 || string(kvs[0].Value) != "off"
	if n.hints.on.Swap(on) != on {
		n.log.Info("read hints switched", "on", on)
	}
}

// reconcileHintRanges forgets ranges whose replica left this node and warms replicas that appeared
// since the last round (learners that received a snapshot, split halves), each bounded by
// hints.MaxReplicaWarm and in the background: nothing waits for it.
//
// On a node already shedding replays for load, a new replica's warm-up is put off
// (hints.Module.DeferWarm): an incremental join's new node, once it served, replayed a cold hot-key
// summary for every replica it received, and its clients' reads queued behind those misses
// (docs/bench-join.md, session 10). A put-off warm-up runs when an autopilot leadership transfer asks
// for the replica's warmth (Module.WaitWarm), or here, one a round, once the node stops shedding; it
// is dropped when the replica leads. Transfers that do not ask (drain, admin transfer-leader) and
// elections find the replica as warm as live hints made it.
func (n *Node) reconcileHintRanges(ctx context.Context) {
	h := n.hints
	now := map[uint64]bool{}
	var added []*replica.Replica
	h.mu.Lock()
	for _, r := range n.store.Replicas() {
		now[r.RangeID()] = true
		if !h.known[r.RangeID()] {
			added = append(added, r)
		}
	}
	for id := range h.known {
		if !now[id] {
			h.m.Forget(id)
			h.spans.Delete(id)
		}
	}
	h.known = now
	h.mu.Unlock()
	for _, r := range added {
		if r.IsLeader() {
			continue // a leader's cache is the one the others follow
		}
		if h.m.Applier().Shedding(time.Now()) {
			h.m.DeferWarm(r.RangeID())
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, hints.MaxReplicaWarm)
		n.logWarmUp("warmed new replica from a peer's hot keys", r.RangeID(), n.warmRange(wctx, r.RangeID()))
		cancel()
	}
	for _, id := range h.m.Deferred() {
		if r := n.store.Replica(id); r == nil || r.IsLeader() {
			h.m.CancelDeferred(id) // it leads (its own reads warm it) or left
			continue
		}
		if h.m.Applier().Shedding(time.Now()) {
			break
		}
		if h.m.RunDeferred(ctx, id, hints.MaxReplicaWarm) {
			break // one a round: the warm-up's own replays may make the node shed again
		}
	}
}

func (n *Node) logWarmUp(msg string, rangeID uint64, res warmResult) {
	if res.hints > 0 {
		n.log.Debug(msg, "range", rangeID, "peer", res.peer, "hints", res.hints, "hit_ratio", res.stats.HitRatio())
	}
}

// onReplicaRemoved drops what the hints module knows of a range whose replica left this node.
func (n *Node) hintsForget(rangeID uint64) {
	if n.hints != nil {
		n.hints.m.Forget(rangeID)
		n.hints.spans.Delete(rangeID)
	}
}

type warmResult struct {
	peer  uint64
	hints int
	stats hints.ReplayStats
}

// warmRange asks rangeID's peers, in order, for their hot-key summary and replays the first
// non-empty one here.
func (n *Node) warmRange(ctx context.Context, rangeID uint64) warmResult {
	for _, peer := range n.hintPeers(rangeID) {
		if ctx.Err() != nil {
			break
		}
		cc, err := n.peerConn(peer)
		if err != nil {
			continue
		}
		c := hints.NewClient(cc, n.ident.ClusterID)
		cnt, st, err := n.hints.m.WarmFromPeer(ctx, c, rangeID, 0)
		if err == nil && cnt > 0 {
			return warmResult{peer: peer, hints: cnt, stats: st}
		}
	}
	return warmResult{}
}

// warmAfterRestart runs before the store starts (so before any local replica can campaign or take a
// transferred leadership): every replica with peers asks them for their hot keys and replays them,
// a few ranges at a time, for at most HintsConfig.RestartWarm in all. Best effort: unreachable peers,
// empty summaries and the deadline only make the node start colder.
func (n *Node) warmAfterRestart(ctx context.Context) {
	if n.hints == nil || n.cfg.Hints.RestartWarm < 0 {
		return
	}
	var ids []uint64
	for _, r := range n.store.Replicas() {
		if len(n.hintPeers(r.RangeID())) > 0 {
			ids = append(ids, r.RangeID())
		}
	}
	h := n.hints
	h.mu.Lock()
	for _, r := range n.store.Replicas() {
		h.known[r.RangeID()] = true
	}
	h.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, n.cfg.Hints.RestartWarm)
	defer cancel()
	var (
		mu     sync.Mutex
		warmed int
		total  int
		stats  hints.ReplayStats
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	for w := 0; w < min(4, len(ids)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for wctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(ids) {
					return
				}
				// Each range gets at most a share of what is left, so one slow peer does not use it all.
				rctx, rcancel := context.WithTimeout(wctx, max(n.cfg.Hints.RestartWarm/4, 250*time.Millisecond))
				res := n.warmRange(rctx, ids[i])
				rcancel()
				mu.Lock()
				if res.hints > 0 {
					warmed++
					total += res.hints
					stats = stats.Add(res.stats)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	ratio := stats.HitRatio()
	if math.IsNaN(ratio) {
		ratio = 0
	}
	n.log.Info("warmed replicas from peers' hot keys before starting raft", "ranges", len(ids), "warmed", warmed,
		"hints", total, "cache_hit_ratio", fmt.Sprintf("%.2f", ratio), "took", time.Since(start).Round(time.Millisecond),
		"bound", n.cfg.Hints.RestartWarm)
}
