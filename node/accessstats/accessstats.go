// Package accessstats keeps one node's per-range access statistics for the resource-usage model
// (plan/usage, docs/design/usage.md): the point reads measured by the blocks they loaded and how many
// the block cache served alone, the rows and blocks scans read, and each range's block-access
// histogram — how many of its blocks are read how often — which Che's approximation turns into the
// hit ratio of any set of ranges sharing a cache (Cruz's thesis §6.1 kept the same histogram per
// region in HBase).
//
// The hot path is a counter and a modulo: one point read in SampleEvery is measured (an iterator
// instead of a plain get) and its key kept; the keys are placed in block-sized slots of the range's
// span only when a report is made, off the read path. It owns those statistics only: it never reads
// or writes a range's data itself (the node gives it the key offsets), and never decides anything.
package accessstats

import (
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/shoaldb/shoal/plan/usage"
	"github.com/shoaldb/shoal/storage"
)

// Config configures a Tracker; zero fields take their defaults.
type Config struct {
	// SampleEvery: one point read in this many is measured and its key placed in the histogram.
	// Default 16.
	SampleEvery uint64
	// MaxKeys bounds the sampled keys a range keeps between two reports. Default 256.
	MaxKeys int
	// Window is how much history a histogram describes: between one and two windows of reads (the
	// current one and the one before). Default 60 s.
	Window time.Duration
	// MaxSlots bounds the block slots a range remembers (the least read are forgotten first).
	// Default 8192.
	MaxSlots int
}

func (c Config) withDefaults() Config {
	if c.SampleEvery == 0 {
		c.SampleEvery = 16
	}
	if c.MaxKeys <= 0 {
		c.MaxKeys = 256
	}
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.MaxSlots <= 0 {
		c.MaxSlots = 8192
	}
	return c
}

// Tracker keeps the statistics of every range of a node. It implements replica.AccessRecorder; safe
// for concurrent use.
type Tracker struct {
	cfg    Config
	mu     sync.RWMutex
	ranges map[uint64]*rangeStats
}

// New returns an empty tracker.
func New(cfg Config) *Tracker {
	return &Tracker{cfg: cfg.withDefaults(), ranges: map[uint64]*rangeStats{}}
}

// rangeStats is one range's window counters (since its last report) and its decayed block counts.
type rangeStats struct {
	mu sync.Mutex
	// The window.
	measured, hits       uint64
	pointBytes, pointHit uint64
	scans, scanRows      uint64
	scanBytes, scanHit   uint64
	keys                 [][]byte
	// The history: two epochs of Window each (the current one and the one before), each with its
	// block slots' sample counts, the samples placed, the point reads and the seconds it covers.
	cur, prev epoch
	last      time.Time
}

// epoch is one stretch of a range's history.
type epoch struct {
	slots          map[uint64]uint32
	samples, reads float64
	secs           float64
}

func (t *Tracker) stats(rangeID uint64) *rangeStats {
	t.mu.RLock()
	s := t.ranges[rangeID]
	t.mu.RUnlock()
	if s != nil {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s = t.ranges[rangeID]; s == nil {
		s = &rangeStats{cur: epoch{slots: map[uint64]uint32{}}}
		t.ranges[rangeID] = s
	}
	return s
}

// SampleRead implements replica.AccessRecorder: every SampleEvery-th read is measured.
func (t *Tracker) SampleRead(_, n uint64) bool { return n%t.cfg.SampleEvery == 0 }

// PointRead implements replica.AccessRecorder.
func (t *Tracker) PointRead(rangeID uint64, key []byte, st storage.BlockStats) {
	s := t.stats(rangeID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.measured++
	if st.Hit() {
		s.hits++
	}
	s.pointBytes += st.Bytes
	s.pointHit += st.InCache
	if len(s.keys) < t.cfg.MaxKeys {
		s.keys = append(s.keys, append([]byte(nil), key...))
	}
}

// Scanned implements replica.AccessRecorder.
func (t *Tracker) Scanned(rangeID uint64, rows int, st storage.BlockStats) {
	s := t.stats(rangeID)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scans++
	s.scanRows += uint64(rows)
	s.scanBytes += st.Bytes
	s.scanHit += st.InCache
}

// Forget drops a range's statistics (its replica left the node).
func (t *Tracker) Forget(rangeID uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.ranges, rangeID)
}

// Retain drops the statistics of every range keep rejects.
func (t *Tracker) Retain(keep func(rangeID uint64) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.ranges {
		if !keep(id) {
			delete(t.ranges, id)
		}
	}
}

// Input is what the node knows of a range when it reports: its point reads since the previous
// report (the replica's counter, scans excluded), its size, the engine's block size, and where a key
// lies in its span (storage.Engine.Offset from the span's start).
type Input struct {
	PointReads uint64
	Bytes      uint64
	BlockBytes int
	Offset     func(key []byte) (uint64, error)
}

// Report is one range's statistics over the window since its previous report.
type Report struct {
	// Measured point reads and those whose blocks all came from the cache; the bytes of their
	// blocks and the part in the cache.
	Measured, Hits       uint64
	PointBytes, PointHit uint64
	// Scans, the rows they returned, and the blocks they loaded (bytes / block size) per second.
	ScanRowsQPS, ScanBlocksQPS float64
	// Hist is the range's block-access histogram (reads per second per block).
	Hist usage.Histogram
}

// Take ends rangeID's window at now and returns its report. Only one caller (the heartbeat loop) may
// take reports: the window is its own.
func (t *Tracker) Take(rangeID uint64, in Input, now time.Time) Report {
	s := t.stats(rangeID)
	s.mu.Lock()
	r := Report{Measured: s.measured, Hits: s.hits, PointBytes: s.pointBytes, PointHit: s.pointHit}
	scanRows, scanBytes := s.scanRows, s.scanBytes
	keys := s.keys
	s.measured, s.hits, s.pointBytes, s.pointHit = 0, 0, 0, 0
	s.scans, s.scanRows, s.scanBytes, s.scanHit = 0, 0, 0, 0
	s.keys = nil
	last := s.last
	s.mu.Unlock()
	// Placing the keys reads the engine's table indexes: outside the lock the read path takes.
	slots := make([]uint64, 0, len(keys))
	bb := uint64(max(in.BlockBytes, 1))
	for _, k := range keys {
		if off, err := in.Offset(k); err == nil {
			slots = append(slots, off/bb)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dt := 0.0
	if !last.IsZero() {
		dt = now.Sub(last).Seconds()
	}
	s.last = now
	if dt > 0 {
		r.ScanRowsQPS = float64(scanRows) / dt
		r.ScanBlocksQPS = float64(scanBytes) / float64(bb) / dt
	}
	if s.cur.secs >= t.cfg.Window.Seconds() {
		s.prev, s.cur = s.cur, epoch{slots: make(map[uint64]uint32, len(s.cur.slots))}
	}
	for _, sl := range slots {
		if s.cur.slots[sl] == 0 && len(s.cur.slots) >= t.cfg.MaxSlots {
			continue // bounded: the sample still counts, its slot joins the unseen
		}
		s.cur.slots[sl]++
	}
	s.cur.samples += float64(len(slots))
	s.cur.reads += float64(in.PointReads)
	s.cur.secs += dt
	all := s.cur.slots
	if len(s.prev.slots) > 0 {
		all = maps.Clone(s.cur.slots)
		for k, c := range s.prev.slots {
			all[k] += c
		}
	}
	r.Hist = histogram(all, s.cur.samples+s.prev.samples, s.cur.reads+s.prev.reads, s.cur.secs+s.prev.secs,
		float64(in.Bytes)/float64(bb))
	return r
}

// histogram turns slot counts into block-access buckets: samples/reads/secs give the share of the
// range's point reads each slot received and their rate. A slot's count is a noisy estimate of its
// rate, and the noise biases Che's approximation (the lucky tail blocks look hotter than they are and
// take cache room); counts seen by many slots are replaced by Good–Turing's (r+1)·N(r+1)/N(r), which
// is the mean rate of the slots seen r times. The blocks never sampled (of the range's blocks in
// all) share the mass Good–Turing gives the unseen, N(1)/samples. Slots group by rate in
// half-octaves, each bucket at its mean rate, so the histogram stays small whatever the range's size.
func histogram(slots map[uint64]uint32, samples, reads, secs, blocks float64) usage.Histogram {
	if secs <= 0 || reads <= 0 {
		return nil
	}
	rate := reads / secs
	blocks = math.Max(math.Max(blocks, float64(len(slots))), 1)
	if samples <= 0 || len(slots) == 0 {
		return usage.Histogram{{Rate: rate / blocks, Blocks: blocks}}
	}
	freq := map[uint32]float64{} // N(r): slots seen r times
	for _, c := range slots {
		freq[c]++
	}
	smooth := func(c uint32) float64 {
		if freq[c] >= minSlotsForGT && freq[c+1] >= minSlotsForGT {
			return float64(c+1) * freq[c+1] / freq[c]
		}
		return float64(c)
	}
	unseen := blocks - float64(len(slots))
	p0 := 0.0
	if unseen >= 1 {
		p0 = math.Min(freq[1]/samples, 1)
	}
	seen := 0.0
	for c, n := range freq {
		seen += smooth(c) * n
	}
	type acc struct{ rate, blocks float64 }
	byBand := map[int]*acc{}
	for c, n := range freq {
		r := smooth(c) / seen * rate * (1 - p0)
		if r <= 0 {
			continue
		}
		band := int(math.Floor(2 * math.Log2(r)))
		a := byBand[band]
		if a == nil {
			a = &acc{}
			byBand[band] = a
		}
		a.rate += r * n
		a.blocks += n
	}
	bands := make([]int, 0, len(byBand))
	for b := range byBand {
		bands = append(bands, b)
	}
	slices.Sort(bands)
	var h usage.Histogram
	for i := len(bands) - 1; i >= 0; i-- {
		a := byBand[bands[i]]
		h = append(h, usage.Bucket{Rate: a.rate / a.blocks, Blocks: a.blocks})
	}
	if p0 > 0 {
		h = append(h, usage.Bucket{Rate: p0 * rate / unseen, Blocks: unseen})
	}
	return h
}

// minSlotsForGT is how many slots must share a count, and the count above it, for Good–Turing's
// estimate of that count to be steadier than the count itself.
const minSlotsForGT = 10

// HitRatio is the share of a report's measured point reads the cache served alone (false: none was
// measured).
func (r Report) HitRatio() (float64, bool) {
	if r.Measured == 0 {
		return 0, false
	}
	return float64(r.Hits) / float64(r.Measured), true
}
