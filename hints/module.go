package hints

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/shoaldb/shoal/hints/hint"
	"github.com/shoaldb/shoal/hints/hotkeys"
	"github.com/shoaldb/shoal/pb"
)

// Config configures a node's read-hints Module. Zero values take the documented defaults; Peers is
// required.
type Config struct {
	// NodeID and ClusterID identify this node on the batches it ships and check the ones it receives
	// (an empty ClusterID accepts any).
	NodeID    uint64 `json:"-"`
	ClusterID string `json:"-"`
	// Peers lists each range's other replicas (see PeersFunc).
	Peers PeersFunc
	// Target: ship to all other replicas (default) or one.
	Target  Target
	Buffer  BufferConfig
	Shipper ShipperConfig // NodeID, ClusterID, Peers and Target are taken from above
	Applier ApplierConfig
	HotKeys hotkeys.Config
	// DisableHotKeys turns the hot-key summary off (HotKeys then answers nothing).
	DisableHotKeys bool
}

// DefaultTransferWait is how long a warm-before-transfer check waits for the target by default: a
// bounded time, so that a target that stays cold delays the transfer by at most this long.
const DefaultTransferWait = 5 * time.Second

// WithDefaults returns c with the buffer's, shipper's, applier's and hot-key summary's zero settings at
// their defaults (New applies them too).
func (c Config) WithDefaults() Config {
	c.Buffer = c.Buffer.withDefaults()
	c.Shipper = c.Shipper.withDefaults()
	c.Applier = c.Applier.withDefaults()
	c.HotKeys = c.HotKeys.WithDefaults()
	return c
}

// Validate checks the configuration as New would (for start-up validation).
func (c Config) Validate() error {
	if err := c.Buffer.Validate(); err != nil {
		return err
	}
	sc := c.Shipper
	sc.Peers, sc.Target = c.Peers, c.Target
	if err := sc.Validate(); err != nil {
		return err
	}
	return c.Applier.Validate()
}

// Module is the read-hints module of one node (the paper's RHM): capture on the node's leaders,
// shipping to peers, replay of what peers ship here, warmth and the hot-key summary. All methods are
// safe for concurrent use.
type Module struct {
	cfg     Config
	cluster atomic.Pointer[string] // the cluster id checked on received batches (see SetIdentity)
	c       *counters
	buf     *Buffer
	shipper *Shipper
	sender  Sender
	applier *Applier
	hot     *hotkeys.Summary

	// Warm-ups put off until a leadership is about to arrive (DeferWarm, SetWarmUp).
	deferMu  sync.Mutex
	deferred map[uint64]bool
	warmUp   func(ctx context.Context, rangeID uint64)
}

// New builds a module shipping through sender and replaying through reader; Start runs it.
func New(cfg Config, sender Sender, reader Reader) (*Module, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := newCounters()
	buf, err := newBuffer(cfg.Buffer, c)
	if err != nil {
		return nil, err
	}
	sc := cfg.Shipper
	sc.NodeID, sc.ClusterID, sc.Peers, sc.Target = cfg.NodeID, cfg.ClusterID, cfg.Peers, cfg.Target
	shipper, err := NewShipper(buf, sender, sc)
	if err != nil {
		return nil, err
	}
	applier, err := newApplier(reader, cfg.Applier, c)
	if err != nil {
		return nil, err
	}
	m := &Module{cfg: cfg, c: c, buf: buf, shipper: shipper, sender: sender, applier: applier, deferred: map[uint64]bool{}}
	m.cluster.Store(&cfg.ClusterID)
	if !cfg.DisableHotKeys {
		m.hot = hotkeys.New(cfg.HotKeys)
		shipper.onDrain = func(rs []hint.RangeHints) {
			now := time.Now()
			for _, r := range rs {
				m.hot.ObserveRange(r, now)
			}
		}
		applier.onApply = func(r hint.RangeHints) { m.hot.ObserveRange(r, time.Now()) }
	}
	return m, nil
}

// SetIdentity sets the node's id and cluster once it knows them (a new node learns them when it joins,
// after the module was built with zeros): batches are stamped with them from now on, and batches and
// requests from another cluster are refused.
func (m *Module) SetIdentity(nodeID uint64, clusterID string) {
	m.cluster.Store(&clusterID)
	m.shipper.SetIdentity(nodeID, clusterID)
}

func (m *Module) clusterID() string { return *m.cluster.Load() }

// Start runs the shipper and the apply workers.
func (m *Module) Start() {
	m.shipper.Start()
	m.applier.Start()
}

// Close stops shipping and applying; hints in flight are dropped. A sender with a Close method (the
// StreamSender's streams) is closed once the shipper has stopped sending.
func (m *Module) Close() {
	m.shipper.Close()
	if c, ok := m.sender.(interface{ Close() }); ok {
		c.Close()
	}
	m.applier.Close()
}

// Record captures a point read of key served by this node's leader replica of rangeID. It never
// blocks; false means the hint was dropped (counted).
func (m *Module) Record(rangeID uint64, key []byte) bool { return m.buf.Record(rangeID, key) }

// RecordScan captures a scan of [start, end) (at most limit rows, limit <= 0: none) served by this
// node's leader replica of rangeID.
func (m *Module) RecordScan(rangeID uint64, start, end []byte, limit int, reverse bool) bool {
	return m.buf.RecordScan(rangeID, start, end, limit, reverse)
}

// Flush ships what the buffer holds now instead of at the next interval.
func (m *Module) Flush() { m.shipper.Flush() }

// Receive takes a batch a peer shipped (a Ship call or a ShipStream message): it queues its ranges for replay without
// blocking and acknowledges what it queued.
func (m *Module) Receive(b *pb.HintBatch) *pb.HintShipAck {
	now := time.Now()
	ranges := hint.BatchFromProto(b, now)
	m.c.receivedBatches.Add(1)
	m.c.bytesReceived.Add(uint64(proto.Size(b)))
	if cluster := m.clusterID(); cluster != "" && b.GetClusterId() != "" && b.GetClusterId() != cluster {
		var n uint64
		for _, r := range ranges {
			n += uint64(len(r.Hints))
		}
		m.c.received.Add(n)
		m.c.drop(DropWrongCluster, n)
		return &pb.HintShipAck{DroppedRanges: uint32(len(ranges))}
	}
	q, d := m.applier.Receive(ranges, now)
	return &pb.HintShipAck{QueuedRanges: uint32(q), DroppedRanges: uint32(d), Overloaded: m.applier.Overloaded()}
}

// Warmth reports this node's cache warmth for rangeID.
func (m *Module) Warmth(rangeID uint64) Warmth { return m.applier.Warmth(rangeID) }

// MaxReplicaWarm bounds one replica's warm-up from a peer's hot-key summary on a running node,
// whether it runs when the replica appears or after being put off (DeferWarm): replaying a summary
// on a cold, busy disk must not hold up its caller, nor take the whole of a transfer's wait, whose
// replays after the warm-up are what show the replica warm.
const MaxReplicaWarm = 2 * time.Second

// WaitWarm waits up to maxWait for rangeID to meet crit on this node (see Applier.WaitWarm). A
// warm-up of rangeID put off by DeferWarm runs first, for at most half of maxWait (and
// MaxReplicaWarm): a leadership is about to move here, which is what the warm-up was kept for. It is
// skipped if live hints already made the range meet crit. A wait of 0 only checks.
func (m *Module) WaitWarm(ctx context.Context, rangeID uint64, crit WarmCriteria, maxWait time.Duration) (Warmth, error) {
	if maxWait > 0 {
		defer m.applier.Await(rangeID)() // from the start: the deferred warm-up's time counts too
		if w, err := m.applier.WaitWarm(ctx, rangeID, crit, 0); err == nil {
			m.CancelDeferred(rangeID) // live hints warmed it meanwhile: the summary's misses would buy nothing
			return w, nil
		}
		start := time.Now()
		m.RunDeferred(ctx, rangeID, min(maxWait/2, MaxReplicaWarm))
		maxWait = max(maxWait-time.Since(start), 0)
	}
	return m.applier.WaitWarm(ctx, rangeID, crit, maxWait)
}

// SetWarmUp sets how this node warms one of its replicas from its peers' hot keys (the node knows
// the peers; the module does not). A warm-up put off by DeferWarm runs through it.
func (m *Module) SetWarmUp(fn func(ctx context.Context, rangeID uint64)) {
	m.deferMu.Lock()
	defer m.deferMu.Unlock()
	m.warmUp = fn
}

// DeferWarm puts off the warm-up of a new replica of rangeID until RunDeferred: a leadership
// transfer to it waits for its warmth (WaitWarm), or the node has room again (its owner's periodic
// reconciliation). A node already shedding replays for load (Applier.Shedding) does so: replaying a
// whole hot-key summary on a cold replica costs its disk a read per miss, which its own clients'
// reads then queue behind, for a replica that may never lead. Live hints still warm the replica
// meanwhile, at the applier's adapted fraction.
func (m *Module) DeferWarm(rangeID uint64) {
	m.deferMu.Lock()
	defer m.deferMu.Unlock()
	if !m.deferred[rangeID] {
		m.deferred[rangeID] = true
		m.c.warmsDeferred.Add(1)
	}
}

// Deferred lists the ranges whose warm-up is put off.
func (m *Module) Deferred() []uint64 {
	m.deferMu.Lock()
	defer m.deferMu.Unlock()
	out := make([]uint64, 0, len(m.deferred))
	for id := range m.deferred {
		out = append(out, id)
	}
	return out
}

// CancelDeferred drops rangeID's put-off warm-up without running it (the replica leads now, or is
// warm from live hints).
func (m *Module) CancelDeferred(rangeID uint64) {
	m.deferMu.Lock()
	defer m.deferMu.Unlock()
	delete(m.deferred, rangeID)
}

// RunDeferred runs rangeID's put-off warm-up, if any, for at most bound, and reports whether it ran.
// A warm-up runs once: concurrent callers find it taken.
func (m *Module) RunDeferred(ctx context.Context, rangeID uint64, bound time.Duration) bool {
	m.deferMu.Lock()
	fn := m.warmUp
	if !m.deferred[rangeID] || fn == nil || bound <= 0 {
		m.deferMu.Unlock()
		return false
	}
	delete(m.deferred, rangeID)
	m.deferMu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	fn(wctx, rangeID)
	m.c.warmsDeferredRun.Add(1)
	return true
}

// HotKeys returns up to limit of rangeID's hottest reads as this node knows them (captured here as
// leader, or received as hints); limit <= 0: the summary's PerRange.
func (m *Module) HotKeys(rangeID uint64, limit int) []hint.Hint {
	if m.hot == nil {
		return nil
	}
	if limit <= 0 || limit > m.hot.Config().PerRange {
		limit = m.hot.Config().PerRange
	}
	return m.hot.Top(rangeID, limit, time.Now())
}

// Warm replays hs for rangeID now, in full (warm after restart; see Applier.Warm).
func (m *Module) Warm(ctx context.Context, rangeID uint64, hs []hint.Hint) (ReplayStats, error) {
	return m.applier.Warm(ctx, rangeID, hs)
}

// WarmFromPeer asks a peer (through c) for rangeID's hot-key summary and replays it here: the
// warm-after-restart step, run before the replica campaigns or accepts a leadership transfer.
// It returns the number of hints replayed and their replay stats.
func (m *Module) WarmFromPeer(ctx context.Context, c *Client, rangeID uint64, limit int) (int, ReplayStats, error) {
	hs, err := c.HotKeys(ctx, rangeID, limit)
	if err != nil {
		return 0, ReplayStats{}, fmt.Errorf("warm range %d from peer: %w", rangeID, err)
	}
	st, err := m.Warm(ctx, rangeID, hs)
	return len(hs), st, err
}

// Forget drops what the module knows of rangeID (its replica left this node).
func (m *Module) Forget(rangeID uint64) {
	m.deferMu.Lock()
	delete(m.deferred, rangeID)
	m.deferMu.Unlock()
	m.applier.Forget(rangeID)
	if m.hot != nil {
		m.hot.Forget(rangeID)
	}
}

// SetFraction changes the applied fraction at run time (see Applier.SetFraction).
func (m *Module) SetFraction(f float64) { m.applier.SetFraction(f) }

// Metrics is a snapshot of the module's counters.
func (m *Module) Metrics() Metrics { return m.c.snapshot() }

// Collectors returns Prometheus collectors exporting the module's metrics (shoal_hints_*), for
// the node's registry.
func (m *Module) Collectors() []prometheus.Collector {
	return []prometheus.Collector{newCollector(m.c)}
}

// Buffer, Shipper and Applier expose the parts (tests, benchmarks).
func (m *Module) Buffer() *Buffer { return m.buf }

// Shipper is the module's shipper.
func (m *Module) Shipper() *Shipper { return m.shipper }

// Applier is the module's applier.
func (m *Module) Applier() *Applier { return m.applier }
