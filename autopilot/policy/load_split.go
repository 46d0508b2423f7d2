package policy

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/shoaldb/shoal/autopilot/model"
	"github.com/shoaldb/shoal/autopilot/operator"
)

// LoadSplitConfig configures load_split.
type LoadSplitConfig struct {
	// QPSThreshold is the load (reads + writes per second) above which a range is split. Default 2500.
	QPSThreshold float64
	// HotFor is how long a range must stay above the threshold before it is split. Default 5s.
	HotFor time.Duration
	// MinSamples is how many sampled requests the split-key search must have seen. Default 16384.
	MinSamples uint64
	// SettleSamples is how many sampled requests the search must have seen since it entered its
	// ping-pong zone (switched to linear steps). Default 4096.
	SettleSamples uint64
	// MaxPredictedImbalance: no split is proposed if the recent samples put the two halves' loads
	// further apart than this (a single hot key cannot be split). Default 0.25.
	MaxPredictedImbalance float64
	// RecentWindows is how many recent key samples are kept to predict the halves. Default 8.
	RecentWindows int
	// Search configures the split-key search.
	Search SearchConfig
}

func (c LoadSplitConfig) withDefaults() LoadSplitConfig {
	if c.QPSThreshold <= 0 {
		c.QPSThreshold = 2500
	}
	if c.HotFor <= 0 {
		c.HotFor = 5 * time.Second
	}
	if c.MinSamples == 0 {
		c.MinSamples = 16384
	}
	if c.SettleSamples == 0 {
		c.SettleSamples = 4096
	}
	if c.MaxPredictedImbalance <= 0 {
		c.MaxPredictedImbalance = 0.25
	}
	if c.RecentWindows <= 0 {
		c.RecentWindows = 8
	}
	c.Search = c.Search.withDefaults()
	return c
}

// LoadSplit splits a range whose load stays above QPSThreshold at the key that balances the load of the
// two halves — not their size. The key comes from the workload-aware split-key search of Cruz (PhD
// thesis, U. Minho 2016, ch. 4; see SplitKeyFinder), fed with the key samples the range's leader
// reports each heartbeat. A split is proposed once the search has settled (seen MinSamples, and
// SettleSamples since it detected its ping-pong zone) and the recent samples confirm the halves are
// within MaxPredictedImbalance of each other.
//
// Every split it proposes is remembered in the SplitMemory it shares with merge, which leaves that
// boundary alone for a while: a range is not split and merged back and forth.
type LoadSplit struct {
	mu     sync.Mutex // guards ranges between Propose and Search
	cfg    LoadSplitConfig
	splits *SplitMemory
	ranges map[uint64]*hotRange
	// warm are the positions in seen's Ranges of the user ranges at or above half the threshold:
	// only the ranges that changed since are looked at again (ChangedSince), not every range.
	seen *model.Cluster
	warm []int
	// scratch is feed's buffer.
	scratch [][]byte
}

type hotRange struct {
	start, end []byte
	finder     *SplitKeyFinder
	lastSample time.Time
	hotSince   time.Time
	recent     []*model.KeySample
}

// NewLoadSplit returns the load_split policy remembering its splits in splits (may be nil).
func NewLoadSplit(cfg LoadSplitConfig, splits *SplitMemory) *LoadSplit {
	if splits == nil {
		splits = NewSplitMemory()
	}
	return &LoadSplit{cfg: cfg.withDefaults(), splits: splits, ranges: map[uint64]*hotRange{}}
}

// Name implements Policy.
func (p *LoadSplit) Name() string { return NameLoadSplit }

// SearchState describes the split-key search of one range (for tests and debugging).
type SearchState struct {
	Observed uint64 // sampled requests fed to the search
	Linear   bool   // in the ping-pong zone (linear steps)
	Switches int    // strategy switches so far
	Key      []byte // current estimate
}

// Search returns the state of rangeID's split-key search, if the range is being watched.
func (p *LoadSplit) Search(rangeID uint64) (SearchState, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.ranges[rangeID]
	if st == nil {
		return SearchState{}, false
	}
	return SearchState{Observed: st.finder.Observed(), Linear: st.finder.Linear(), Switches: st.finder.Switches(),
		Key: st.finder.SplitKey()}, true
}

// Propose implements Policy.
func (p *LoadSplit) Propose(c *model.Cluster, pending []*operator.Operator) []*operator.Operator {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := newView(c, pending)
	defer v.release()
	p.findWarm(c)
	// Only the warm ranges have state; a map of every range seen cost more than the search.
	warm := make(map[uint64]bool, len(p.warm))
	var out []*operator.Operator
	for _, i := range p.warm {
		r := c.Ranges[i]
		q := r.QPS()
		warm[r.ID] = true
		st := p.ranges[r.ID]
		if st != nil && (!bytes.Equal(st.start, r.StartKey) || !bytes.Equal(st.end, r.EndKey)) {
			st = nil // the range split or merged: its search starts over
		}
		if st == nil {
			// Searching starts at half the threshold, so a range heating up has a settled key by the
			// time it crosses the threshold.
			st = &hotRange{start: r.StartKey, end: r.EndKey, finder: NewSplitKeyFinder(p.cfg.Search)}
			p.ranges[r.ID] = st
		}
		if s := r.Sample; s != nil && !s.At.Equal(st.lastSample) {
			st.lastSample = s.At
			p.scratch = feed(st.finder, s, r.ID, p.scratch)
			st.recent = append(st.recent, s)
			if len(st.recent) > p.cfg.RecentWindows {
				st.recent = st.recent[len(st.recent)-p.cfg.RecentWindows:]
			}
		}
		if q < p.cfg.QPSThreshold {
			st.hotSince = time.Time{}
			continue
		}
		if st.hotSince.IsZero() {
			st.hotSince = c.Now
		}
		if v.busy[r.ID] || r.System || c.Now.Sub(st.hotSince) < p.cfg.HotFor {
			continue
		}
		f := st.finder
		if f.Observed() < p.cfg.MinSamples || !f.Linear() || f.ObservedLinear() < p.cfg.SettleSamples {
			continue
		}
		key := roundSplitKey(f.SplitKey(), st.recent)
		if bytes.Compare(key, r.StartKey) <= 0 || !r.ContainsKey(key) {
			continue
		}
		left := fractionBelow(st.recent, key)
		if operator.Imbalance(left, 1-left) > p.cfg.MaxPredictedImbalance {
			continue
		}
		lq, rq := q*left, q*(1-left)
		op := operator.NewSplit(NameLoadSplit, c.Now, r, key, fmt.Sprintf(
			"r%d served %s (threshold %s) for %s; the split-key search settled after %d sampled requests "+
				"(%d since its ping-pong zone); recent samples put %s of the load left of %s",
			r.ID, fmtQPS(q), fmtQPS(p.cfg.QPSThreshold), roundDur(c.Now.Sub(st.hotSince)), f.Observed(),
			f.ObservedLinear(), pct(left), model.FormatKey(key)))
		op.PredictedBenefit = operator.Benefit{Metric: operator.MetricSpanMaxQPS, Span: r.Span(), Before: q,
			Delta: math.Max(lq, rq) - q, Detail: fmt.Sprintf("left ≈ %s, right ≈ %s", fmtQPS(lq), fmtQPS(rq)),
			Start: r.StartKey, End: r.EndKey, Key: key}
		p.splits.Remember(key, c.Now)
		delete(p.ranges, r.ID)
		v.add(op)
		out = append(out, op)
	}
	for id := range p.ranges {
		if !warm[id] {
			delete(p.ranges, id)
		}
	}
	return out
}

// findWarm brings warm up to date for c: the warm ranges of the last snapshot seen that did not
// change, and the changed ones that are warm now (every range when c does not say what changed).
func (p *LoadSplit) findWarm(c *model.Cluster) {
	isWarm := func(r *model.Range) bool { return !r.System && r.QPS() >= p.cfg.QPSThreshold/2 }
	changed, ok := c.ChangedSince(p.seen)
	p.seen = c
	if !ok {
		p.warm = p.warm[:0]
		for i, r := range c.Ranges {
			if isWarm(r) {
				p.warm = append(p.warm, i)
			}
		}
		return
	}
	warm := make([]int, 0, len(p.warm)+8)
	kept := p.warm
	for _, i := range changed {
		for len(kept) > 0 && kept[0] < i {
			warm, kept = append(warm, kept[0]), kept[1:]
		}
		if len(kept) > 0 && kept[0] == i {
			kept = kept[1:]
		}
		if isWarm(c.Ranges[i]) {
			warm = append(warm, i)
		}
	}
	p.warm = append(warm, kept...)
}

// feed replays a window's sample into the search in a random (but reproducible) order: the sample is
// uniform over the window's requests, so any order of it is as good a request stream as another.
// The order is shuffled in keys (reused: its capacity is returned).
func feed(f *SplitKeyFinder, s *model.KeySample, rangeID uint64, keys [][]byte) [][]byte {
	keys = keys[:0]
	for _, kc := range s.Keys {
		for i := uint32(0); i < kc.Count; i++ {
			keys = append(keys, kc.Key)
		}
	}
	rng := rand.New(rand.NewPCG(rangeID, uint64(s.At.UnixNano())))
	rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		f.Observe(k)
	}
	clear(keys)
	return keys[:0]
}

// roundSplitKey replaces the search's estimate, which is usually a synthetic key between two real ones,
// by the shortest key that splits the recent samples the same way: the shortest prefix of the first
// sampled key at or above the estimate that is still above the last sampled key below it. Readable in
// the decision log, and the same split as far as the samples can tell.
func roundSplitKey(key []byte, samples []*model.KeySample) []byte {
	var below, above []byte
	for _, s := range samples {
		i := sort.Search(len(s.Keys), func(i int) bool { return bytes.Compare(s.Keys[i].Key, key) >= 0 })
		if i > 0 && (below == nil || bytes.Compare(s.Keys[i-1].Key, below) > 0) {
			below = s.Keys[i-1].Key
		}
		if i < len(s.Keys) && (above == nil || bytes.Compare(s.Keys[i].Key, above) < 0) {
			above = s.Keys[i].Key
		}
	}
	if below == nil || above == nil {
		return key
	}
	for n := 1; n <= len(above); n++ {
		if bytes.Compare(above[:n], below) > 0 {
			return append([]byte(nil), above[:n]...)
		}
	}
	return key
}

func fractionBelow(samples []*model.KeySample, key []byte) float64 {
	var below, total float64
	for _, s := range samples {
		n := float64(s.Size())
		below += s.FractionBelow(key) * n
		total += n
	}
	if total == 0 {
		return 0.5
	}
	return below / total
}

// SplitMemory remembers the keys at which load_split split ranges, so merge can leave them alone.
// Safe for concurrent use.
type SplitMemory struct {
	mu     sync.Mutex
	splits map[string]time.Time
}

// NewSplitMemory returns an empty memory.
func NewSplitMemory() *SplitMemory { return &SplitMemory{splits: map[string]time.Time{}} }

// splitMemoryHorizon bounds what SplitMemory keeps even if nobody calls Forget (merge switched off).
const splitMemoryHorizon = 24 * time.Hour

// Remember records a split at key at time at (and drops splits older than a day).
func (m *SplitMemory) Remember(key []byte, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, t := range m.splits {
		if at.Sub(t) > splitMemoryHorizon {
			delete(m.splits, k)
		}
	}
	m.splits[string(key)] = at
}

// SplitAt returns when a split at key was last remembered.
func (m *SplitMemory) SplitAt(key []byte) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.splits[string(key)]
	return at, ok
}

// Forget drops the splits remembered before t.
func (m *SplitMemory) Forget(before time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, at := range m.splits {
		if at.Before(before) {
			delete(m.splits, k)
		}
	}
}

// SearchStrategy selects the increase/decrease functions of the split-key search (Cruz, §4.1.1).
type SearchStrategy int

// Strategies.
const (
	// SearchPingPong starts with exponential steps and switches to linear steps once it detects a
	// ping-pong zone (the thesis's mixed strategy; the default).
	SearchPingPong SearchStrategy = iota
	// SearchLinear always takes linear steps (slow to converge, stable).
	SearchLinear
	// SearchExponential always takes exponential steps (fast, unstable).
	SearchExponential
)

// String is "ping-pong", "linear" or "exponential".
func (s SearchStrategy) String() string {
	switch s {
	case SearchPingPong:
		return "ping-pong"
	case SearchLinear:
		return "linear"
	case SearchExponential:
		return "exponential"
	}
	return fmt.Sprintf("strategy(%d)", int(s))
}

// SearchConfig configures a SplitKeyFinder. Zero fields mean defaults.
type SearchConfig struct {
	Strategy SearchStrategy
	// PingPongPairs is the number of consecutive ping-pong pairs (an increase immediately followed by a
	// decrease, or the reverse) that marks the ping-pong zone. Default 4. The thesis found 2–4 best for
	// 10 k keys and 8 for 300 k; our steps are scaled to the load around the estimate rather than to the
	// key count, and 8 pairs (15 alternations in a row) take ~65 k requests to occur at the median.
	PingPongPairs int
	// ExponentialDivisor: an exponential step is band/ExponentialDivisor × n², n being the number of
	// consecutive steps in the same direction. Default 4.
	ExponentialDivisor float64
	// LinearDivisor: a linear step is band/LinearDivisor. Default 512.
	LinearDivisor float64
	// BandShare: the band is the distance around the estimate holding this share of the requests,
	// tracked online. Default 0.25.
	BandShare float64
	// BandGain is the band's multiplicative adaptation rate. Default 0.05.
	BandGain float64
	// Runaway: in linear mode, this many consecutive steps in one direction mean the workload moved
	// away; the search goes back to exponential steps. Default 32; negative disables.
	Runaway int
	// AverageOver: in linear mode the reported key is an exponentially weighted average of the
	// estimates over about this many requests, which damps the oscillation around the median. Default
	// 2048; negative reports the last estimate, as in the thesis.
	AverageOver int
}

func (c SearchConfig) withDefaults() SearchConfig {
	if c.PingPongPairs <= 0 {
		c.PingPongPairs = 4
	}
	if c.ExponentialDivisor <= 0 {
		c.ExponentialDivisor = 4
	}
	if c.LinearDivisor <= 0 {
		c.LinearDivisor = 512
	}
	if c.BandShare <= 0 {
		c.BandShare = 0.25
	}
	if c.BandGain <= 0 {
		c.BandGain = 0.05
	}
	if c.Runaway == 0 {
		c.Runaway = 32
	}
	if c.AverageOver == 0 {
		c.AverageOver = 2048
	}
	return c
}

func (c SearchConfig) validate() error {
	c = c.withDefaults()
	if c.BandShare >= 1 {
		return errors.New("policy: load split search band share must be below 1")
	}
	if c.Strategy < SearchPingPong || c.Strategy > SearchExponential {
		return fmt.Errorf("policy: unknown load split search strategy %d", c.Strategy)
	}
	return nil
}

// SplitKeyFinder is the workload-aware split-key search of Cruz's thesis (ch. 4, algorithm 4): an online
// estimate of the key that splits a range's requests in two equal halves, updated on every (sampled)
// request with constant memory. It starts at the first key seen; each request for a key at or above
// the estimate increases it, each request below decreases it, always within the lowest and highest
// keys seen. At the median both moves are equally likely, so the estimate oscillates there.
//
// Increase and decrease are instantiated as in §4.1.1: exponential steps (growing with the square of
// the number of consecutive moves in one direction) converge fast but are unstable; linear steps are
// stable but slow. The default strategy starts exponential and switches to linear when it detects a
// ping-pong zone — PingPongPairs consecutive increase/decrease pairs. Beyond the thesis: a run of
// Runaway moves in one direction while linear means the load moved, and the search goes back to
// exponential steps.
//
// The thesis searches integer keys, where "constant" means one key. Shoal keys are bytes, so the
// finder does its arithmetic in a key coordinate: after the common prefix of the lowest and highest
// keys, each byte position is a digit whose alphabet is the range of bytes seen there (mixed radix), so
// decimal, hexadecimal, text and binary encodings all become dense integers. And the step scale follows
// the load rather than the key count: the unit is a band around the estimate that holds BandShare of
// the requests (tracked online, multiplicatively), so a step moves about the same share of the load
// whatever the distribution's spread.
//
// Not safe for concurrent use.
type SplitKeyFinder struct {
	cfg SearchConfig

	lowest, highest, split []byte
	mins, maxs             []byte // per byte position, the smallest and largest byte seen
	fr                     frame
	frameDirty             bool
	// posLo and posHi are lowest's and highest's coordinates in fr (both change only with fr).
	posLo, posHi uint64
	posValid     bool
	band         float64 // in coordinate units
	avg          float64 // average estimate (coordinate) since entering linear mode
	avgValid     bool

	linear      bool
	dir         int // last move: +1 up, -1 down, 0 none yet
	run         int // consecutive moves in dir
	flips       int // consecutive direction changes
	observed    uint64
	sinceLinear uint64
	switches    int
	// shrink and grow are the band's factors (exp of the configured gain), once, not per request.
	shrink, grow float64
}

// NewSplitKeyFinder returns an empty search.
func NewSplitKeyFinder(cfg SearchConfig) *SplitKeyFinder {
	cfg = cfg.withDefaults()
	return &SplitKeyFinder{cfg: cfg, linear: cfg.Strategy == SearchLinear,
		shrink: math.Exp(-cfg.BandGain * (1 - cfg.BandShare)), grow: math.Exp(cfg.BandGain * cfg.BandShare)}
}

// Observed is the number of requests seen.
func (f *SplitKeyFinder) Observed() uint64 { return f.observed }

// ObservedLinear is the number of requests seen since the search last switched to linear steps (0 while
// it takes exponential steps).
func (f *SplitKeyFinder) ObservedLinear() uint64 { return f.sinceLinear }

// Linear reports whether the search takes linear steps (it is in its ping-pong zone).
func (f *SplitKeyFinder) Linear() bool { return f.linear }

// Switches is the number of strategy switches so far.
func (f *SplitKeyFinder) Switches() int { return f.switches }

// SplitKey returns the current estimate (nil before the first request): keys below it and keys at or
// above it should receive equal load. In linear mode it is the average of the recent estimates (see
// SearchConfig.AverageOver).
func (f *SplitKeyFinder) SplitKey() []byte {
	if f.avgValid {
		return f.fr.key(uint64(f.avg))
	}
	return append([]byte(nil), f.split...)
}

// Observe updates the estimate with one request for key.
func (f *SplitKeyFinder) Observe(key []byte) {
	f.observed++
	if f.linear {
		f.sinceLinear++
	}
	oldLo, oldHi := f.lowest, f.highest
	if f.lowest == nil || bytes.Compare(key, f.lowest) < 0 {
		f.lowest, f.frameDirty = append([]byte(nil), key...), true
	}
	if f.highest == nil || bytes.Compare(key, f.highest) > 0 {
		f.highest, f.frameDirty = append([]byte(nil), key...), true
	}
	for i, b := range key {
		switch {
		case i >= len(f.mins):
			f.mins, f.maxs, f.frameDirty = append(f.mins, b), append(f.maxs, b), true
		case b < f.mins[i]:
			f.mins[i], f.frameDirty = b, true
		case b > f.maxs[i]:
			f.maxs[i], f.frameDirty = b, true
		}
	}
	if f.split == nil {
		f.split = append([]byte(nil), key...)
		return
	}
	// Algorithm 4, lines 17–24. Ties go up, so that at equilibrium the keys below the estimate carry
	// half of the load: a range split at the estimate keeps exactly those on its left.
	dir := -1
	if bytes.Compare(key, f.split) >= 0 {
		dir = 1
	}
	f.track(dir)
	if f.frameDirty {
		old := f.fr
		f.fr = newFrame(f.lowest, f.highest, f.mins, f.maxs)
		f.frameDirty, f.posValid = false, false
		if f.avgValid {
			f.avg = float64(f.fr.pos(old.key(uint64(f.avg))))
		}
		if oldLo != nil && f.band > 0 {
			// Keep the band the same size in keys when the coordinate changes.
			if before := float64(old.pos(oldHi)) - float64(old.pos(oldLo)); before > 0 {
				f.band *= (float64(f.fr.pos(oldHi)) - float64(f.fr.pos(oldLo))) / before
			}
		}
	}
	if !f.posValid {
		f.posLo, f.posHi, f.posValid = f.fr.pos(f.lowest), f.fr.pos(f.highest), true
	}
	lo, hi := f.posLo, f.posHi
	if hi <= lo {
		return
	}
	s, k := f.fr.pos(f.split), f.fr.pos(key)
	span := float64(hi - lo)
	if f.band <= 0 {
		f.band = span / 4
	}
	if math.Abs(float64(k)-float64(s)) <= f.band {
		f.band *= f.shrink
	} else {
		f.band *= f.grow
	}
	f.band = math.Min(math.Max(f.band, 1), span)

	var step float64
	if f.linear {
		step = f.band / f.cfg.LinearDivisor
	} else {
		n := float64(f.run)
		step = f.band / f.cfg.ExponentialDivisor * n * n
	}
	step = math.Min(math.Max(step, 1), span)
	d := uint64(step)
	switch {
	case dir > 0 && (s >= hi || hi-s <= d):
		f.split = append(f.split[:0], f.highest...)
	case dir > 0:
		f.split = f.fr.keyInto(f.split, s+d)
	case s <= lo || s-lo <= d:
		f.split = append(f.split[:0], f.lowest...)
	default:
		f.split = f.fr.keyInto(f.split, s-d)
	}
	if f.linear && f.cfg.AverageOver > 0 {
		x := float64(f.fr.pos(f.split))
		if !f.avgValid {
			f.avg, f.avgValid = x, true
		} else {
			f.avg += (x - f.avg) / float64(f.cfg.AverageOver)
		}
	}
}

// track records a move in dir and switches strategy when the ping-pong zone is entered or left.
func (f *SplitKeyFinder) track(dir int) {
	if dir == f.dir {
		f.run++
		f.flips = 0
	} else {
		if f.dir != 0 {
			f.flips++
		}
		f.run = 1
	}
	f.dir = dir
	if f.cfg.Strategy != SearchPingPong {
		return
	}
	switch {
	case !f.linear && f.flips >= 2*f.cfg.PingPongPairs-1:
		f.linear, f.sinceLinear = true, 0
		f.switches++
	case f.linear && f.cfg.Runaway > 0 && f.run >= f.cfg.Runaway:
		f.linear, f.sinceLinear, f.avgValid = false, 0, false
		f.switches++
	}
}

// frame maps keys to integer coordinates: the bytes after a fixed prefix are digits of a mixed radix
// number, digit i ranging over [min_i, max_i] (positions where every key has the same byte, and those
// beyond 62 bits of precision, are left out). When precision allows, two more base-256 digits after
// the longest key let the estimate move by a fraction of the distance between adjacent keys, so a
// linear step can be smaller than one key (in the thesis's integer key space it is exactly one). The
// map is monotone on the keys seen.
type frame struct {
	base     []byte // the prefix, then each later position's smallest byte; a key's skeleton
	digits   []digit
	fracFrom int // index of the first fractional byte in produced keys, or -1
}

type digit struct {
	at    int
	min   byte
	radix uint64
}

// fractionDigits is the number of base-256 digits added below the last key byte.
const fractionDigits = 2

func newFrame(lowest, highest, mins, maxs []byte) frame {
	p := 0
	for p < len(lowest) && p < len(highest) && lowest[p] == highest[p] {
		p++
	}
	fr := frame{fracFrom: -1}
	length, total, complete := p, uint64(1), true
	for i := p; i < len(mins); i++ {
		r := uint64(maxs[i]) - uint64(mins[i]) + 1
		if r == 1 {
			continue
		}
		if total > (1<<62)/r {
			complete = false
			break
		}
		total *= r
		fr.digits = append(fr.digits, digit{at: i, min: mins[i], radix: r})
		length = i + 1
	}
	if complete && total <= (1<<62)>>(8*fractionDigits) {
		length = len(mins)
		fr.fracFrom = length
		for j := 0; j < fractionDigits; j++ {
			fr.digits = append(fr.digits, digit{at: length, min: 0, radix: 256})
			length++
		}
	}
	fr.base = make([]byte, length)
	copy(fr.base, lowest[:p])
	copy(fr.base[p:], mins[p:min(length, len(mins))])
	return fr
}

func (fr frame) pos(k []byte) uint64 {
	var v uint64
	for _, d := range fr.digits {
		b := d.min
		if d.at < len(k) {
			b = k[d.at]
		}
		x := uint64(0)
		if b > d.min {
			x = min(uint64(b-d.min), d.radix-1)
		}
		v = v*d.radix + x
	}
	return v
}

// key returns a key whose coordinate is v: the skeleton with each digit position set, without
// trailing zero fractional bytes.
func (fr frame) key(v uint64) []byte { return fr.keyInto(nil, v) }

// keyInto is key, made in buf's storage (the search's estimate changes with every request).
func (fr frame) keyInto(buf []byte, v uint64) []byte {
	out := append(buf[:0], fr.base...)
	for j := len(fr.digits) - 1; j >= 0; j-- {
		d := fr.digits[j]
		out[d.at] = d.min + byte(v%d.radix)
		v /= d.radix
	}
	if fr.fracFrom >= 0 {
		for len(out) > fr.fracFrom && out[len(out)-1] == 0 {
			out = out[:len(out)-1]
		}
	}
	return out
}

// ReservoirMedian is the baseline split-key estimate: the median key of a uniform reservoir sample
// (Vitter's algorithm R) of the requests. It needs Size keys of memory where SplitKeyFinder needs three.
type ReservoirMedian struct {
	size int
	keys [][]byte
	n    uint64
	rng  *rand.Rand
}

// NewReservoirMedian returns a baseline keeping size keys, reproducible with seed.
func NewReservoirMedian(size int, seed uint64) *ReservoirMedian {
	return &ReservoirMedian{size: size, rng: rand.New(rand.NewPCG(seed, ^seed))}
}

// Observe adds one request for key.
func (m *ReservoirMedian) Observe(key []byte) {
	m.n++
	if len(m.keys) < m.size {
		m.keys = append(m.keys, append([]byte(nil), key...))
		return
	}
	if j := m.rng.Uint64N(m.n); j < uint64(m.size) {
		m.keys[j] = append(m.keys[j][:0], key...)
	}
}

// SplitKey returns the median of the kept keys (nil if none): the left half gets the keys below it.
func (m *ReservoirMedian) SplitKey() []byte {
	if len(m.keys) == 0 {
		return nil
	}
	s := append([][]byte(nil), m.keys...)
	sort.Slice(s, func(i, j int) bool { return bytes.Compare(s[i], s[j]) < 0 })
	return append([]byte(nil), s[len(s)/2]...)
}
