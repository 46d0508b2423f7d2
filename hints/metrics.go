package hints

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DropReason says why a hint was not shipped or not applied.
type DropReason int

// Drop reasons. Capture side: BufferFull, TooLarge, Sampled, SenderOneOff. Shipping side: NoPeers,
// PeerQueueFull, SendError. Receiving side: ApplyQueueFull, Overloaded, Selective, NoReplica, ReplayError,
// Closed, WrongCluster, OneOff, RecentlyReplayed.
const (
	// DropBufferFull: the active capture buffer (slots or key bytes) was full — the shipper is behind.
	DropBufferFull DropReason = iota
	// DropTooLarge: the read's keys are longer than BufferConfig.MaxKeyBytes.
	DropTooLarge
	// DropNoPeers: the range has no other replica to ship to.
	DropNoPeers
	// DropPeerQueueFull: the peer's send queue was full (the peer or the network is slow).
	DropPeerQueueFull
	// DropSendError: the send failed or timed out.
	DropSendError
	// DropApplyQueueFull: the receiver's apply queue was full (back-pressure).
	DropApplyQueueFull
	// DropOverloaded: the receiver stopped applying because its load is above ApplierConfig.StopAt.
	DropOverloaded
	// DropSelective: not selected by the applied fraction (selective hints).
	DropSelective
	// DropNoReplica: the receiver holds no replica of the range (or the key is outside it).
	DropNoReplica
	// DropReplayError: the Reader failed.
	DropReplayError
	// DropClosed: the module was closing.
	DropClosed
	// DropWrongCluster: the batch came from another cluster.
	DropWrongCluster
	// DropOneOff: a read seen once (not repeated in its batch nor within ApplierConfig.RecurWindow):
	// with ApplierConfig.RecurringOnly it is not replayed.
	DropOneOff
	// DropSampled: a read not recorded because the node is saturated and captures only
	// BufferConfig.SampleFraction of its reads (counted in reads, not hints).
	DropSampled
	// DropSenderOneOff: a read seen once on the leader, withheld by BufferConfig.RecurringOnly
	// (shipped, with this read counted, if it recurs within RecurWindow).
	DropSenderOneOff
	// DropRecentlyReplayed: the receiver replayed the same read less than ApplierConfig.ReplayEvery
	// ago (its blocks were just touched).
	DropRecentlyReplayed
	numDropReasons
)

var dropNames = [numDropReasons]string{
	"buffer_full", "too_large", "no_peers", "peer_queue_full", "send_error",
	"apply_queue_full", "overloaded", "selective", "no_replica", "replay_error", "closed", "wrong_cluster",
	"one_off", "sampled", "sender_one_off", "recently_replayed",
}

// String is the reason's metric label.
func (r DropReason) String() string {
	if r < 0 || r >= numDropReasons {
		return "unknown"
	}
	return dropNames[r]
}

// Metrics is a snapshot of a module's counters (all since start). Hint counts are distinct hints
// (after summarization) unless they say reads.
type Metrics struct {
	// Recorded is the reads captured into the buffer; Summarized the ones folded into an identical
	// read of the same batch (so Recorded - Summarized hints were shipped or dropped).
	Recorded   uint64
	Summarized uint64
	// Shipped is hints × peers handed to the Sender successfully, in ShippedBatches batches and
	// BytesSent encoded bytes.
	Shipped        uint64
	ShippedBatches uint64
	BytesSent      uint64
	// Received is hints received, in ReceivedBatches batches and BytesReceived encoded bytes.
	Received        uint64
	ReceivedBatches uint64
	BytesReceived   uint64
	// Applied is hints replayed through the Reader (each distinct hint at most once).
	Applied uint64
	// Dropped counts hints by reason (selection included, see DropSelective).
	Dropped map[DropReason]uint64
	// ReplayCacheHit and ReplayCacheMiss sum ReplayStats over every replay.
	ReplayCacheHit  uint64
	ReplayCacheMiss uint64
	// ApplyLag is the most recent batch's lag (capture on the leader to the end of its replay);
	// ApplyLagSum / AppliedBatches is the mean.
	ApplyLag       time.Duration
	ApplyLagSum    time.Duration
	AppliedBatches uint64
	// Load is the last load sample of the receiver (adaptive mode), Fraction the applied fraction in
	// force, Paused whether applying is stopped for overload, Pauses how many times it stopped.
	Load     float64
	Fraction float64
	Paused   bool
	Pauses   uint64
	// QueueDepth is the apply queue's current length (range batches).
	QueueDepth int
	// CaptureLoad is the capture side's last load sample (BufferConfig.Load) and CaptureFraction
	// the share of reads it records (below 1 while it sheds capture work under load).
	CaptureLoad     float64
	CaptureFraction float64
	// ReplayMissBlocks estimates the blocks replays read from disk (DiskBudget.BlockBytes);
	// DiskBudgetFactor is what ApplierConfig.DiskBudget scales the fraction by (1: not limiting).
	ReplayMissBlocks uint64
	DiskBudgetFactor float64
	// WarmsDeferred counts new replicas whose warm-up from a peer's hot keys was put off because the
	// node was shedding replays (Module.DeferWarm); WarmsDeferredRun those of them warmed later (before
	// a leadership transfer, or once the node had room). The others were warm from live hints by
	// then, came to lead, or left the node.
	WarmsDeferred, WarmsDeferredRun uint64
	// AwaitedBatches counts range batches replayed at the configured fraction rather than the shed
	// one because a leadership transfer to this node waited on the range's warmth (Applier.Await).
	AwaitedBatches uint64
}

// ReplayHitRatio is the block-cache hit ratio of all replays (NaN before any).
func (m Metrics) ReplayHitRatio() float64 {
	t := m.ReplayCacheHit + m.ReplayCacheMiss
	if t == 0 {
		return math.NaN()
	}
	return float64(m.ReplayCacheHit) / float64(t)
}

// DroppedTotal sums Dropped over every reason.
func (m Metrics) DroppedTotal() uint64 {
	var n uint64
	for _, v := range m.Dropped {
		n += v
	}
	return n
}

// counters are shared by the parts of one Module.
type counters struct {
	recorded, summarized                     atomic.Uint64
	shipped, shippedBatches, bytesSent       atomic.Uint64
	received, receivedBatches, bytesReceived atomic.Uint64
	applied, replayHit, replayMiss           atomic.Uint64
	replayMissBlocks                         atomic.Uint64 // blocks replays read from disk (estimated)
	budgetFactor                             atomic.Uint64 // float64 bits (DiskBudget)
	applyLag, applyLagSum                    atomic.Int64
	appliedBatches, pauses                   atomic.Uint64
	warmsDeferred, warmsDeferredRun          atomic.Uint64
	awaitedBatches                           atomic.Uint64
	load, fraction                           atomic.Uint64 // float64 bits
	captureLoad, captureFraction             atomic.Uint64 // float64 bits
	paused                                   atomic.Bool
	queueDepth                               func() int
	dropped                                  [numDropReasons]atomic.Uint64
}

func newCounters() *counters {
	c := &counters{}
	c.fraction.Store(math.Float64bits(1))
	c.captureFraction.Store(math.Float64bits(1))
	c.budgetFactor.Store(math.Float64bits(1))
	return c
}

func (c *counters) drop(r DropReason, n uint64) {
	if n > 0 {
		c.dropped[r].Add(n)
	}
}

func (c *counters) snapshot() Metrics {
	m := Metrics{
		Recorded: c.recorded.Load(), Summarized: c.summarized.Load(),
		Shipped: c.shipped.Load(), ShippedBatches: c.shippedBatches.Load(), BytesSent: c.bytesSent.Load(),
		Received: c.received.Load(), ReceivedBatches: c.receivedBatches.Load(), BytesReceived: c.bytesReceived.Load(),
		Applied: c.applied.Load(), ReplayCacheHit: c.replayHit.Load(), ReplayCacheMiss: c.replayMiss.Load(),
		ApplyLag: time.Duration(c.applyLag.Load()), ApplyLagSum: time.Duration(c.applyLagSum.Load()),
		AppliedBatches: c.appliedBatches.Load(),
		Load:           math.Float64frombits(c.load.Load()), Fraction: math.Float64frombits(c.fraction.Load()),
		Paused: c.paused.Load(), Pauses: c.pauses.Load(), WarmsDeferred: c.warmsDeferred.Load(),
		WarmsDeferredRun: c.warmsDeferredRun.Load(),
		CaptureLoad:      math.Float64frombits(c.captureLoad.Load()), CaptureFraction: math.Float64frombits(c.captureFraction.Load()),
		ReplayMissBlocks: c.replayMissBlocks.Load(), DiskBudgetFactor: math.Float64frombits(c.budgetFactor.Load()),
		AwaitedBatches: c.awaitedBatches.Load(),
		Dropped:        make(map[DropReason]uint64, numDropReasons),
	}
	if c.queueDepth != nil {
		m.QueueDepth = c.queueDepth()
	}
	for i := range c.dropped {
		m.Dropped[DropReason(i)] = c.dropped[i].Load()
	}
	return m
}

// collector exports a counters snapshot to Prometheus at scrape time.
type collector struct {
	c     *counters
	descs map[string]*prometheus.Desc
}

var metricHelp = []struct{ name, help string }{
	{"shoal_hints_recorded_total", "Reads captured as read hints."},
	{"shoal_hints_summarized_total", "Captured reads folded into an identical read of the same batch."},
	{"shoal_hints_shipped_total", "Read hints sent to peers (hints x peers)."},
	{"shoal_hints_shipped_batches_total", "Read-hint batches sent to peers."},
	{"shoal_hints_sent_bytes_total", "Encoded bytes of read-hint batches sent."},
	{"shoal_hints_received_total", "Read hints received from peers."},
	{"shoal_hints_received_batches_total", "Read-hint batches received."},
	{"shoal_hints_received_bytes_total", "Encoded bytes of read-hint batches received."},
	{"shoal_hints_applied_total", "Read hints replayed through the engine's read path."},
	{"shoal_hints_dropped_total", "Read hints dropped, by reason."},
	{"shoal_hints_replay_cache_bytes_total", "Block bytes touched by hint replays, by result (hit: already cached)."},
	{"shoal_hints_apply_lag_seconds", "Lag of the most recent applied batch, from capture on the leader to replay."},
	{"shoal_hints_apply_lag_seconds_total", "Lags of the applied batches, summed: over shoal_hints_applied_batches_total, the mean lag."},
	{"shoal_hints_applied_batches_total", "Range batches of hints replayed."},
	{"shoal_hints_load", "Last load sample seen by the hint applier (0..1)."},
	{"shoal_hints_apply_fraction", "Fraction of received hints being applied."},
	{"shoal_hints_paused", "1 while applying is stopped because the node is overloaded."},
	{"shoal_hints_pauses_total", "Times applying stopped for overload."},
	{"shoal_hints_apply_queue_depth", "Range batches waiting in the apply queue."},
	{"shoal_hints_capture_load", "Last load sample of the capture side (0..1)."},
	{"shoal_hints_capture_fraction", "Fraction of served reads being recorded as hints (below 1 while the node sheds capture work under load)."},
	{"shoal_hints_warmups_deferred_total", "New replicas whose warm-up from a peer's hot keys was put off because the node was shedding replays for load."},
	{"shoal_hints_warmups_deferred_run_total", "Put-off warm-ups run later: before a leadership transfer to the replica, or once the node had room."},
	{"shoal_hints_replay_missed_blocks_total", "Blocks replays read from disk, estimated from their missed bytes (at least one for a replay that missed)."},
	{"shoal_hints_awaited_batches_total", "Range batches replayed at the configured fraction, past load shedding and the disk budget, because a leadership transfer to this node waited on the range's warmth."},
	{"shoal_hints_disk_budget_factor", "What the disk budget scales the applied fraction by (1: not limiting); it falls while replays cause more than their share of a saturated disk's block misses and recovers by half each second after."},
}

func newCollector(c *counters) *collector {
	col := &collector{c: c, descs: map[string]*prometheus.Desc{}}
	for _, m := range metricHelp {
		var labels []string
		switch m.name {
		case "shoal_hints_dropped_total":
			labels = []string{"reason"}
		case "shoal_hints_replay_cache_bytes_total":
			labels = []string{"result"}
		}
		col.descs[m.name] = prometheus.NewDesc(m.name, m.help, labels, nil)
	}
	return col
}

// Describe implements prometheus.Collector.
func (col *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range col.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (col *collector) Collect(ch chan<- prometheus.Metric) {
	m := col.c.snapshot()
	counter := func(name string, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(col.descs[name], prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(name string, v float64) {
		ch <- prometheus.MustNewConstMetric(col.descs[name], prometheus.GaugeValue, v)
	}
	counter("shoal_hints_recorded_total", m.Recorded)
	counter("shoal_hints_summarized_total", m.Summarized)
	counter("shoal_hints_shipped_total", m.Shipped)
	counter("shoal_hints_shipped_batches_total", m.ShippedBatches)
	counter("shoal_hints_sent_bytes_total", m.BytesSent)
	counter("shoal_hints_received_total", m.Received)
	counter("shoal_hints_received_batches_total", m.ReceivedBatches)
	counter("shoal_hints_received_bytes_total", m.BytesReceived)
	counter("shoal_hints_applied_total", m.Applied)
	for r := DropReason(0); r < numDropReasons; r++ {
		counter("shoal_hints_dropped_total", m.Dropped[r], r.String())
	}
	counter("shoal_hints_replay_cache_bytes_total", m.ReplayCacheHit, "hit")
	counter("shoal_hints_replay_cache_bytes_total", m.ReplayCacheMiss, "miss")
	gauge("shoal_hints_apply_lag_seconds", m.ApplyLag.Seconds())
	ch <- prometheus.MustNewConstMetric(col.descs["shoal_hints_apply_lag_seconds_total"], prometheus.CounterValue, m.ApplyLagSum.Seconds())
	counter("shoal_hints_applied_batches_total", m.AppliedBatches)
	gauge("shoal_hints_load", m.Load)
	gauge("shoal_hints_apply_fraction", m.Fraction)
	paused := 0.0
	if m.Paused {
		paused = 1
	}
	gauge("shoal_hints_paused", paused)
	counter("shoal_hints_pauses_total", m.Pauses)
	gauge("shoal_hints_apply_queue_depth", float64(m.QueueDepth))
	gauge("shoal_hints_capture_load", m.CaptureLoad)
	gauge("shoal_hints_capture_fraction", m.CaptureFraction)
	counter("shoal_hints_warmups_deferred_total", m.WarmsDeferred)
	counter("shoal_hints_warmups_deferred_run_total", m.WarmsDeferredRun)
	counter("shoal_hints_replay_missed_blocks_total", m.ReplayMissBlocks)
	gauge("shoal_hints_disk_budget_factor", m.DiskBudgetFactor)
	counter("shoal_hints_awaited_batches_total", m.AwaitedBatches)
}
