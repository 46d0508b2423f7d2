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
	// Upper is the range's data in the levels above its bottom one per byte of its bottom level's
	// (UpperShare): the blocks a point read loads beside its bottom-level block (multiLevel).
	Upper float64
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
	r.Hist = multiLevel(r.Hist, in.Upper, 1/float64(t.cfg.SampleEvery))
	return r
}

// multiLevel is h, a range's blocks by their reads, as the block cache sees them when upper of the
// range's bytes per byte of its bottom level lie in the levels above it. Che's approximation counts
// one block per read, which holds on a compacted store; on one that has not compacted since it was
// written, a rewritten key lies in more than one level, and each level's block is its own item in
// the cache, with its own rate.
//
// h spans the range's bytes in every level (Input.Bytes, and the offsets the keys are placed by,
// count them all), so 1/(1 + upper) of each bucket's blocks are the bottom level's. A key with a
// newer version above is read from that level by a get, which stops at the newest version, and
// from every level by a sampled read, an iterator: a bottom block keeps the reads of its keys that
// have none above (1 − f of them, f = min(upper, 1)) and the sampled share of the others'. The
// blocks above share the gets of the keys they hold (f of each bucket's reads) and take the
// bucket's rate: a block above holds keys written since the last compaction, which for writes
// spread like the reads are as popular as a bottom block's (for a hot key range written
// elsewhere they are less: the prediction then keeps too many of them cached).
func multiLevel(h usage.Histogram, upper, sampled float64) usage.Histogram {
	if upper <= 0 || len(h) == 0 {
		return h
	}
	f, bottom := math.Min(upper, 1), 1/(1+upper)
	out := make(usage.Histogram, 0, 2*len(h))
	for _, b := range h {
		r, n := b.Rate/bottom, b.Blocks*bottom // per bottom block: all its keys' reads
		out = append(out, usage.Bucket{Rate: r * (1 - f*(1-sampled)), Blocks: n},
			usage.Bucket{Rate: r * f / upper, Blocks: n * upper})
	}
	return out
}

// histogram turns slot counts into block-access buckets: samples/reads/secs give the share of the
// range's point reads each slot received and their rate. A slot seen more often than any block of
// a uniform region would be but by chance (headLeast) keeps its own count. The rest of the range's
// blocks — seen fewer times or never (of the range's blocks in all) — share the rest of the reads,
// and there a sample says little about one block: a short window's sample sees most blocks once or
// not at all. Giving them all one rate (the mean, as Good–Turing's estimates do) flattens the
// tail, and Che's approximation then predicts too few hits for a skewed workload (15 points under a
// zipfian 1.1 in 10–20 s of 1-in-16 samples). So the span is cut into regions of adjacent blocks,
// each with enough samples to say its own rate (a hot key range is a hot region), and within a
// region the tail's rates fall as a power of their rank, continuing the region's head, with the
// exponent whose expected number of distinct blocks sampled is the number the sample saw
// (occupancy matching: a uniform tail shows many distinct blocks, a skewed one few; tailExponents).
// Rates group in half-octaves, each bucket at its mean rate, so the histogram stays small whatever
// the range's size.
func histogram(slots map[uint64]uint32, samples, reads, secs, blocks float64) usage.Histogram {
	if secs <= 0 || reads <= 0 {
		return nil
	}
	rate := reads / secs
	blocks = math.Max(math.Max(blocks, float64(len(slots))), 1)
	if samples <= 0 || len(slots) == 0 {
		return usage.Histogram{{Rate: rate / blocks, Blocks: blocks}}
	}
	var h bands
	regs := regions(slots, samples, blocks, &h, rate)
	as := tailExponents(regs)
	for k, g := range regs {
		if g.samples <= 0 {
			continue
		}
		a := as[k]
		z := 0.0
		for _, b := range g.bins {
			z += b.n * math.Exp(-a*b.lnRank)
		}
		for _, b := range g.bins {
			h.add(g.samples/samples*rate*math.Exp(-a*b.lnRank)/z, b.n)
		}
	}
	return h.histogram()
}

// bands groups block rates in half-octaves.
type bands map[int]*usage.Bucket

func (bs *bands) add(r, n float64) {
	if r <= 0 || n <= 0 {
		return
	}
	if *bs == nil {
		*bs = bands{}
	}
	band := int(math.Floor(2 * math.Log2(r)))
	b := (*bs)[band]
	if b == nil {
		b = &usage.Bucket{}
		(*bs)[band] = b
	}
	b.Rate += r * n // the band's reads; divided by its blocks in histogram
	b.Blocks += n
}

// histogram is the bands from the fastest, each at its mean rate.
func (bs bands) histogram() usage.Histogram {
	keys := make([]int, 0, len(bs))
	for k := range bs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := make(usage.Histogram, 0, len(keys))
	for i := len(keys) - 1; i >= 0; i-- {
		b := bs[keys[i]]
		h = append(h, usage.Bucket{Rate: b.Rate / b.Blocks, Blocks: b.Blocks})
	}
	return h
}

// region is a run of adjacent blocks of a range: its tail's samples (those of its blocks not in
// the head), the tail blocks the sample saw, and the tail's blocks in rank runs.
type region struct {
	samples, seen float64
	bins          []rankBin
}

// samplesPerRegion is how many samples a region should have for its rate to be its own; maxRegions
// bounds the work (the tail's exponent is fitted over every region's runs).
const (
	samplesPerRegion = 32
	maxRegions       = 32
)

// regions adds the head slots (headLeast of their region) to h at their own rates and cuts the span into regions of
// adjacent blocks with their tails. Samples that found no slot (MaxSlots) are shared by the regions
// as their tail blocks are.
func regions(slots map[uint64]uint32, samples, blocks float64, h *bands, rate float64) []region {
	n := int(math.Min(math.Max(math.Floor(samples/samplesPerRegion), 1), maxRegions))
	size := math.Ceil(blocks / float64(n))
	regionOf := func(sl uint64) int { return min(int(float64(sl)/size), n-1) }
	blocksOf := func(k int) float64 { return math.Max(math.Min(size, blocks-float64(k)*size), 1) }
	// A head slot stands out of its own region's noise: in a hot region every block is sampled
	// more often. The noise is judged over the whole span's blocks, not the region's: fewer than one
	// block of the range expected that high by chance. Judged a region at a time, a uniform range
	// of 32 regions kept a few dozen lucky blocks as heads at 4–6 times their rate, which CLOCK-Pro's
	// rule then keeps cached: 1–2.5 points too many hits on uniform reads.
	least := make([]float64, n)
	for sl, c := range slots {
		least[regionOf(sl)] += float64(c)
	}
	for k := range least {
		least[k] = headLeast(least[k]/blocksOf(k), blocks)
	}
	regs := make([]region, n)
	heads := make([]float64, n)
	placed := 0.0
	for sl, c := range slots {
		k := regionOf(sl)
		placed += float64(c)
		if float64(c) >= least[k] {
			heads[k]++
			h.add(float64(c)/samples*rate, 1)
			continue
		}
		regs[k].samples += float64(c)
		regs[k].seen++
	}
	tails := make([]float64, n)
	all := 0.0
	for k := range regs {
		tails[k] = math.Max(blocksOf(k)-heads[k], 0)
		all += tails[k]
	}
	for k := range regs {
		if all > 0 {
			regs[k].samples += (samples - placed) * tails[k] / all
		}
		regs[k].bins = rankBins(heads[k], tails[k])
	}
	return regs
}

// headCount is how many samples a slot needs at least for its own count to stand for its rate
// (within about half either way).
const headCount = 4

// headLeast is the least count of a head slot: at least headCount, and more than any block of a
// uniform range of blocks sampled mean times each (Poisson) would show but by chance: fewer than
// one such block expected.
//
// The terms are computed from their logarithms: at a mean of a few hundred (a hot region's blocks
// sampled that often) e^−mean underflows to 0, and the recurrence then never lowered the tail, so
// the loop never ended — under the tracker's lock, hanging every read of the node.
func headLeast(mean, blocks float64) float64 {
	tail := 1.0 // P(count ≥ k)
	lnMean := math.Log(mean)
	// Past mean + 40 standard deviations the tail is 0 in floating point whatever the terms say.
	limit := math.Ceil(mean + 40*math.Sqrt(mean) + headCount)
	for k := 0.0; k <= limit; k++ {
		if k >= headCount && blocks*tail < 1 {
			return k
		}
		lg, _ := math.Lgamma(k + 1)
		pmf := math.Exp(k*lnMean - mean - lg) // P(count = k)
		if mean == 0 {
			pmf = 0
			if k == 0 {
				pmf = 1
			}
		}
		tail -= pmf
		if tail <= 0 {
			return math.Max(k+1, headCount)
		}
	}
	return math.Max(limit, headCount)
}

// rankBin is a run of n tail blocks around a rank (ranks continue the head's: the first tail block
// is rank head+1), by its logarithm.
type rankBin struct{ lnRank, n float64 }

// rankBins cuts ranks head+1 … head+tail into runs growing by 20 %: the tail's sums over a few
// dozen runs instead of every block.
func rankBins(head, tail float64) []rankBin {
	var out []rankBin
	for lo := 1.0; lo <= tail; {
		hi := math.Min(math.Max(math.Floor(lo*1.2), lo+1), tail+1) // ranks lo … hi-1 of the tail
		out = append(out, rankBin{lnRank: math.Log(head + math.Sqrt(lo*(hi-1))), n: hi - lo})
		lo = hi
	}
	return out
}

// tailExponents are the powers a ≥ 0 for which the regions' tail samples, of blocks read at rates
// ∝ rank^−a within each region, are expected to see as many distinct blocks as they saw
// (bisection: the expectation falls as a grows). A region that falls short of a uniform tail's
// count by more than tailNoise standard deviations on its own gets an exponent of its own: where a
// hot region ends, the region astride the edge falls far short, and one exponent for the range,
// fitted to it, skewed the hot region too (a hotspot's hit ratio predicted 7.6 points high in
// TestHistogramAgainstPebbleCache). The others share one exponent, fitted only when together they
// fall short by more than tailNoise deviations, else 0. Without that margin the estimate leans to
// skew: a uniform tail's count falls short of its mean half the time and an exponent fits the
// shortfall, while a count above it stays at 0. With few samples a block (a window's 1-in-16
// sample, or the few keys a busy heartbeat has time to place) a shortfall of a collision or two a
// region fits an exponent of 0.3–0.5, and CLOCK-Pro's rule then keeps the "hot" blocks: uniform
// reads predicted at up to 25 % hits for 4.3 % (TestUniformSampleNotSkewed).
func tailExponents(regs []region) []float64 {
	as := make([]float64, len(regs))
	var rest []int
	for k, g := range regs {
		if beyondChance(short(g), uniformDistinctVar(g), regionNoise) {
			as[k] = fitExponent(regs, []int{k})
		} else {
			rest = append(rest, k)
		}
	}
	s, v := 0.0, 0.0
	for _, k := range rest {
		s += short(regs[k])
		v += uniformDistinctVar(regs[k])
	}
	if beyondChance(s, v, tailNoise) {
		a := fitExponent(regs, rest)
		for _, k := range rest {
			as[k] = a
		}
	}
	return as
}

// short is how many fewer distinct blocks g's tail samples saw than a uniform tail's would.
func short(g region) float64 { return distinctAt(g, 0) - g.seen }

// distinctAt is the distinct blocks g's tail samples are expected to see at exponent a.
func distinctAt(g region, a float64) float64 {
	if g.samples <= 0 {
		return 0
	}
	z, d := 0.0, 0.0
	for _, b := range g.bins {
		z += b.n * math.Exp(-a*b.lnRank)
	}
	for _, b := range g.bins {
		d += b.n * -math.Expm1(-g.samples*math.Exp(-a*b.lnRank)/z)
	}
	return d
}

// fitExponent is the one exponent for which the regions ks together are expected to see as many
// distinct blocks as they saw.
func fitExponent(regs []region, ks []int) float64 {
	seen := 0.0
	for _, k := range ks {
		seen += regs[k].seen
	}
	distinct := func(a float64) float64 {
		d := 0.0
		for _, k := range ks {
			d += distinctAt(regs[k], a)
		}
		return d
	}
	lo, hi := 0.0, 4.0
	if distinct(lo) <= seen {
		return 0
	}
	if distinct(hi) >= seen {
		return hi
	}
	for range 16 {
		mid := (lo + hi) / 2
		if distinct(mid) > seen {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// tailNoise is how many standard deviations (a normal's one-sided tail: 1 in 4 300) of a uniform
// tail's distinct count tailExponents leaves to chance. At 3 (1 in 740), one of 40 uniform
// histograms at 15 keys placed a heartbeat fitted a skew from 9 collisions where 2.6 were expected
// and predicted 23 % hits for 4.3 %; at 4, thin samples of zipfian reads lost more of their skew.
const tailNoise = 3.5

// regionNoise is tailNoise for a region alone: more, since a range has up to maxRegions of them.
const regionNoise = 5

// beyondChance reports whether a tail short of a uniform one's distinct count by short blocks,
// whose count has variance v when uniform, is so by more than chance allows at z standard
// deviations of a normal (one-sided). The shortfall is the sample's excess collisions, which for a
// uniform tail are about Poisson with mean and variance v; its upper tail is that Poisson's. A
// normal's z·√v reads a thin sample wrong both ways: 6 collisions where 2 were expected passed 3
// deviations (a uniform histogram fitted an exponent that predicted 25 % hits for 4.3 %), and the
// floor of z² blocks once put on it made a thin sample of a skewed range look uniform: 4 collisions
// where 0.3 were expected, a chance of 1 in 8 000, were left to chance, and zipfian reads of which
// a busy heartbeat placed 5 keys were predicted 36 points under on average (now 8;
// TestThinSampleKeepsSkew).
func beyondChance(short, v, z float64) bool {
	if short <= 0 || v <= 0 {
		return false
	}
	return poissonTail(v, math.Ceil(v+short-1e-9)) < 0.5*math.Erfc(z/math.Sqrt2)
}

// poissonTail is P(X ≥ k) for X Poisson with mean m, summed from k upwards in logarithms (a mean of
// a few thousand underflows e^−m).
func poissonTail(m, k float64) float64 {
	if k <= 0 {
		return 1
	}
	lnM := math.Log(m)
	sum := 0.0
	for i := k; ; i++ {
		lg, _ := math.Lgamma(i + 1)
		p := math.Exp(i*lnM - m - lg)
		sum += p
		if i > m && (p == 0 || p < sum*1e-12) { // past the mean the terms only fall
			return sum
		}
		if i > k+1e5 {
			return sum
		}
	}
}

// uniformDistinctVar is the variance of the number of distinct blocks g's tail samples see when
// its tail is read uniformly: T·e^−λ·(1 − (1 + λ)·e^−λ) for T blocks and λ samples a block (the
// occupancy problem's; for few samples about the expected collisions, S²/2T).
func uniformDistinctVar(g region) float64 {
	t := 0.0
	for _, b := range g.bins {
		t += b.n
	}
	if t <= 0 || g.samples <= 0 {
		return 0
	}
	l := g.samples / t
	e := math.Exp(-l)
	return t * e * (1 - (1+l)*e)
}

// HitRatio is the share of a report's measured point reads the cache served alone (false: none was
// measured).
func (r Report) HitRatio() (float64, bool) {
	if r.Measured == 0 {
		return 0, false
	}
	return float64(r.Hits) / float64(r.Measured), true
}
