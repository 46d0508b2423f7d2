package jobs

import (
	"bytes"
	"context"
	"maps"
	"math"
	"sync"
	"time"

	"github.com/shoaldb/shoal/pb"
)

// Copies of spans for the runs to read instead of the disk. Pebble's block cache cannot pin a block:
// a span read ahead into it would be evicted by the foreground's reads before its run (the very
// behaviour that makes naive caching evict the hot set, the other way round). So a copy is held by
// the scheduler, beside the engine, in a budget of its own (Config.CacheBytes per node whose disk the
// copy came from): the rows of one piece as a prefetch or a keeping run read them, released once every
// run planned to read it has, or at its planned release time. The copy holds the rows as the read saw
// them: a run served from it sees the span as of its prefetch, at most one period before its due time
// (plan/prefetch never reads a copy ahead further), as a run reading on demand sees each page at its
// own time.

// copyEntry is one held copy: the rows of [piece.start, upTo).
type copyEntry struct {
	piece   piece
	rows    []*pb.KeyValue
	bytes   int64
	upTo    []byte
	done    bool
	release time.Time
	cancel  context.CancelFunc // the prefetch filling it (nil for a run's kept copy)
	rate    float64            // the prefetch's bytes/s (0 for a run's kept copy)
}

// sideCache holds the copies; one per scheduler. A copy is held until its release time, the end of
// the last run planned to read it, as plan/prefetch's model holds it (so the plan's cache budget is
// what the copies take); runs do not release it earlier, as a re-plan may add a reader.
type sideCache struct {
	mu     sync.Mutex
	budget int64
	used   map[uint64]int64 // by the node the copies came from
	m      map[string]*copyEntry
	// started remembers the copies begun (until their release), so that a copy read and released is
	// not fetched again.
	started map[string]time.Time
	// read counts the bytes the jobs read from each node's disk (runs and prefetches): the part of a
	// node's busy disk that is the jobs' own, not the foreground's.
	read map[uint64]int64
	// bySource splits read by who read: prefetches and runs (the scenario's per-second account).
	bySource map[uint64]DiskReads
	mark     map[uint64]rateMark
	// load marks each node's reported disk reads, for their rate.
	load map[uint64]rateMark
	// readers counts the runs reading each copy now: a copy is not released under them.
	readers map[string]int
	// runs are the runs reading from disk now, by run: the next plan's base load beside the
	// prefetches still filling.
	runs map[string]diskRun
	// short counts why a run read from disk what its plan served from a copy (ShortReasons).
	short map[string]uint64
}

// diskRun is a run reading a piece from disk: the rest of it at its rate.
type diskRun struct {
	node       uint64
	rate, left float64 // bytes/s, bytes
}

// Why a run read from disk what its plan served from a copy (Stats.CopiesShort): its copy was dropped
// over the budget (shortBudget), its prefetch failed (shortFailed), the run keeping it failed
// (shortKeeper), it was released unfinished (shortReleased), the run found it gone (shortGone), or
// the copy stopped growing and the run gave up on it (shortStalled).
const (
	shortBudget   = "budget"
	shortFailed   = "prefetch_failed"
	shortKeeper   = "keeper_failed"
	shortReleased = "released_unfinished"
	shortGone     = "gone"
	shortStalled  = "stalled"
)

type rateMark struct {
	bytes int64
	at    time.Time
	rate  float64
}

func newSideCache(budget int64) *sideCache {
	return &sideCache{budget: budget, used: map[uint64]int64{}, m: map[string]*copyEntry{}, started: map[string]time.Time{},
		read: map[uint64]int64{}, bySource: map[uint64]DiskReads{}, mark: map[uint64]rateMark{}, load: map[uint64]rateMark{},
		readers: map[string]int{}, runs: map[string]diskRun{}, short: map[string]uint64{}}
}

// begin reserves a copy under key unless one was begun already.
func (c *sideCache) begin(key string, p piece, release time.Time, cancel context.CancelFunc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.started[key]; ok {
		return false
	}
	c.started[key] = release
	c.m[key] = &copyEntry{piece: p, upTo: p.start, release: release, cancel: cancel}
	return true
}

// setRate records the rate the prefetch filling the copy under key reads at.
func (c *sideCache) setRate(key string, rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		e.rate = rate
	}
}

// inFlight is the disk bandwidth node's prefetches still filling, and the runs reading from its disk
// now, take in each of the next slots (bytes/s): each at its rate until the rest of its piece is read
// at it. A plan made from now does not see them (their runs started, or are carried over, out of its
// window), yet they read beside what it plans — a run whose copy was cut short reads the rest at up to
// its job's rate — so it gets them as its base load and plans its own prefetches around them.
func (c *sideCache) inFlight(node uint64, slot time.Duration, slots int) []float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []float64
	add := func(rate, bytes float64) {
		left := max(0, bytes) / rate // seconds
		n := min(slots, int(math.Ceil(left/slot.Seconds())))
		for len(out) < n {
			out = append(out, 0)
		}
		for t := 0; t < n; t++ {
			// The last slot only for the part of it still read.
			out[t] += rate * min(1, left/slot.Seconds()-float64(t))
		}
	}
	for _, e := range c.m {
		if e.piece.node == node && !e.done && e.cancel != nil && e.rate > 0 {
			add(e.rate, e.piece.size-float64(e.bytes))
		}
	}
	for _, r := range c.runs {
		if r.node == node && r.rate > 0 {
			add(r.rate, r.left)
		}
	}
	return out
}

// reading records that run reads from node's disk at rate, left bytes of its piece still to read
// (none: it no longer does).
func (c *sideCache) reading(run string, node uint64, rate, left float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if left <= 0 || rate <= 0 {
		delete(c.runs, run)
		return
	}
	c.runs[run] = diskRun{node: node, rate: rate, left: left}
}

// follow and unfollow count a run reading the copy under key: sweep keeps it while one does.
func (c *sideCache) follow(key string) {
	c.mu.Lock()
	c.readers[key]++
	c.mu.Unlock()
}

func (c *sideCache) unfollow(key string) {
	c.mu.Lock()
	if c.readers[key]--; c.readers[key] <= 0 {
		delete(c.readers, key)
	}
	c.mu.Unlock()
}

// fellShort counts a run reading from disk what its plan served from a copy, for why.
func (c *sideCache) fellShort(why string) {
	c.mu.Lock()
	c.short[why]++
	c.mu.Unlock()
}

// shortCounts copies the counts of fellShort and of the copies cut short, by why.
func (c *sideCache) shortCounts() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.short)
}

// add appends the rows of a page (those inside the copy's piece) and says whether the copy still
// fits the budget; a copy that does not is dropped whole.
func (c *sideCache) add(key string, kvs []*pb.KeyValue, upTo []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if e == nil {
		return false
	}
	var n int64
	for _, kv := range kvs {
		if e.piece.holds(kv.Key) {
			e.rows = append(e.rows, kv)
			n += int64(len(kv.Key) + len(kv.Value))
		}
	}
	if c.used[e.piece.node]+n > c.budget {
		c.short[shortBudget]++
		c.dropLocked(key)
		return false
	}
	e.bytes += n
	c.used[e.piece.node] += n
	e.upTo = upTo
	return true
}

// finish marks a copy complete.
func (c *sideCache) finish(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		e.done, e.upTo, e.cancel = true, e.piece.end, nil
	}
}

// peek hands a run the copy under key as it is now: its rows, how far they go and whether it is
// complete (ok false: no such copy, or dropped). A copy still being read keeps being read: its run
// follows it (fromCopy) rather than reading the rest from the disk too.
func (c *sideCache) peek(key string) (rows []*pb.KeyValue, upTo []byte, done, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if e == nil {
		return nil, nil, false, false
	}
	return e.rows, e.upTo, e.done, true
}

// drop stops and drops the copy under key (a prefetch that failed or was stopped: a copy is whole
// or nothing), counting why.
func (c *sideCache) drop(key, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil && !e.done {
		if e.cancel != nil {
			e.cancel()
		}
		c.short[why]++
		c.dropLocked(key)
	}
}

// extend moves a copy's release later when a re-plan has a run read it later.
func (c *sideCache) extend(key string, release time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil && release.After(e.release) {
		e.release = release
	}
}

// begun reports whether a copy under key was begun (and not yet forgotten).
func (c *sideCache) begun(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.started[key]
	return ok
}

// sweep releases the copies past their release time, and forgets begun copies long released. A copy
// a run still reads is kept (and its prefetch goes on) until the run is done: a run that started or
// read late would otherwise read the rest from disk, a read no plan has.
func (c *sideCache) sweep(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if !e.release.IsZero() && now.After(e.release) && c.readers[k] == 0 {
			if e.cancel != nil {
				e.cancel()
			}
			if !e.done {
				c.short[shortReleased]++
			}
			c.dropLocked(k)
		}
	}
	for k, rel := range c.started {
		if _, held := c.m[k]; !held && now.Sub(rel) > time.Hour {
			delete(c.started, k)
		}
	}
}

func (c *sideCache) dropLocked(key string) {
	if e := c.m[key]; e != nil {
		c.used[e.piece.node] -= e.bytes
		delete(c.m, key)
	}
}

// heldFor is what node's copies hold in each of horizon slots from now, of those a plan made from now
// does not see: copies whose first run is due before now (their items began before its window) and
// those carried runs read (their runs are left out of it). Each holds its bytes (a carried copy still
// filling, its whole size) until the slot of its release, at least the first, and its room is the
// plan's after that; one without a release time or that a run reads now, all along. Each slot's sum
// is at most budget.
func (c *sideCache) heldFor(node uint64, now time.Time, carried map[runKey]string, slot time.Duration, horizon int) []float64 {
	keys := map[string]bool{}
	for _, k := range carried {
		keys[k] = true
	}
	held := make([]float64, horizon)
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		var b int64
		switch {
		case e.piece.node != node:
			continue
		case keys[k]:
			b = max(e.bytes, int64(e.piece.size))
		case copyFirstDue(k).Before(now):
			b = e.bytes
		default:
			continue
		}
		until := min(horizon, max(1, int(math.Ceil(float64(e.release.Sub(now))/float64(slot)))))
		if e.release.IsZero() || c.readers[k] > 0 {
			until = horizon // sweep keeps it: no release time, or a run reads it still
		}
		for t := range until {
			held[t] += float64(b)
		}
	}
	for t := range held {
		held[t] = min(held[t], float64(c.budget))
	}
	return held
}

// held is the bytes the copies hold now, over every node.
func (c *sideCache) held() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, u := range c.used {
		n += u
	}
	return n
}

// noteRead counts bytes the jobs read from node's disk, by a prefetch or else by a run.
func (c *sideCache) noteRead(node uint64, n int64, prefetch bool) {
	c.mu.Lock()
	c.read[node] += n
	d := c.bySource[node]
	if prefetch {
		d.Prefetch += uint64(n)
	} else {
		d.Run += uint64(n)
	}
	c.bySource[node] = d
	c.mu.Unlock()
}

// diskReads copies the per-node counts of the jobs' disk reads.
func (c *sideCache) diskReads() map[uint64]DiskReads {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.bySource)
}

// rate is the bytes/s the jobs read from node's disk since the previous call at least a second ago.
func (c *sideCache) rate(node uint64, now time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, cur := c.mark[node], c.read[node]
	if dt := now.Sub(m.at).Seconds(); !m.at.IsZero() && dt < 1 {
		return m.rate
	} else if !m.at.IsZero() {
		m.rate = float64(cur-m.bytes) / dt
	}
	m.bytes, m.at = cur, now
	c.mark[node] = m
	return m.rate
}

// loadRate is the bytes/s of a node's reported cumulative disk reads since the mark at least a
// second before.
func (c *sideCache) loadRate(node uint64, cur uint64, now time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.load[node]
	if dt := now.Sub(m.at).Seconds(); !m.at.IsZero() && dt < 1 {
		return m.rate
	} else if !m.at.IsZero() && int64(cur) >= m.bytes {
		m.rate = float64(int64(cur)-m.bytes) / dt
	}
	m.bytes, m.at = int64(cur), now
	c.load[node] = m
	return m.rate
}

func (s *Service) jobRate(node uint64, now time.Time) float64 { return s.copies.rate(node, now) }

// startFetches begins the plan's prefetches whose time has come.
func (s *Service) startFetches(ctx context.Context, ep *execPlan, now time.Time) {
	for _, f := range ep.fetches {
		if now.Before(f.start) || !now.Before(f.end) || (ep.wanted != nil && !ep.wanted[f.key]) {
			continue
		}
		fctx, cancel := context.WithCancel(ctx)
		if !s.copies.begin(f.key, f.piece, ep.release[f.key], cancel) {
			cancel()
			continue
		}
		// At the planned rate even when begun late (by up to a tick): a faster read would put the
		// disk above the plan; a run that finds its copy short waits for it (fromCopy).
		rate := f.rate
		s.copies.setRate(f.key, rate)
		s.prefetches.Add(1)
		s.stop.Go(func(context.Context) {
			defer cancel()
			s.fetch(fctx, f.key, f.piece, int64(rate))
		})
	}
}

// fetch reads piece p into the copy under key at rate, on the range's leader, in pages of about
// chunkTime at that rate and at most prefetchBurst of its disk, in its node's disk turn (pace.go).
func (s *Service) fetch(ctx context.Context, key string, p piece, rate int64) {
	pace := newPacer(rate, s.cfg.PageRows)
	pace.maxBytes, pace.phase = float64(s.cfg.DiskBytesPerSec)*prefetchBurst.Seconds(), phaseOf(key)
	cursor := bytes.Clone(p.start)
	var read int64
	for {
		began := time.Now()
		resp, desc, err := s.turnPage(ctx, p.node, cursor, p.end, pace.rows())
		if err != nil {
			s.copies.drop(key, shortFailed)
			return
		}
		n := int64(0)
		for _, kv := range resp.Kvs {
			n += int64(len(kv.Key) + len(kv.Value))
		}
		read += n
		s.copies.noteRead(p.node, n, true)
		s.prefetchBytes.Add(uint64(n))
		next := desc.EndKey
		if resp.Truncated && len(resp.Kvs) > 0 {
			next = append(bytes.Clone(resp.Kvs[len(resp.Kvs)-1].Key), 0)
		}
		if !s.copies.add(key, resp.Kvs, next) {
			return
		}
		if !resp.Truncated && (len(desc.EndKey) == 0 || (len(p.end) > 0 && bytes.Compare(desc.EndKey, p.end) >= 0)) {
			s.copies.finish(key)
			s.mu.Lock()
			s.sizes[p.id] = float64(read)
			s.mu.Unlock()
			return
		}
		cursor = bytes.Clone(next)
		if err := pace.wait(ctx, began, n, len(resp.Kvs)); err != nil {
			s.copies.drop(key, shortFailed)
			return
		}
	}
}
