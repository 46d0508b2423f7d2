package hints

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/hints/hint"
)

// Reader replays reads on the receiving node through its storage engine's normal read path, so the
// engine's block cache loads the blocks the reads touch (the node's implementation: package enginereader).
// It must only read, must see the replica's latest applied state like any local read, and must
// discard what it reads. It is called from several worker goroutines at once.
type Reader interface {
	// Get reads key of range rangeID.
	Get(ctx context.Context, rangeID uint64, key []byte) (ReplayStats, error)
	// Scan reads at most limit rows (limit > 0) of [start, end) of range rangeID (an empty end: to
	// the end of the range), backwards from end when reverse.
	Scan(ctx context.Context, rangeID uint64, start, end []byte, limit int, reverse bool) (ReplayStats, error)
}

// ReplayStats tell how much of what a replay read was already in the block cache (CacheHit) and how
// much had to be read into it (CacheMiss), in any unit consistent across a Reader's calls (the
// engine reader reports block bytes, from Pebble's per-iterator stats). Both zero means the reader
// cannot tell (the replay then does not count towards the hit ratio).
type ReplayStats struct {
	CacheHit  uint64
	CacheMiss uint64
}

// Add sums two stats.
func (s ReplayStats) Add(o ReplayStats) ReplayStats {
	return ReplayStats{CacheHit: s.CacheHit + o.CacheHit, CacheMiss: s.CacheMiss + o.CacheMiss}
}

// HitRatio is CacheHit / (CacheHit + CacheMiss), NaN when both are 0.
func (s ReplayStats) HitRatio() float64 {
	if t := s.CacheHit + s.CacheMiss; t > 0 {
		return float64(s.CacheHit) / float64(t)
	}
	return math.NaN()
}

// ErrNoReplica is what a Reader returns when the node holds no replica of the range, or the key is
// outside its span (the hint is dropped as no_replica, not as an error).
var ErrNoReplica = errors.New("no local replica of the range")

// LoadFunc reports the receiving node's load in [0, 1], where 1 is saturated: for example CPU
// utilization, or the larger of it and the raft apply backlog's share of its bound. It is called at
// most once per ApplierConfig.LoadInterval, from Receive or a worker, and must be cheap.
type LoadFunc func() float64

// Selection chooses which hints a fraction below 1 applies.
type Selection int

const (
	// SelectHash applies the hints whose descriptor hash falls below the fraction: the same reads
	// on every batch and every node, and a lower fraction applies a subset of a higher one's (the
	// part of the working set kept warm only shrinks as load rises).
	SelectHash Selection = iota
	// SelectRandom applies each hint with probability fraction.
	SelectRandom
)

// ApplierConfig configures an Applier. Zero values take the documented defaults.
type ApplierConfig struct {
	// Workers is the size of the replay pool (default 2).
	Workers int
	// QueueLen is the number of range batches waiting for a worker before new ones are dropped
	// (apply_queue_full; default 256).
	QueueLen int
	// Fraction of received hints to apply, in (0, 1] (default 1: all). SetFraction changes it at run
	// time (0 there turns applying off).
	Fraction float64
	// Selection of the applied subset when the fraction is below 1 (default SelectHash).
	Selection Selection
	// Adaptive lowers the fraction as the load rises: Fraction up to StartAt, falling linearly to
	// MinFraction at StopAt; at StopAt and above nothing is applied (overloaded) until the load falls
	// below halfway between StartAt and StopAt. The apply queue's occupancy counts as load too.
	Adaptive bool
	// Load is the node's load signal (required with Adaptive; without it only the queue counts).
	Load LoadFunc
	// StartAt (default 0.7), StopAt (default 0.9) and MinFraction (default 0.1) shape the adaptive
	// fraction (the paper: 70 % CPU is a fully used node, 90–100 % an overload to switch off at;
	// 10 % of hints still keeps much of the cache warm).
	StartAt, StopAt, MinFraction float64
	// LoadInterval is how often the load is sampled (default 100 ms).
	LoadInterval time.Duration
	// MaxScanRows caps every replayed scan (default 1000; a hint's own limit applies when lower).
	MaxScanRows int
	// WarmthWindow is the number of recent batches per range the hit ratio is computed over
	// (default 8).
	WarmthWindow int
	// MaxRanges bounds the ranges whose warmth is tracked (default 100 000; the least recently
	// applied is forgotten beyond it).
	MaxRanges int
	// RecurringOnly replays only reads that recur: a hint counted more than once in its batch, or
	// whose read was already received within RecurWindow. A read seen once is dropped (one_off) but
	// remembered, so its next occurrence is replayed. With data larger than the cache the one-off
	// reads of a skewed workload's long tail are the ones that miss on the leader too, and its cache
	// does not keep their blocks; skipping them saves most of the replays' disk reads.
	RecurringOnly bool
	// RecurWindow is how long a read is remembered for RecurringOnly (default 2 s; at least two
	// windows of memory are kept).
	RecurWindow time.Duration
	// ReplayEvery, if positive, replays a read at most once per period of this length (the node sets
	// 1 s with RecurringOnly; zero: every time it arrives): a hot read arrives in nearly every 90 ms
	// batch, and replaying it again while its blocks were just touched warms nothing
	// (recently_replayed drops). A batch whose reads were all replayed recently still refreshes its
	// range's warmth.
	ReplayEvery time.Duration
	// DiskBudget, when set, scales the (adaptive) fraction so that replays cause at most its Share
	// of the engine's block-cache misses while the disk is saturated (adaptive mode only).
	DiskBudget DiskBudget
}

func (c ApplierConfig) withDefaults() ApplierConfig {
	if c.Workers <= 0 {
		c.Workers = 2
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 256
	}
	if c.Fraction <= 0 {
		c.Fraction = 1
	}
	if c.StartAt <= 0 {
		c.StartAt = 0.7
	}
	if c.StopAt <= 0 {
		c.StopAt = 0.9
	}
	if c.MinFraction <= 0 {
		c.MinFraction = 0.1
	}
	if c.LoadInterval <= 0 {
		c.LoadInterval = 100 * time.Millisecond
	}
	if c.MaxScanRows <= 0 {
		c.MaxScanRows = 1000
	}
	if c.WarmthWindow <= 0 {
		c.WarmthWindow = 8
	}
	if c.MaxRanges <= 0 {
		c.MaxRanges = 100000
	}
	if c.RecurWindow <= 0 {
		c.RecurWindow = DefaultRecurWindow
	}
	c.DiskBudget = c.DiskBudget.withDefaults()
	return c
}

// Validate reports a configuration that cannot work (after defaults).
func (c ApplierConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Fraction > 1:
		return fmt.Errorf("hints applier: Fraction %v above 1", c.Fraction)
	case c.StartAt >= c.StopAt:
		return fmt.Errorf("hints applier: StartAt %v must be below StopAt %v", c.StartAt, c.StopAt)
	case c.MinFraction > 1:
		return fmt.Errorf("hints applier: MinFraction %v above 1", c.MinFraction)
	case c.Selection != SelectHash && c.Selection != SelectRandom:
		return fmt.Errorf("hints applier: unknown Selection %d", c.Selection)
	case c.DiskBudget.Share > 1 || c.DiskBudget.MinFactor > 1:
		return fmt.Errorf("hints applier: DiskBudget Share %v and MinFactor %v must be at most 1", c.DiskBudget.Share, c.DiskBudget.MinFactor)
	}
	return nil
}

// Applier replays received hints with a bounded worker pool. Receive never blocks.
type Applier struct {
	cfg    ApplierConfig
	reader Reader
	c      *counters
	warm   *warmthTracker
	recent recentReads
	// replayed remembers the reads replayed in the current ReplayEvery period.
	replayed recentReplays
	// onApply, if set, sees every range batch a worker takes (the module's hot-key summary).
	onApply func(hint.RangeHints)

	queue chan applyItem
	base  atomic.Uint64 // configured fraction (float64 bits); SetFraction changes it

	loadMu   sync.Mutex
	lastLoad time.Time
	budget   budgetState // guarded by loadMu

	// awaited counts, per range, the warmth waits in progress on it (Await): a leadership transfer
	// to this node is waiting for the range to be warm.
	awaitMu sync.Mutex
	awaited map[uint64]int

	stop    chan struct{}
	wg      sync.WaitGroup
	startMu sync.Mutex
	started bool
	closed  bool
	// recvMu orders Receive's enqueues before Close's final drain: Receive holds it shared, Close
	// takes it to set stopping, after which nothing is enqueued.
	recvMu   sync.RWMutex
	stopping atomic.Bool
}

type applyItem struct {
	r hint.RangeHints
}

// NewApplier returns an applier replaying through reader; Start runs its workers.
func NewApplier(reader Reader, cfg ApplierConfig) (*Applier, error) {
	return newApplier(reader, cfg, newCounters())
}

func newApplier(reader Reader, cfg ApplierConfig, c *counters) (*Applier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reader == nil {
		return nil, fmt.Errorf("hints applier: a Reader is required")
	}
	cfg = cfg.withDefaults()
	a := &Applier{cfg: cfg, reader: reader, c: c, queue: make(chan applyItem, cfg.QueueLen),
		stop: make(chan struct{}), awaited: map[uint64]int{}}
	a.warm = newWarmthTracker(cfg.WarmthWindow, cfg.MaxRanges)
	a.base.Store(math.Float64bits(cfg.Fraction))
	c.fraction.Store(math.Float64bits(cfg.Fraction))
	c.queueDepth = func() int { return len(a.queue) }
	return a, nil
}

// Config is the applier's configuration with defaults applied.
func (a *Applier) Config() ApplierConfig { return a.cfg }

// Metrics returns the counters the applier shares with its module.
func (a *Applier) Metrics() Metrics { return a.c.snapshot() }

// Start runs the workers until Close.
func (a *Applier) Start() {
	a.startMu.Lock()
	defer a.startMu.Unlock()
	if a.started || a.closed {
		return
	}
	a.started = true
	for i := 0; i < a.cfg.Workers; i++ {
		a.wg.Add(1)
		go a.worker()
	}
}

// Close stops the workers after their current replay; queued batches are dropped (closed).
func (a *Applier) Close() {
	a.startMu.Lock()
	if a.closed {
		a.startMu.Unlock()
		return
	}
	a.closed = true
	a.recvMu.Lock()
	a.stopping.Store(true)
	a.recvMu.Unlock()
	close(a.stop)
	a.startMu.Unlock()
	a.wg.Wait()
	for {
		select {
		case it := <-a.queue:
			a.c.drop(DropClosed, uint64(len(it.r.Hints)))
		default:
			return
		}
	}
}

// SetFraction changes the configured fraction at run time (clamped to [0, 1]; 0 stops applying,
// every hint then counts as selective). In adaptive mode it is the fraction at low load.
func (a *Applier) SetFraction(f float64) {
	f = min(max(f, 0), 1)
	a.base.Store(math.Float64bits(f))
	a.lastLoadReset()
	a.refreshLoad(time.Now())
}

func (a *Applier) lastLoadReset() {
	a.loadMu.Lock()
	a.lastLoad = time.Time{}
	a.loadMu.Unlock()
}

// Receive queues a received batch for replay without blocking: each range is one work item, dropped
// (and counted) when the queue is full or the node is overloaded. It returns how many ranges were
// queued and dropped.
func (a *Applier) Receive(ranges []hint.RangeHints, now time.Time) (queued, dropped int) {
	paused := a.refreshLoad(now)
	a.recvMu.RLock()
	defer a.recvMu.RUnlock()
	for _, r := range ranges {
		n := uint64(len(r.Hints))
		a.c.received.Add(n)
		if n == 0 {
			// The sender withheld this range's reads (none recurred, BufferConfig.RecurringOnly):
			// hints flow, and a receiver applying some would have skipped them all as one-off, so the
			// range's warmth stays fresh, as it would have then.
			awaited := a.isAwaited(r.RangeID)
			if frac, _ := a.rangeFraction(awaited); (awaited || !paused) && frac > 0 && !a.stopping.Load() {
				a.warm.record(r.RangeID, now, max(now.Sub(r.CapturedAt), 0), 0, 0, ReplayStats{})
			}
			continue
		}
		if a.stopping.Load() {
			a.c.drop(DropClosed, n)
			dropped++
			continue
		}
		if paused && !a.isAwaited(r.RangeID) {
			a.c.drop(DropOverloaded, n)
			dropped++
			continue
		}
		select {
		case a.queue <- applyItem{r: r}:
			queued++
		default:
			a.c.drop(DropApplyQueueFull, n)
			dropped++
		}
	}
	return queued, dropped
}

// Overloaded reports whether applying is stopped for overload.
func (a *Applier) Overloaded() bool { return a.c.paused.Load() }

// Shedding reports whether the applier, with its load sampled now (at most every LoadInterval),
// applies less than its configured fraction or nothing: its load (Config.Load, or its own queue's
// fill) is above StartAt, or its disk budget cuts replays (and for a few seconds after, while the
// budget's factor recovers), so replays already cost the node's own work and optional warming
// should wait (Module.DeferWarm).
func (a *Applier) Shedding(now time.Time) bool {
	if a.refreshLoad(now) {
		return true
	}
	return a.Fraction() < math.Float64frombits(a.base.Load())
}

// Fraction is the fraction of hints currently applied (adapted to load in adaptive mode).
func (a *Applier) Fraction() float64 { return math.Float64frombits(a.c.fraction.Load()) }

// refreshLoad samples the load if LoadInterval has passed and updates the fraction and the pause
// state; it returns whether applying is paused.
func (a *Applier) refreshLoad(now time.Time) bool {
	a.loadMu.Lock()
	if !a.lastLoad.IsZero() && now.Sub(a.lastLoad) < a.cfg.LoadInterval && now.After(a.lastLoad) {
		a.loadMu.Unlock()
		return a.c.paused.Load()
	}
	a.lastLoad = now
	defer a.loadMu.Unlock()
	base := math.Float64frombits(a.base.Load())
	if !a.cfg.Adaptive {
		a.c.fraction.Store(math.Float64bits(base))
		return false
	}
	load := 0.0
	if a.cfg.Load != nil {
		load = a.cfg.Load()
	}
	if q := float64(len(a.queue)) / float64(cap(a.queue)); q > load {
		load = q
	}
	if math.IsNaN(load) {
		load = 0
	}
	a.c.load.Store(math.Float64bits(load))
	paused := a.c.paused.Load()
	resumeBelow := (a.cfg.StartAt + a.cfg.StopAt) / 2
	switch {
	case load >= a.cfg.StopAt:
		if !paused {
			a.c.pauses.Add(1)
		}
		paused = true
	case paused && load >= resumeBelow:
		// Stay paused until the load is clearly below the stop threshold (no flapping).
	default:
		paused = false
	}
	a.c.paused.Store(paused)
	f := adaptiveFraction(base, load, a.cfg.StartAt, a.cfg.StopAt, a.cfg.MinFraction) * a.budgetFactor(now)
	if paused {
		f = 0
	}
	a.c.fraction.Store(math.Float64bits(f))
	return paused
}

// adaptiveFraction is base up to startAt, falling linearly to min(minFraction, base) at stopAt.
func adaptiveFraction(base, load, startAt, stopAt, minFraction float64) float64 {
	lo := min(minFraction, base)
	switch {
	case load <= startAt:
		return base
	case load >= stopAt:
		return lo
	}
	return base - (base-lo)*(load-startAt)/(stopAt-startAt)
}

func (a *Applier) worker() {
	defer a.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-a.stop:
			return
		case it := <-a.queue:
			a.apply(ctx, it)
		}
	}
}

// apply replays the selected hints of one range batch and records its warmth.
func (a *Applier) apply(ctx context.Context, it applyItem) {
	r := it.r
	awaited := a.isAwaited(r.RangeID)
	if a.refreshLoad(time.Now()) && !awaited {
		a.c.drop(DropOverloaded, uint64(len(r.Hints)))
		return
	}
	if len(r.Hashes) != len(r.Hints) {
		// Hashed once here for both the selection below and the hot-key summary.
		r.Hashes = make([]uint64, len(r.Hints))
		for i := range r.Hints {
			r.Hashes[i] = r.Hints[i].Hash64()
		}
	}
	if a.onApply != nil {
		a.onApply(r)
	}
	frac, raised := a.rangeFraction(awaited)
	if raised {
		a.c.awaitedBatches.Add(1)
	}
	now0 := time.Now()
	var stats ReplayStats
	var applied, replays, skipped uint64
	for i, h := range r.Hints {
		if ctx.Err() != nil {
			a.c.drop(DropClosed, uint64(len(r.Hints)-i))
			break
		}
		hash := r.Hashes[i]
		if !a.selectedHash(hash, frac) {
			a.c.drop(DropSelective, 1)
			skipped++
			continue
		}
		if a.cfg.RecurringOnly && !a.recent.recurring(hash, h.Count, now0, a.cfg.RecurWindow) {
			a.c.drop(DropOneOff, 1)
			skipped++
			continue
		}
		if a.cfg.ReplayEvery > 0 && a.replayed.seen(hash, now0, a.cfg.ReplayEvery) {
			a.c.drop(DropRecentlyReplayed, 1)
			skipped++
			continue
		}
		st, err := a.replay(ctx, r.RangeID, h.Descriptor)
		switch {
		case errors.Is(err, ErrNoReplica):
			a.c.drop(DropNoReplica, 1)
			continue
		case err != nil:
			a.c.drop(DropReplayError, 1)
			continue
		}
		applied++
		if st.CacheHit+st.CacheMiss > 0 {
			replays++
			stats = stats.Add(st)
		}
	}
	a.c.applied.Add(applied)
	a.c.replayHit.Add(stats.CacheHit)
	a.c.replayMiss.Add(stats.CacheMiss)
	if applied == 0 && (skipped == 0 || frac <= 0) {
		// Nothing this node can replay (no replica, errors), or applying is off (fraction 0, or
		// paused): not a sign of warmth, and the range goes idle.
		return
	}
	// A batch whose hints were all skipped by a fraction above 0 still shows that hints are flowing
	// (the selected subset is the same on every batch).
	now := time.Now()
	lag := max(now.Sub(r.CapturedAt), 0)
	a.c.applyLag.Store(int64(lag))
	a.c.applyLagSum.Add(int64(lag))
	a.c.appliedBatches.Add(1)
	a.warm.record(r.RangeID, now, lag, applied, replays, stats)
}

func (a *Applier) selected(d hint.Descriptor, frac float64) bool {
	return a.selectedHash(d.Hash64(), frac)
}

func (a *Applier) selectedHash(h uint64, frac float64) bool {
	switch {
	case frac >= 1:
		return true
	case frac <= 0:
		return false
	case a.cfg.Selection == SelectRandom:
		return rand.Float64() < frac
	}
	return float64(uint32(h>>32)) < frac*float64(1<<32)
}

// maxRecentReads bounds one window's memory of reads (about 40 MiB at most); a window that fills
// up is ended early.
const maxRecentReads = 1 << 20

// recentReads remembers the reads received in the current and the previous RecurWindow (their
// descriptor hashes), for RecurringOnly.
type recentReads struct {
	mu        sync.Mutex
	cur, prev map[uint64]struct{}
	since     time.Time
}

// recurring records h and reports whether its read recurs: count > 1, or seen within the last one
// to two windows.
func (r *recentReads) recurring(h uint64, count uint32, now time.Time, window time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil || now.Sub(r.since) >= window || len(r.cur) >= maxRecentReads {
		if r.cur != nil && now.Sub(r.since) < 2*window {
			r.prev = r.cur
		} else {
			r.prev = nil
		}
		r.cur, r.since = make(map[uint64]struct{}, len(r.prev)), now
	}
	_, inCur := r.cur[h]
	_, inPrev := r.prev[h]
	r.cur[h] = struct{}{}
	return count > 1 || inCur || inPrev
}

// recentReplays remembers the reads replayed in the current period (their descriptor hashes), for
// ApplierConfig.ReplayEvery.
type recentReplays struct {
	mu    sync.Mutex
	cur   map[uint64]struct{}
	since time.Time
}

// seen reports whether h was already replayed in the current period of length every, and records it
// as replayed if not (the caller replays it). A new period starts every `every` (or when the memory
// is full), so a read arriving in every batch is replayed about once per period.
func (r *recentReplays) seen(h uint64, now time.Time, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil || now.Sub(r.since) >= every || len(r.cur) >= maxRecentReads {
		r.cur, r.since = make(map[uint64]struct{}, len(r.cur)), now
	}
	if _, ok := r.cur[h]; ok {
		return true
	}
	r.cur[h] = struct{}{}
	return false
}

// replay runs one read through the reader and counts the blocks it read from disk (the disk budget's
// measure; live hints and warm-ups alike).
func (a *Applier) replay(ctx context.Context, rangeID uint64, d hint.Descriptor) (ReplayStats, error) {
	var st ReplayStats
	var err error
	if !d.Scan {
		st, err = a.reader.Get(ctx, rangeID, d.Key)
	} else {
		limit := a.cfg.MaxScanRows
		if d.Limit > 0 && int(d.Limit) < limit {
			limit = int(d.Limit)
		}
		st, err = a.reader.Scan(ctx, rangeID, d.Key, d.End, limit, d.Reverse)
	}
	if n := a.cfg.DiskBudget.missedBlocks(st.CacheMiss); n > 0 {
		a.c.replayMissBlocks.Add(n)
	}
	return st, err
}

// Warm replays hints for rangeID synchronously and in full (no selection, no overload check): the
// warm-after-restart path, before the replica may lead. It returns the summed replay stats.
func (a *Applier) Warm(ctx context.Context, rangeID uint64, hs []hint.Hint) (ReplayStats, error) {
	var stats ReplayStats
	var applied uint64
	for _, h := range hs {
		if err := ctx.Err(); err != nil {
			return stats, err
		}
		st, err := a.replay(ctx, rangeID, h.Descriptor)
		if errors.Is(err, ErrNoReplica) {
			return stats, fmt.Errorf("warm range %d: %w", rangeID, err)
		}
		if err != nil {
			a.c.drop(DropReplayError, 1)
			continue
		}
		applied++
		stats = stats.Add(st)
	}
	a.c.applied.Add(applied)
	a.c.replayHit.Add(stats.CacheHit)
	a.c.replayMiss.Add(stats.CacheMiss)
	if applied > 0 {
		// These replays found a cold cache by design: they count as applied hints but not towards the
		// hit ratio, which the hints that follow measure.
		a.warm.record(rangeID, time.Now(), 0, applied, 0, ReplayStats{})
	}
	return stats, nil
}

// Warmth reports what the applier knows of range rangeID's cache warmth.
func (a *Applier) Warmth(rangeID uint64) Warmth { return a.warm.get(rangeID, time.Now()) }

// WaitWarm waits until range rangeID meets crit, for at most maxWait (0: check once). It returns the
// last warmth seen, and an error wrapping ErrNotWarm (with the unmet criterion) when the wait ends
// first, or the context's error. While it waits, the range's hints are replayed as if the node had
// room (Await).
func (a *Applier) WaitWarm(ctx context.Context, rangeID uint64, crit WarmCriteria, maxWait time.Duration) (Warmth, error) {
	if maxWait > 0 {
		defer a.Await(rangeID)()
	}
	return a.warm.wait(ctx, rangeID, crit, maxWait)
}

// Await marks rangeID as awaited until the returned function is called: a leadership transfer to
// this node waits for the range's warmth. Its batches are then replayed at the configured fraction
// even while the node sheds replays (the adapted fraction, the disk budget, an overload pause).
// Shedding exists so that replays do not take disk reads and CPU from the node's own clients; but
// the range's reads come to this node within the wait either way, as client reads on a cold cache
// if not as replays now, and a wait that times out delays the capacity the transfer brings (a
// joining node's hand-overs each waited their full 5 s while its budget cut replays).
// Only the awaited range is exempt, and only for the wait's bounded length.
func (a *Applier) Await(rangeID uint64) (done func()) {
	a.awaitMu.Lock()
	a.awaited[rangeID]++
	a.awaitMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.awaitMu.Lock()
			defer a.awaitMu.Unlock()
			if a.awaited[rangeID]--; a.awaited[rangeID] <= 0 {
				delete(a.awaited, rangeID)
			}
		})
	}
}

// rangeFraction is the fraction of a range's hints to apply: the adapted fraction, or for a range a
// transfer waits on the configured one (raised: the adapted one was lower).
func (a *Applier) rangeFraction(awaited bool) (frac float64, raised bool) {
	frac = a.Fraction()
	if base := math.Float64frombits(a.base.Load()); awaited && frac < base {
		return base, true
	}
	return frac, false
}

func (a *Applier) isAwaited(rangeID uint64) bool {
	a.awaitMu.Lock()
	defer a.awaitMu.Unlock()
	return a.awaited[rangeID] > 0
}

// Forget drops what is known of range rangeID (its replica left this node).
func (a *Applier) Forget(rangeID uint64) { a.warm.forget(rangeID) }
