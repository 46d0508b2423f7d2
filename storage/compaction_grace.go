package storage

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// refillGraceMinBytes is the least output of a compaction that starts a refill grace: a smaller one
// rewrote too few blocks for their misses to matter.
const refillGraceMinBytes = 1 << 20

// grantTick is how often the scheduler re-samples Pebble's allowed concurrency and grants waiting
// compactions (Pebble's own scheduler uses the same period): a hold ends within one tick of its time.
const grantTick = 100 * time.Millisecond

// graceScheduler is the engine's Pebble CompactionScheduler when Options.CompactionRefillGrace is
// set (docs/design/compaction-refill-grace.md): Pebble's default concurrency limit, plus a hold of
// the next compaction for the grace after a compaction that rewrote data ends, so that the disk
// serves the misses of the cold new tables before the next compaction's I/O queues ahead of them.
//
// Invariant: the hold never applies while Pebble allows more than one compaction (L0 or the
// compaction debt is backing up): the LSM's health comes before the cache's refill.
//
// Locking follows Pebble's ConcurrencyLimitScheduler: mu is never held across Schedule or
// GetWaitingCompaction (they take the DB's mutex, and Pebble calls TrySchedule with it held), and
// granting is serialized by the granting flag.
type graceScheduler struct {
	grace time.Duration
	now   func() time.Time

	db pebble.DBForCompaction // set once in Register, before any other call

	mu           sync.Mutex
	running      int
	unregistered bool
	granting     bool
	grantingDone *sync.Cond
	holdUntil    time.Time
	// holding is true from the first grant refused for the hold until the next grant or the hold's
	// end; heldSince is that refusal's time.
	holding   bool
	heldSince time.Time
	holds     int64
	heldFor   time.Duration

	quit     chan struct{}
	quitOnce sync.Once
	poke     chan struct{}
	done     chan struct{} // closed when the granter has stopped (or was never started by Register)
	started  bool          // Register ran (guarded by mu)
	// noGranter leaves the periodic granter off (tests grant by hand).
	noGranter bool
}

var _ pebble.CompactionScheduler = (*graceScheduler)(nil)

func newGraceScheduler(grace time.Duration, now func() time.Time) *graceScheduler {
	s := &graceScheduler{grace: grace, now: now, quit: make(chan struct{}), poke: make(chan struct{}, 1), done: make(chan struct{})}
	s.grantingDone = sync.NewCond(&s.mu)
	return s
}

// Register is called once by the DB when it opens; the granter goroutine it starts is stopped by
// Unregister, which the DB calls when it closes.
func (s *graceScheduler) Register(_ int, db pebble.DBForCompaction) {
	s.db = db
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
	if s.noGranter {
		close(s.done)
		return
	}
	go s.granter(time.NewTicker(grantTick))
}

func (s *graceScheduler) Unregister() {
	s.quitOnce.Do(func() { close(s.quit) })
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unregistered = true
	for s.granting {
		s.grantingDone.Wait()
	}
}

// abandon stops the granter of a DB whose Open failed after Register: Pebble then never calls
// Unregister. A no-op when Register did not run.
func (s *graceScheduler) abandon() {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started {
		s.Unregister()
	}
}

func (s *graceScheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unregistered {
		return false, nil
	}
	allowed := s.db.GetAllowedWithoutPermission()
	if allowed <= s.running || s.heldLocked(allowed) {
		return false, nil
	}
	s.running++
	return true, s
}

// heldLocked reports whether a grant must wait for the refill grace, and keeps the hold's counters.
func (s *graceScheduler) heldLocked(allowed int) bool {
	now := s.now()
	if allowed > 1 || !now.Before(s.holdUntil) {
		s.endHoldLocked(now)
		return false
	}
	if !s.holding {
		s.holding, s.heldSince = true, now
		s.holds++
	}
	return true
}

func (s *graceScheduler) endHoldLocked(now time.Time) {
	if !s.holding {
		return
	}
	s.holding = false
	if now.After(s.holdUntil) {
		now = s.holdUntil
	}
	if d := now.Sub(s.heldSince); d > 0 {
		s.heldFor += d
	}
}

func (s *graceScheduler) Started()                                          {}
func (s *graceScheduler) MeasureCPU(pebble.CompactionGoroutineKind)         {}
func (s *graceScheduler) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done is called when a granted compaction finishes (after the engine's CompactionEnd event, so a
// grace it starts is already set).
func (s *graceScheduler) Done() {
	s.mu.Lock()
	s.running--
	s.tryGrantLockedAndUnlock()
}

func (s *graceScheduler) UpdateGetAllowedWithoutPermission() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// compactionEnded starts a grace after a compaction that wrote new tables from at least
// refillGraceMinBytes (called from the engine's CompactionEnd event).
func (s *graceScheduler) compactionEnded(info pebble.CompactionInfo) {
	if info.Err != nil || !RewritesData(info.Reason) {
		return
	}
	var out uint64
	for _, t := range info.Output.Tables {
		out += t.Size
	}
	if out < refillGraceMinBytes {
		return
	}
	s.mu.Lock()
	if until := s.now().Add(s.grace); until.After(s.holdUntil) {
		s.holdUntil = until
	}
	s.mu.Unlock()
}

// counters returns the holds so far and the time compactions waited in them.
func (s *graceScheduler) counters() (holds int64, heldFor time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	heldFor = s.heldFor
	if s.holding {
		now := s.now()
		if now.After(s.holdUntil) {
			now = s.holdUntil
		}
		heldFor += now.Sub(s.heldSince)
	}
	return s.holds, heldFor
}

// tryGrantLockedAndUnlock grants waiting compactions up to the allowed concurrency unless the
// grace holds them. Called with mu held; returns with it released.
func (s *graceScheduler) tryGrantLockedAndUnlock() {
	defer s.mu.Unlock()
	for s.granting && !s.unregistered {
		s.grantingDone.Wait()
	}
	if s.unregistered {
		return
	}
	allowed := s.db.GetAllowedWithoutPermission()
	toGrant := allowed - s.running
	if toGrant <= 0 || s.heldLocked(allowed) {
		return
	}
	s.granting = true
	s.mu.Unlock()
	for ; toGrant > 0; toGrant-- {
		if waiting, _ := s.db.GetWaitingCompaction(); !waiting || !s.db.Schedule(s) {
			break
		}
		s.mu.Lock()
		s.running++
		s.mu.Unlock()
	}
	s.mu.Lock()
	s.granting = false
	s.grantingDone.Broadcast()
}

// granter re-samples the allowed concurrency and grants what waits, every tick and when poked: a
// compaction refused during a hold is granted here once the hold ends (Pebble does not ask again
// while one waits).
func (s *graceScheduler) granter(tick *time.Ticker) {
	defer close(s.done)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-s.poke:
		case <-s.quit:
			return
		}
		s.mu.Lock()
		s.tryGrantLockedAndUnlock()
	}
}
