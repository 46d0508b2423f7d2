// Package readhints wires read hints (package hints) into a node: the leader of a range records every
// read it serves, ships the descriptions to the range's other replicas, and they replay them so their
// block caches follow the leader's. It owns the node's hints.Module: capture (kv's Observer calls Read
// and Scan), peers and spans from the local replicas' descriptors, shipping over the node's pooled peer
// connections, the cluster-wide switch (the autopilot policy read_hints), warming after a restart and
// for new replicas, and forgetting ranges that left the node. The autopilot's warm-before-transfer
// check reads it too (package autopilothost).
//
// It never proposes anything to a range and never moves a leadership: it only reads and replays.
package readhints

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/shoaldb/shoal/autopilot/policy"
	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/hints/cpuload"
	"github.com/shoaldb/shoal/hints/enginereader"
	"github.com/shoaldb/shoal/node/records"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
)

// Defaults of Config.
const (
	// DefaultRestartWarm bounds how long a restarting node warms its replicas from their peers'
	// hot-key summaries before it starts raft (and so before any of its replicas can campaign).
	DefaultRestartWarm = 2 * time.Second
	// DefaultSwitchInterval is how often a node reads the read_hints switch from the meta range
	// (Config.SwitchInterval).
	DefaultSwitchInterval = 2 * time.Second
	// minSwitchInterval: each read of the switch is a meta-range read on every node.
	minSwitchInterval = 10 * time.Millisecond
	// minReadQPSForWarmth: below this read rate a range gets too few hints for its warmth to be
	// measured, so a transfer does not wait for it.
	minReadQPSForWarmth = 1.0
)

// DefaultReplayEvery is how often a receiver replays the same recurring read at most
// (hints.ApplierConfig.ReplayEvery), unless Config.ReplayAll or Tuning says otherwise.
const DefaultReplayEvery = time.Second

// Config configures read hints on a node. The zero value is on: hints to every other replica,
// all applied, the applied fraction adapted to the node's CPU load and, while it leads ranges, its
// disk's (hintLoad).
type Config struct {
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
	// node that leads a range (default DefaultDiskWeight; negative: the disk is not counted).
	DiskWeight float64
	// DiskReadShare is the most of the engine's block-cache misses that replays may cause while the
	// node leads a user range and its disk is saturated (hints.DiskBudget; default
	// DefaultDiskReadShare; negative: no budget).
	DiskReadShare float64
	// TransferWait bounds how long an autopilot leadership transfer waits for the target to be warm
	// (default hints.DefaultTransferWait; negative: do not check).
	TransferWait time.Duration
	// RestartWarm bounds the warm-up from peers' hot keys when a node restarts (default
	// DefaultRestartWarm; negative: none). It delays the start of the node's raft groups by at most
	// that long.
	RestartWarm time.Duration
	// SwitchInterval is how often the node reads the cluster-wide read_hints switch (default
	// DefaultSwitchInterval): a switch takes effect on a node within that long. Each read is one
	// meta-range read; benchmarks that toggle hints every few seconds shorten it.
	SwitchInterval time.Duration
	// Tuning sets the module's buffer, shipper, applier and hot-key parameters (zero: the hints
	// package's defaults). NodeID, ClusterID, Peers, Target, the applied fraction and the load signal
	// come from the node and the fields above.
	Tuning hints.Config
}

// WithDefaults returns c with every zero field, the module's tuning too, set to its default.
func (c Config) WithDefaults() Config {
	c.Tuning = c.Tuning.WithDefaults()
	if c.Fraction <= 0 {
		c.Fraction = 1
	}
	if c.DiskWeight == 0 {
		c.DiskWeight = DefaultDiskWeight
	}
	if c.DiskReadShare == 0 {
		c.DiskReadShare = DefaultDiskReadShare
	}
	if c.TransferWait == 0 {
		c.TransferWait = hints.DefaultTransferWait
	}
	if c.RestartWarm == 0 {
		c.RestartWarm = DefaultRestartWarm
	}
	if c.SwitchInterval == 0 {
		c.SwitchInterval = DefaultSwitchInterval
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
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
	if c.SwitchInterval < 0 || (c.SwitchInterval > 0 && c.SwitchInterval < minSwitchInterval) {
		return fmt.Errorf("read hints: switch interval %v must be at least %v (0: the default)", c.SwitchInterval, minSwitchInterval)
	}
	mc := c.moduleConfig(0, "", func(uint64) []uint64 { return nil }, nil)
	return mc.Validate()
}

func (c Config) moduleConfig(nodeID uint64, clusterID string, peers hints.PeersFunc, load hints.LoadFunc) hints.Config {
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

// Deps are the node's parts read hints use.
type Deps struct {
	Engine *storage.Engine
	// Store returns the node's replica store, nil until the node loaded it: replays and the warm-up
	// after a restart may run before the node serves requests.
	Store func() *replica.Store
	// Conn returns the pooled connection to a peer (the cluster's credentials apply).
	Conn func(nodeID uint64) (*grpc.ClientConn, error)
	// Meta reads the cluster-wide switch.
	Meta records.MetaStore
	// Region is a node's region (its locality's first tier value; "" unknown), for the region-one
	// target. Nil: every node in one region.
	Region func(nodeID uint64) string
	Logger *slog.Logger
}

// Service is a node's read hints. A nil *Service (read hints off on this node) records nothing and
// its methods do nothing.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	m    *hints.Module
	cpu  *cpuload.Meter
	// on is the cluster-wide switch (the read_hints policy), as last read from the meta range.
	on atomic.Bool
	// spans caches the local replicas' spans for replays (refreshed every spanTTL).
	spans sync.Map // range id → *hintSpan

	mu    sync.Mutex
	known map[uint64]bool // ranges with a local replica at the last reconciliation

	nodeID    atomic.Uint64
	clusterID atomic.Pointer[string]

	loops *stopper.Stopper // the switch refresh and the reconciliation
}

type hintSpan struct {
	start, end []byte
	meta, ok   bool
	at         time.Time
}

const spanTTL = 500 * time.Millisecond

// New builds the node's read hints; nil when cfg.Off. The node's identity may still be unknown (a new
// node learns it when it joins): Start sets it.
func New(cfg Config, deps Deps) (*Service, error) {
	if cfg.Off {
		return nil, nil
	}
	cfg = cfg.WithDefaults()
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	s := &Service{cfg: cfg, deps: deps, log: deps.Logger, known: map[uint64]bool{}, loops: stopper.New()}
	s.on.Store(true)
	empty := ""
	s.clusterID.Store(&empty)
	s.cpu = cpuload.New()
	eng := deps.Engine
	load := hintLoad(s.cpu.Load, eng.DiskUtilization, s.leadsUserRange, cfg.DiskWeight)
	mc := cfg.moduleConfig(0, "", s.peers, load)
	if cfg.DiskReadShare > 0 && !cfg.FixedFraction {
		mc.Applier.DiskBudget.Share = cfg.DiskReadShare
		mc.Applier.DiskBudget.Saturated = diskSaturated(eng.DiskUtilization, s.leadsUserRange)
		mc.Applier.DiskBudget.Misses = func() uint64 { return uint64(max(eng.Stats().BlockCacheMisses, 0)) }
	}
	conn := func(nodeID uint64) (grpc.ClientConnInterface, error) { return deps.Conn(nodeID) }
	m, err := hints.New(mc, hints.NewStreamSender(conn), enginereader.New(eng, s.span))
	if err != nil {
		return nil, fmt.Errorf("read hints: %w", err)
	}
	s.m = m
	// A warm-up put off because the node was busy runs when a leadership is about to move here.
	m.SetWarmUp(func(ctx context.Context, rangeID uint64) {
		s.logWarmUp("warmed a replica whose warm-up was put off", rangeID, s.warmRange(ctx, rangeID))
	})
	return s, nil
}

// Module is the node's hints module (nil when read hints are off on this node).
func (s *Service) Module() *hints.Module {
	if s == nil {
		return nil
	}
	return s.m
}

// Config is the effective configuration.
func (s *Service) Config() Config {
	if s == nil {
		return Config{Off: true}
	}
	return s.cfg
}

// On reports whether this node captures reads now: read hints are on here and the cluster's
// read_hints switch is on.
func (s *Service) On() bool { return s != nil && s.on.Load() }

// Read captures a point read served by this node's leader replica of rangeID.
func (s *Service) Read(rangeID uint64, key []byte) {
	if s.On() {
		s.m.Record(rangeID, key)
	}
}

// Scan captures a scan served by this node's leader replica of rangeID.
func (s *Service) Scan(rangeID uint64, start, end []byte, limit int, reverse bool) {
	if s.On() {
		s.m.RecordScan(rangeID, start, end, limit, reverse)
	}
}

// Register adds the hints service to a gRPC server (nothing when off: peers get Unimplemented).
func (s *Service) Register(srv grpc.ServiceRegistrar) {
	if s != nil {
		pb.RegisterHintsServer(srv, s.m.Service())
	}
}

func (s *Service) store() *replica.Store {
	if s.deps.Store == nil {
		return nil
	}
	return s.deps.Store()
}

// leadsUserRange reports whether this node leads a user range (serves client reads from its disk).
func (s *Service) leadsUserRange() bool {
	st := s.store()
	if st == nil {
		return false
	}
	for _, r := range st.Replicas() {
		if r.RangeID() != replica.MetaRangeID && r.IsLeader() {
			return true
		}
	}
	return false
}

// peers lists the nodes of rangeID's other replicas: voters first (in descriptor order), then
// learners. With TargetOne the first voter gets the hints.
func (s *Service) peers(rangeID uint64) []uint64 {
	st := s.store()
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
	self := s.nodeID.Load()
	out := make([]uint64, 0, len(d.Replicas))
	for _, learners := range []bool{false, true} {
		for _, rd := range d.Replicas {
			if rd.Learner == learners && rd.NodeId != self {
				out = append(out, rd.NodeId)
			}
		}
	}
	if s.cfg.Target == hints.TargetRegionOne {
		region := func(uint64) string { return "" }
		if s.deps.Region != nil {
			region = s.deps.Region
		}
		return regionOne(out, region, region(self))
	}
	return out
}

// regionOne keeps, of peers (in preference order), the first in each region other than own, or
// the first peer when every peer is in own region (one warm successor there).
func regionOne(peers []uint64, region func(uint64) string, own string) []uint64 {
	var out []uint64
	seen := map[string]bool{own: true}
	for _, p := range peers {
		if r := region(p); !seen[r] {
			seen[r] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 && len(peers) > 0 {
		out = peers[:1]
	}
	return out
}

// span implements hints.SpanFunc from the local replica's descriptor (cached for spanTTL: a replay
// with a span a split just shrank reads a key of the neighbouring range, which is harmless).
func (s *Service) span(rangeID uint64) (start, end []byte, meta, ok bool) {
	now := time.Now()
	if v, found := s.spans.Load(rangeID); found {
		sp := v.(*hintSpan)
		if now.Sub(sp.at) < spanTTL {
			return sp.start, sp.end, sp.meta, sp.ok
		}
	}
	sp := &hintSpan{at: now}
	if st := s.store(); st != nil {
		if r := st.Replica(rangeID); r != nil {
			if d := r.Desc(); d != nil {
				sp.start, sp.end, sp.meta, sp.ok = d.StartKey, d.EndKey, r.IsMeta(), true
			}
		}
	}
	s.spans.Store(rangeID, sp)
	return sp.start, sp.end, sp.meta, sp.ok
}

// Start runs the module once the node has its identity and its store, with the loops that read the
// cluster-wide switch and reconcile the local replicas; Stop ends them.
func (s *Service) Start(nodeID uint64, clusterID string) {
	if s == nil {
		return
	}
	s.nodeID.Store(nodeID)
	s.clusterID.Store(&clusterID)
	s.m.SetIdentity(nodeID, clusterID)
	s.m.Start()
	s.loops.Every(s.cfg.SwitchInterval, s.refreshSwitch)
	s.loops.Every(time.Second, s.reconcile)
}

// Stop ends the loops and closes the module.
func (s *Service) Stop() {
	if s == nil {
		return
	}
	s.loops.Stop()
	s.m.Close()
}

// refreshSwitch reads the read_hints policy switch from the meta range.
func (s *Service) refreshSwitch(ctx context.Context) {
	on, err := records.SwitchOn(ctx, s.deps.Meta, policy.NameReadHints)
	if err != nil {
		return // keep the last known state
	}
	if s.on.Swap(on) != on {
		s.log.Info("read hints switched", "on", on)
	}
}

// reconcile forgets ranges whose replica left this node and warms replicas that appeared since the
// last round (learners that received a snapshot, split halves), each bounded by hints.MaxReplicaWarm
// and in the background: nothing waits for it.
//
// On a node already shedding replays for load, a new replica's warm-up is put off
// (hints.Module.DeferWarm): an incremental join's new node, once it served, replayed a cold hot-key
// summary for every replica it received, and its clients' reads queued behind those misses. A put-off
// warm-up runs when an autopilot leadership transfer asks for the replica's warmth (Module.WaitWarm),
// or here, one a round, once the node stops shedding; it is dropped when the replica leads. Transfers
// that do not ask (drain, admin transfer-leader) and elections find the replica as warm as live hints
// made it.
func (s *Service) reconcile(ctx context.Context) {
	st := s.store()
	if st == nil {
		return
	}
	now := map[uint64]bool{}
	var added []*replica.Replica
	s.mu.Lock()
	for _, r := range st.Replicas() {
		now[r.RangeID()] = true
		if !s.known[r.RangeID()] {
			added = append(added, r)
		}
	}
	for id := range s.known {
		if !now[id] {
			s.m.Forget(id)
			s.spans.Delete(id)
		}
	}
	s.known = now
	s.mu.Unlock()
	for _, r := range added {
		if r.IsLeader() {
			continue // a leader's cache is the one the others follow
		}
		if s.m.Applier().Shedding(time.Now()) {
			s.m.DeferWarm(r.RangeID())
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, hints.MaxReplicaWarm)
		s.logWarmUp("warmed new replica from a peer's hot keys", r.RangeID(), s.warmRange(wctx, r.RangeID()))
		cancel()
	}
	for _, id := range s.m.Deferred() {
		if r := st.Replica(id); r == nil || r.IsLeader() {
			s.m.CancelDeferred(id) // it leads (its own reads warm it) or left
			continue
		}
		if s.m.Applier().Shedding(time.Now()) {
			break
		}
		if s.m.RunDeferred(ctx, id, hints.MaxReplicaWarm) {
			break // one a round: the warm-up's own replays may make the node shed again
		}
	}
}

func (s *Service) logWarmUp(msg string, rangeID uint64, res warmResult) {
	if res.hints > 0 {
		s.log.Debug(msg, "range", rangeID, "peer", res.peer, "hints", res.hints, "hit_ratio", res.stats.HitRatio())
	}
}

// Forget drops what the module knows of a range whose replica left this node.
func (s *Service) Forget(rangeID uint64) {
	if s != nil {
		s.m.Forget(rangeID)
		s.spans.Delete(rangeID)
	}
}

type warmResult struct {
	peer  uint64
	hints int
	stats hints.ReplayStats
}

// warmRange asks rangeID's peers, in order, for their hot-key summary and replays the first
// non-empty one here.
func (s *Service) warmRange(ctx context.Context, rangeID uint64) warmResult {
	for _, peer := range s.peers(rangeID) {
		if ctx.Err() != nil {
			break
		}
		cc, err := s.deps.Conn(peer)
		if err != nil {
			continue
		}
		c := hints.NewClient(cc, *s.clusterID.Load())
		cnt, st, err := s.m.WarmFromPeer(ctx, c, rangeID, 0)
		if err == nil && cnt > 0 {
			return warmResult{peer: peer, hints: cnt, stats: st}
		}
	}
	return warmResult{}
}

// WarmAfterRestart runs before the store starts (so before any local replica can campaign or take a
// transferred leadership): every replica with peers asks them for their hot keys and replays them,
// a few ranges at a time, for at most Config.RestartWarm in all. Best effort: unreachable peers,
// empty summaries and the deadline only make the node start colder.
func (s *Service) WarmAfterRestart(ctx context.Context, nodeID uint64, clusterID string) {
	if s == nil || s.cfg.RestartWarm < 0 {
		return
	}
	s.nodeID.Store(nodeID)
	s.clusterID.Store(&clusterID)
	st := s.store()
	if st == nil {
		return
	}
	var ids []uint64
	s.mu.Lock()
	for _, r := range st.Replicas() {
		s.known[r.RangeID()] = true
		if len(s.peers(r.RangeID())) > 0 {
			ids = append(ids, r.RangeID())
		}
	}
	s.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, s.cfg.RestartWarm)
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
				rctx, rcancel := context.WithTimeout(wctx, max(s.cfg.RestartWarm/4, 250*time.Millisecond))
				res := s.warmRange(rctx, ids[i])
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
	s.log.Info("warmed replicas from peers' hot keys before starting raft", "ranges", len(ids), "warmed", warmed,
		"hints", total, "cache_hit_ratio", fmt.Sprintf("%.2f", ratio), "took", time.Since(start).Round(time.Millisecond),
		"bound", s.cfg.RestartWarm)
}
