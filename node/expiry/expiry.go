// Package expiry removes expired keys in the background: on every range this node leads, a paced
// pass finds the keys whose expiry has passed and deletes them through raft, so every replica,
// snapshot and backup loses them too.
//
// Reads never depend on it (a replica hides an expired key itself); it only gives the space back.
// A delete it proposes applies only if the key is still expired at the proposing leader's clock, so
// a key rewritten after the pass looked at it is never lost. It owns its goroutine (stopped by Stop)
// and its pacing; it must never write a key that has not expired, nor run on a range it does not
// lead.
package expiry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/replica"
	"github.com/shoaldb/shoal/stopper"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/stored"
)

// Config paces the sweeper. Zero fields take the defaults.
type Config struct {
	// Interval between passes over the ranges the node leads (default 2s). A key is removed within
	// about Interval plus a pass's duration after it expires.
	Interval time.Duration
	// DeletesPerSecond bounds the node's expired-key deletions (default 20 000).
	DeletesPerSecond int
	// ScannedPerSecond bounds the stored values a pass reads (default 2 000 000).
	ScannedPerSecond int
	// Batch is the number of deletions per raft proposal (default 1024).
	Batch int
	// Off disables the sweeper (expired keys stay hidden but keep their space).
	Off bool
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = 2 * time.Second
	}
	if c.DeletesPerSecond <= 0 {
		c.DeletesPerSecond = 20000
	}
	if c.ScannedPerSecond <= 0 {
		c.ScannedPerSecond = 2000000
	}
	if c.Batch <= 0 {
		c.Batch = 1024
	}
	return c
}

// Stats counts the sweeper's work since start. Skipped counts the ranges a pass did not read: no
// write applied since their last sweep and none of their keys due to expire.
type Stats struct {
	Passes, Scanned, Deleted, Skipped uint64
}

// Sweeper is one node's expiry sweeper.
type Sweeper struct {
	cfg   Config
	eng   *storage.Engine
	store func() *replica.Store
	log   *slog.Logger
	stop  *stopper.Stopper
	// The pace: the earliest time the next deletions and the next scanned values may start. Only the
	// sweeper's goroutine uses them.
	nextDelete, nextScan time.Time

	passes, scanned, deleted, skipped atomic.Uint64
	// swept remembers, per range, what its last complete sweep saw (only the sweeper's goroutine
	// uses it): a range whose data has not changed since and whose next expiry has not come is not
	// read again.
	swept map[uint64]sweptState
}

// sweptState is what a range's last complete sweep saw: the range's generation and applied index
// before it read, and the earliest expiry of the keys it left (0: none expires).
type sweptState struct {
	generation, applied uint64
	nextExpiryMs        int64
}

// unchanged reports whether a sweep of r now would find what the last one found: nothing has been
// applied to the range since (its data is as it was) and no key it left has expired yet.
func (w sweptState) unchanged(generation, applied uint64, nowMs int64) bool {
	return w.generation == generation && w.applied == applied && (w.nextExpiryMs == 0 || nowMs < w.nextExpiryMs)
}

// New prepares a sweeper over the node's engine and replica store; nothing runs until Start.
func New(cfg Config, eng *storage.Engine, store func() *replica.Store, log *slog.Logger) *Sweeper {
	return &Sweeper{cfg: cfg.WithDefaults(), eng: eng, store: store, log: log, stop: stopper.New(), swept: map[uint64]sweptState{}}
}

// Start runs the passes until Stop.
func (s *Sweeper) Start() {
	if s.cfg.Off {
		return
	}
	s.stop.Every(s.cfg.Interval, s.pass)
}

// Stop ends the passes and waits for the one running.
func (s *Sweeper) Stop() { s.stop.Stop() }

// Stats reports the work done so far.
func (s *Sweeper) Stats() Stats {
	return Stats{Passes: s.passes.Load(), Scanned: s.scanned.Load(), Deleted: s.deleted.Load(), Skipped: s.skipped.Load()}
}

func (s *Sweeper) pass(ctx context.Context) {
	st := s.store()
	if st == nil {
		return
	}
	s.passes.Add(1)
	led := map[uint64]bool{}
	for _, r := range st.Replicas() {
		if ctx.Err() != nil {
			return
		}
		if r.IsMeta() || !r.IsLeader() {
			continue
		}
		led[r.RangeID()] = true
		d := r.Desc()
		if d == nil {
			continue
		}
		// Read before the sweep's iterator: a write applied while it reads changes it.
		gen, applied := d.GetGeneration(), r.Applied()
		if w, ok := s.swept[r.RangeID()]; ok && w.unchanged(gen, applied, r.ClockMs()) {
			s.skipped.Add(1)
			continue
		}
		delete(s.swept, r.RangeID())
		next, err := s.sweepRange(ctx, r)
		if err != nil {
			if ctx.Err() == nil {
				// A split, a lost leadership or a full proposal queue: the next pass tries again.
				s.log.Debug("expiry sweep of a range stopped", "range", r.RangeID(), "err", err)
			}
			continue
		}
		s.swept[r.RangeID()] = sweptState{generation: gen, applied: applied, nextExpiryMs: next}
	}
	for id := range s.swept {
		if !led[id] {
			delete(s.swept, id) // no longer led here (or gone): swept afresh if led again
		}
	}
}

// sweepRange deletes the expired keys of r, Batch per proposal, at the configured pace. It returns
// the earliest expiry of the keys it left (0: none expires).
func (s *Sweeper) sweepRange(ctx context.Context, r *replica.Replica) (nextExpiryMs int64, err error) {
	d := r.Desc()
	if d == nil {
		return 0, nil
	}
	lo, hi := storage.DataSpan(false, d.StartKey, d.EndKey)
	it, err := s.eng.NewIter(lo, hi)
	if err != nil {
		return 0, fmt.Errorf("sweep r%d: %w", r.RangeID(), err)
	}
	defer it.Close()
	now := r.ClockMs()
	p := &proposer{s: s, r: r, inflight: make(chan struct{}, maxInFlight)}
	defer p.wg.Wait()
	var ops []*pb.TxnOp
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%1024 == 0 {
			if !s.pace(ctx, &s.nextScan, 1024, s.cfg.ScannedPerSecond) {
				return 0, ctx.Err()
			}
			s.scanned.Add(1024)
		}
		v, err := stored.Decode(it.Value())
		if err != nil {
			continue // a corrupt value is the read path's to report, not the sweeper's to delete
		}
		if !v.ExpiredAt(now) {
			if v.ExpireAtMs != 0 && (nextExpiryMs == 0 || v.ExpireAtMs < nextExpiryMs) {
				nextExpiryMs = v.ExpireAtMs
			}
			continue
		}
		key := append([]byte(nil), storage.StripDataPrefix(it.Key())...)
		ops = append(ops, &pb.TxnOp{Type: pb.TxnOp_DELETE, Key: key, OnlyExpired: true})
		if len(ops) >= s.cfg.Batch {
			if err := p.propose(ctx, ops); err != nil {
				return 0, err
			}
			ops = nil
		}
	}
	s.scanned.Add(uint64(n % 1024))
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("sweep r%d: %w", r.RangeID(), err)
	}
	if err := p.propose(ctx, ops); err != nil {
		return 0, err
	}
	p.wg.Wait()
	if e := p.failed.Load(); e != nil {
		return 0, *e
	}
	return nextExpiryMs, nil
}

// proposer proposes one range's sweep deletions, up to maxInFlight at once; the first failure
// stops it.
type proposer struct {
	s        *Sweeper
	r        *replica.Replica
	inflight chan struct{}
	wg       sync.WaitGroup
	failed   atomic.Pointer[error]
}

// propose proposes the deletion of ops at the sweeper's pace, without waiting for it to apply.
func (p *proposer) propose(ctx context.Context, ops []*pb.TxnOp) error {
	if len(ops) == 0 {
		return nil
	}
	if !p.s.pace(ctx, &p.s.nextDelete, len(ops), p.s.cfg.DeletesPerSecond) {
		return ctx.Err()
	}
	select {
	case p.inflight <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	if e := p.failed.Load(); e != nil {
		<-p.inflight
		return *e
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer func() { <-p.inflight }()
		if err := p.s.delete(ctx, p.r, ops); err != nil {
			p.failed.CompareAndSwap(nil, &err)
		}
	}()
	return nil
}

// maxInFlight bounds a range's sweep proposals waiting for raft at once.
const maxInFlight = 4

// delete proposes the deletion of ops' keys, each only if still expired.
func (s *Sweeper) delete(ctx context.Context, r *replica.Replica, ops []*pb.TxnOp) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := r.Propose(pctx, &pb.Command{Txn: &pb.TxnRequest{Success: ops}})
	if err != nil {
		return err
	}
	for _, o := range res.Txn.GetResults() {
		if o.Applied {
			s.deleted.Add(1)
		}
	}
	return nil
}

// pace waits until *next, then moves *next on by the time n units take at perSecond (from now if
// it lies in the past: idle time is not saved up). The work between two calls counts toward the
// budget, so a proposal's own latency is not added to the pace. It reports false when stopping.
func (s *Sweeper) pace(ctx context.Context, next *time.Time, n, perSecond int) bool {
	now := time.Now()
	if wait := next.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		now = *next
	}
	*next = now.Add(time.Duration(n) * time.Second / time.Duration(perSecond))
	return ctx.Err() == nil
}
