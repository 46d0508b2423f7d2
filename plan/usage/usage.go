// Package usage predicts what ranges cost the node that serves them, and packs ranges onto nodes by
// that prediction: Cruz's resource-usage model (thesis chapters 5 and 6). A node's usage (CPU plus
// disk busy, as a share of one node) is a function of its read rate split by the block cache's hit
// ratio, its write rate and its scans (§5.2–5.4); the hit ratio of any set of ranges placed together
// comes from their merged block-access histograms by Che's approximation (§6.1); and a balancer
// places ranges, heaviest first, where the predicted usage after the move is lowest (LPT).
//
// It is a leaf: it sees ranges as rates and histograms and nodes as cache sizes. It never reads a
// cluster or moves a range; a policy turns its placements into operators.
package usage

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// Bucket is a group of blocks with the same access rate: Blocks blocks, each read Rate times a second.
type Bucket struct {
	Rate   float64 `json:"rate"`
	Blocks float64 `json:"blocks"`
}

// Histogram is a range's block-access frequencies: how many of its blocks are read how often. Ranges
// placed together share a cache, and their histograms merge by concatenation.
type Histogram []Bucket

// Merge is the histogram of hs placed together.
func Merge(hs ...Histogram) Histogram {
	var out Histogram
	for _, h := range hs {
		out = append(out, h...)
	}
	return out
}

// ReadRate is the block reads per second h describes.
func (h Histogram) ReadRate() float64 {
	s := 0.0
	for _, b := range h {
		s += b.Rate * b.Blocks
	}
	return s
}

// inLRU is the probability that an LRU cache with characteristic time tc holds a block read rate
// times a second: it was read within the last tc seconds.
func inLRU(rate, tc float64) float64 { return -math.Expm1(-rate * tc) }

// HitRatioLRU is Che's approximation of the hit ratio of an LRU cache of cacheBlocks blocks under
// the independent reference model with h's rates: the characteristic time t_c solves
// Σ n_i (1 − e^{−λ_i t_c}) = C, a block read λ times a second hits with probability 1 − e^{−λ t_c},
// and the ratio weighs each by its reads. A cache that holds every block hits always.
func HitRatioLRU(h Histogram, cacheBlocks float64) float64 {
	return che(h, cacheBlocks, inLRU)
}

// HitRatio is the hit ratio of a node's block cache of cacheBlocks blocks under the independent
// reference model with h's rates. Pebble's cache runs CLOCK-Pro, which keeps a block read twice
// within a while (a hot page, or a test page read again) over one read once: it keeps a skewed
// workload's hot blocks better than LRU (4–7 points more on zipfian reads). It is approximated as
// 2-LRU by Che's method (Martina, Garetto and Leonardi, 2014): a block enters the cache on a miss
// only when its previous read lies within a filter LRU's characteristic time t_1 — CLOCK-Pro
// remembers as many evicted blocks as it holds, so the filter is the cache's size and t_1 its LRU
// characteristic time — so a block read λ times a second is in the cache with probability
// q·a / (1 − a + q·a), a = 1 − e^{−λ t_c}, q = 1 − e^{−λ t_1}, t_c solving Σ n_i p_i = C. A
// simulation of Pebble's CLOCK-Pro agrees within a point (TestHitRatioAgainstClockPro).
func HitRatio(h Histogram, cacheBlocks float64) float64 {
	t1, ok := characteristicTime(h, cacheBlocks, inLRU)
	if !ok {
		return che(h, cacheBlocks, inLRU) // the cache holds every block, or none
	}
	return che(h, cacheBlocks, func(rate, tc float64) float64 {
		q, a := inLRU(rate, t1), inLRU(rate, tc)
		if q*a == 0 {
			return 0
		}
		return q * a / (1 - a + q*a)
	})
}

// occupancy is the blocks a cache holds at characteristic time t when a block read λ times a
// second is in it with probability in(λ, t).
func (h Histogram) occupancy(t float64, in func(rate, t float64) float64) float64 {
	s := 0.0
	for _, b := range h {
		if b.Rate > 0 {
			s += b.Blocks * in(b.Rate, t)
		}
	}
	return s
}

// characteristicTime solves h.occupancy(t) = cacheBlocks by bisection; false when the cache holds
// every block read (or none).
func characteristicTime(h Histogram, cacheBlocks float64, in func(rate, t float64) float64) (float64, bool) {
	total := 0.0
	for _, b := range h {
		if b.Rate > 0 {
			total += b.Blocks
		}
	}
	if cacheBlocks >= total || cacheBlocks <= 0 {
		return 0, false
	}
	lo, hi := 0.0, 1.0
	for h.occupancy(hi, in) < cacheBlocks {
		hi *= 2
	}
	for range 100 {
		mid := (lo + hi) / 2
		if h.occupancy(mid, in) < cacheBlocks {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2, true
}

// che is the hit ratio of a cache of cacheBlocks blocks in which a block read λ times a second is
// with probability in(λ, t_c), t_c solving the cache's occupancy: each block's reads weighed by it.
func che(h Histogram, cacheBlocks float64, in func(rate, t float64) float64) float64 {
	reads := h.ReadRate()
	if reads <= 0 {
		return 1
	}
	tc, ok := characteristicTime(h, cacheBlocks, in)
	if !ok {
		if cacheBlocks <= 0 {
			return 0
		}
		return 1
	}
	hits := 0.0
	for _, b := range h {
		if b.Rate > 0 {
			hits += b.Rate * b.Blocks * in(b.Rate, tc)
		}
	}
	return hits / reads
}

// Load is what a set of ranges asks of a node each second.
type Load struct {
	Reads  float64 // point reads
	Writes float64
	Scans  float64 // blocks read by scans (they bypass the cache's benefit: sequential, read once)
}

// Model predicts a node's usage, as a share of the node (1: saturated), from its load and hit
// ratio: a read that hits costs CPU, a miss costs CPU and a random disk read, a write its CPU, its
// log and its flush, a scanned block a sequential read, and a byte compactions write the reads and
// writes of merging tables. On an LSM a write's cost is mostly its compaction debt, paid later and
// in bursts: a node's compactions are predicted as its writes times the bytes compactions wrote
// per write in training (its write amplification), or taken as measured when the node measures
// them (PredictAt). The thesis fits usage along throughput at each hit ratio with splines; this
// model keeps one cost per kind of work, which the same measurements fit by least squares (Fit),
// and extrapolates beyond them linearly.
type Model struct {
	Version int `json:"version"`
	// Idle is a node's usage with no load (its loops, heartbeats, background work).
	Idle     float64 `json:"idle,omitempty"`
	HitCost  float64 `json:"hit_cost"`  // usage per read/s served from the cache
	MissCost float64 `json:"miss_cost"` // usage per read/s that missed
	// Write is the usage per write/s beside the compactions it sets off (Compact).
	Write float64 `json:"write_cost"`
	Scan  float64 `json:"scan_cost"` // per scanned block/s
	// Compact is the usage per byte/s compactions write (their reads of the tables they merge
	// ride along); CompactPerWrite the bytes compactions wrote per write the samples served (a
	// write's bytes times the store's write amplification). A model without them (0) carries its
	// compactions in Write.
	Compact         float64 `json:"compact_cost,omitempty"`
	CompactPerWrite float64 `json:"compact_bytes_per_write,omitempty"`
	// Samples is how many measurements the model was fitted on (0: the built-in default).
	Samples int `json:"samples"`
}

// modelVersion is the file format's version. A file without the compaction fields is the same
// version: it predicts as it did, its compactions in its write cost.
const modelVersion = 1

// Default is the model used when none was trained on the machine: a node saturates at about 40 000
// cached reads, 500 random disk reads (an emulated disk of a few hundred IOPS plus the CPU), 10 000
// writes or 4 000 scanned blocks a second.
var Default = Model{Version: modelVersion, HitCost: 1.0 / 40000, MissCost: 1.0 / 500, Write: 1.0 / 10000, Scan: 1.0 / 4000}

// Predict is the node's usage for load at hit ratio hit, its compactions those its writes set off
// on average (CompactPerWrite).
func (m Model) Predict(l Load, hit float64) float64 {
	return m.PredictAt(l, hit, m.CompactionOf(l))
}

// PredictAt is the node's usage for load at hit ratio hit with its compactions writing compaction
// bytes a second (measured: the debt of writes served before, which the node is paying now).
func (m Model) PredictAt(l Load, hit, compaction float64) float64 {
	return m.Idle + l.Reads*hit*m.HitCost + l.Reads*(1-hit)*m.MissCost + l.Writes*m.Write + l.Scans*m.Scan + compaction*m.Compact
}

// CompactionOf is the bytes a second compactions write for load, as Predict takes them.
func (m Model) CompactionOf(l Load) float64 { return l.Writes * m.CompactPerWrite }

// Sample is one measurement for training: a node's load, its measured hit ratio, the bytes a
// second its compactions wrote and its measured usage — or, with Nodes > 1, the sum of that many
// nodes' loads, compactions and usages (nodes measured together, each idling at Idle).
type Sample struct {
	Load       Load
	Hit        float64
	Compaction float64
	Usage      float64
	Nodes      float64 // 0: one node
}

// Fit fits a model's idle usage and costs to samples by non-negative least squares over the kinds of
// work, compactions one of them (a cost that comes out negative is dropped and the rest refitted; a
// kind of work no sample did gets no cost), and measures the bytes compactions wrote per write
// (compactedPerWrite). It needs at least five samples.
func Fit(samples []Sample) (Model, error) {
	if len(samples) < 5 {
		return Model{}, fmt.Errorf("usage: %d samples: at least 5 are needed to fit an idle usage and 4 costs", len(samples))
	}
	return fit(samples, -1)
}

// FitAtIdle fits the costs with a node's idle usage given (measured with no load) instead of
// fitted: samples whose usage does not grow with their load (writes whose cost is the compactions
// they set off, whatever their rate) would otherwise raise the fitted idle usage and lower every
// cost with it. It needs at least four samples.
func FitAtIdle(samples []Sample, idle float64) (Model, error) {
	if len(samples) < 4 {
		return Model{}, fmt.Errorf("usage: %d samples: at least 4 are needed to fit 4 costs", len(samples))
	}
	return fit(samples, max(idle, 0))
}

// FitByKind fits the idle usage and the read costs to the samples that only read (and those with
// no load), free (Fit), then the write and scan costs to the others with those fixed. Samples whose
// usage does not follow their load — writes whose cost is the compactions they set off, flat
// whatever their rate — then set their own cost only, not the idle term: the read samples, spread
// over rates and hit ratios, say what a node uses under load beyond its reads (its background).
// It needs at least five read samples.
func FitByKind(samples []Sample) (Model, error) {
	var reads, others []Sample
	for _, s := range samples {
		if s.Load.Writes == 0 && s.Load.Scans == 0 {
			reads = append(reads, s)
		} else {
			others = append(others, s)
		}
	}
	m, err := Fit(reads)
	if err != nil {
		return Model{}, fmt.Errorf("usage: by kind, the reads: %w", err)
	}
	if len(others) > 0 {
		rest := make([]Sample, len(others))
		for i, s := range others { // what their reads cost at the reads' fit leaves the target
			reads := s.Load.Reads*s.Hit*m.HitCost + s.Load.Reads*(1-s.Hit)*m.MissCost
			rest[i] = Sample{Load: Load{Writes: s.Load.Writes, Scans: s.Load.Scans}, Hit: 1, Compaction: s.Compaction, Usage: s.Usage - reads, Nodes: s.Nodes}
		}
		wm, err := fit(rest, m.Idle)
		if err != nil {
			return Model{}, fmt.Errorf("usage: by kind, the writes and scans: %w", err)
		}
		m.Write, m.Scan, m.Compact = wm.Write, wm.Scan, wm.Compact
	}
	m.CompactPerWrite = compactedPerWrite(samples)
	m.Samples = len(samples)
	return m, nil
}

// PredictSample is the model's usage for a sample: its load at its hit ratio with its measured
// compactions, and the idle usage of every further node measured with it.
func (m Model) PredictSample(s Sample) float64 {
	return m.PredictAt(s.Load, s.Hit, s.Compaction) + (max(s.Nodes, 1)-1)*m.Idle
}

// compactedPerWrite is the bytes compactions wrote per write over samples of equal length: every
// byte compacted is some write's debt, paid in the sample that wrote it or in a later one (a read
// or scan sample measured while compactions ran on), so the sums are taken over them all.
func compactedPerWrite(samples []Sample) float64 {
	var compacted, writes float64
	for _, s := range samples {
		compacted += s.Compaction
		writes += s.Load.Writes
	}
	if writes <= 0 {
		return 0
	}
	return compacted / writes
}

// CrossValidate is fit's leave-one-out error: each sample that held says is left out in turn, the
// model is fitted to the others and predicts it; the mean and the largest absolute error. It says
// how well a way of fitting predicts a measurement it was not fitted to, which a fit's error on its
// own samples does not (a model with more terms always fits those better).
func CrossValidate(samples []Sample, fit func([]Sample) (Model, error), held func(Sample) bool) (mae, worst float64, err error) {
	n := 0
	rest := make([]Sample, 0, len(samples))
	for i, s := range samples {
		if !held(s) {
			continue
		}
		rest = append(append(rest[:0], samples[:i]...), samples[i+1:]...)
		m, err := fit(rest)
		if err != nil {
			return 0, 0, fmt.Errorf("usage: cross-validation, sample %d left out: %w", i, err)
		}
		d := math.Abs(m.PredictSample(s) - s.Usage)
		mae += d
		worst = max(worst, d)
		n++
	}
	if n == 0 {
		return 0, 0, errors.New("usage: cross-validation: no sample to leave out")
	}
	return mae / float64(n), worst, nil
}

// fit solves the non-negative least squares; idle < 0 fits the idle usage as a sixth unknown.
func fit(samples []Sample, idle float64) (Model, error) {
	const idleCol = 5
	feat := func(s Sample) []float64 {
		return []float64{s.Load.Reads * s.Hit, s.Load.Reads * (1 - s.Hit), s.Load.Writes, s.Load.Scans, s.Compaction, max(s.Nodes, 1)}
	}
	target := func(s Sample) float64 { return s.Usage }
	kinds := idleCol + 1
	if idle >= 0 {
		kinds = idleCol // the idle column is known: it leaves the target
		target = func(s Sample) float64 { return s.Usage - idle*max(s.Nodes, 1) }
	}
	var active []int
	for k := range kinds {
		for _, s := range samples {
			if feat(s)[k] != 0 {
				active = append(active, k)
				break
			}
		}
	}
	x := make([]float64, idleCol+1)
	for len(active) > 0 {
		a := mat.NewDense(len(samples), len(active), nil)
		b := mat.NewVecDense(len(samples), nil)
		for i, s := range samples {
			f := feat(s)
			for j, k := range active {
				a.Set(i, j, f[k])
			}
			b.SetVec(i, target(s))
		}
		var sol mat.VecDense
		if err := sol.SolveVec(a, b); err != nil {
			// Rank-deficient: a term the samples barely exercise (a few misses among cached reads)
			// cannot be told from the others. It leaves the fit with a zero cost, as a negative one does.
			if len(active) == 1 {
				return Model{}, fmt.Errorf("usage: fit: %w", err)
			}
			active = slices.Delete(active, weakest(a), weakest(a)+1)
			continue
		}
		x = make([]float64, idleCol+1)
		neg := -1
		for j, k := range active {
			x[k] = sol.AtVec(j)
			if x[k] < 0 && (neg < 0 || x[k] < x[active[neg]]) {
				neg = j
			}
		}
		if neg < 0 {
			break
		}
		// A negative cost is dropped and the rest refitted; with none left every cost is zero.
		clear(x)
		active = slices.Delete(active, neg, neg+1)
	}
	if idle >= 0 {
		x[idleCol] = idle
	}
	return Model{Version: modelVersion, Idle: x[idleCol], HitCost: x[0], MissCost: x[1], Write: x[2], Scan: x[3], Compact: x[4],
		CompactPerWrite: compactedPerWrite(samples), Samples: len(samples)}, nil
}

// weakest is the column of a with the least norm: the term the samples say least about.
func weakest(a *mat.Dense) int {
	_, cols := a.Dims()
	best, at := math.Inf(1), 0
	for j := range cols {
		if n := mat.Norm(a.ColView(j), 2); n < best {
			best, at = n, j
		}
	}
	return at
}

// Save writes the model as a small versioned JSON file.
func (m Model) Save(path string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// LoadModel reads a model Save wrote; a missing file gives Default.
func LoadModel(path string) (Model, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Default, nil
	}
	if err != nil {
		return Model{}, fmt.Errorf("usage model: %w", err)
	}
	var m Model
	if err := json.Unmarshal(b, &m); err != nil {
		return Model{}, fmt.Errorf("usage model %s: %w", path, err)
	}
	if m.Version != modelVersion {
		return Model{}, fmt.Errorf("usage model %s: version %d, this binary reads %d (train it again: shoal bench usage-train)", path, m.Version, modelVersion)
	}
	return m, nil
}

// Range is one range as the balancer sees it.
type Range struct {
	ID    uint64
	Load  Load
	Hist  Histogram // its block-access frequencies (its point reads' blocks)
	Bytes float64
}

// Node is one node: its cache in blocks and the ranges it must keep (pinned).
type Node struct {
	ID          uint64
	CacheBlocks float64
}

// Placement is a node's ranges and their predicted usage together.
type Placement struct {
	Node   uint64
	Ranges []uint64
	Usage  float64
	Hit    float64
}

// predictSet is the usage of ranges placed together on a node with cache blocks.
func (m Model) predictSet(rs []Range, cache float64) (usage, hit float64) {
	var l Load
	hs := make([]Histogram, len(rs))
	for i, r := range rs {
		l.Reads, l.Writes, l.Scans = l.Reads+r.Load.Reads, l.Writes+r.Load.Writes, l.Scans+r.Load.Scans
		hs[i] = r.Hist
	}
	hit = HitRatio(Merge(hs...), cache)
	return m.Predict(l, hit), hit
}

// Pack places ranges on nodes by LPT on predicted usage: ranges by their usage alone on an average
// node, heaviest first, each to the node whose predicted usage with it is lowest (histograms merged,
// the hit ratio predicted again). It returns the placements in nodes' order.
func (m Model) Pack(ranges []Range, nodes []Node) []Placement {
	if len(nodes) == 0 {
		return nil
	}
	avgCache := 0.0
	for _, n := range nodes {
		avgCache += n.CacheBlocks
	}
	avgCache /= float64(len(nodes))
	type solo struct {
		r Range
		u float64
	}
	order := make([]solo, len(ranges))
	for i, r := range ranges {
		u, _ := m.predictSet([]Range{r}, avgCache)
		order[i] = solo{r, u}
	}
	slices.SortStableFunc(order, func(a, b solo) int {
		if c := cmp.Compare(b.u, a.u); c != 0 {
			return c
		}
		return cmp.Compare(a.r.ID, b.r.ID)
	})
	sets := make([][]Range, len(nodes))
	out := make([]Placement, len(nodes))
	for i, n := range nodes {
		out[i].Node = n.ID
	}
	for _, s := range order {
		best, bestU, bestHit := -1, 0.0, 0.0
		for i, n := range nodes {
			u, hit := m.predictSet(append(slices.Clip(sets[i]), s.r), n.CacheBlocks)
			if best < 0 || u < bestU {
				best, bestU, bestHit = i, u, hit
			}
		}
		sets[best] = append(sets[best], s.r)
		out[best].Ranges = append(out[best].Ranges, s.r.ID)
		out[best].Usage, out[best].Hit = bestU, bestHit
	}
	return out
}

// Makespan is the largest predicted usage of a packing.
func Makespan(ps []Placement) float64 {
	m := 0.0
	for _, p := range ps {
		m = max(m, p.Usage)
	}
	return m
}
