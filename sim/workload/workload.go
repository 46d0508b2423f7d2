// Package workload is the simulator's offered load: which records requests go to (a key
// distribution: uniform, zipfian, hotspot, latest, as YCSB defines them) and how many requests per
// second arrive over time (a rate curve: constant or diurnal). Every distribution answers two
// questions a simulator at 100 000 ranges needs without drawing every request: the share of requests
// that fall in a range of records, in closed form or from the YCSB generator's own inverse CDF, and a
// request's record drawn from inside a range (for the key samples load_split consumes).
//
// The zipfian and latest distributions are those of go-ycsb's generators (Gray et al.'s approximate
// zipfian; ScrambledZipfian hashes ranks with FNV-64 over 10¹⁰ items, as YCSB's "zipfian" request
// distribution does): the tests check the shares, and the hash, against go-ycsb itself.
//
// The package owns the distributions and rate curves. It must never know about nodes, ranges'
// replicas or the autopilot: it maps record indexes to request shares, nothing more.
package workload

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// KeyPrefix starts every record's key; Key(i) sorts as i does.
const KeyPrefix = "user"

// Key is record i's key: the prefix and 10¹² + i in decimal, so that keys sort as records do.
func Key(i int64) []byte { return strconv.AppendInt([]byte(KeyPrefix), 1e12+i, 10) }

// Index is the first record whose key is ≥ key (records of keys that are not record keys round up).
func Index(key []byte, records int64) int64 {
	return int64(sort.Search(int(records), func(i int) bool { return string(Key(int64(i))) >= string(key) }))
}

// Dist is a distribution of requests over records [0, N).
type Dist interface {
	// Name is the YCSB name: uniform, zipfian, hotspot, latest.
	Name() string
	// Share is the fraction of requests for records [lo, hi).
	Share(lo, hi int64) float64
	// Sample draws a request's record conditioned on it being in [lo, hi) (lo < hi).
	Sample(r *rand.Rand, lo, hi int64) int64
}

// New returns the named distribution over records [0, n).
func New(name string, n int64) (Dist, error) {
	if n <= 0 {
		return nil, fmt.Errorf("workload: %d records", n)
	}
	switch name {
	case "uniform":
		return Uniform{N: n}, nil
	case "zipfian":
		return NewZipfian(n), nil
	case "hotspot":
		return Hotspot{N: n, Lo: 0, Hot: max(1, n/1000), Ops: 0.9}, nil
	case "latest":
		return NewLatest(n), nil
	}
	return nil, fmt.Errorf("workload: unknown distribution %q (uniform, zipfian, hotspot, latest)", name)
}

// Uniform spreads requests evenly.
type Uniform struct{ N int64 }

// Name implements Dist.
func (Uniform) Name() string { return "uniform" }

// Share implements Dist.
func (u Uniform) Share(lo, hi int64) float64 { return float64(clampLen(lo, hi, 0, u.N)) / float64(u.N) }

// Sample implements Dist.
func (Uniform) Sample(r *rand.Rand, lo, hi int64) int64 { return lo + r.Int64N(hi-lo) }

// Hotspot sends Ops of the requests uniformly to the Hot records from Lo, the rest uniformly to the
// others (YCSB's hotspot generator, with the hot set placed anywhere).
type Hotspot struct {
	N, Lo, Hot int64
	Ops        float64
}

// Name implements Dist.
func (Hotspot) Name() string { return "hotspot" }

// Share implements Dist.
func (h Hotspot) Share(lo, hi int64) float64 {
	hot := clampLen(lo, hi, h.Lo, h.Lo+h.Hot)
	cold := clampLen(lo, hi, 0, h.N) - hot
	return h.Ops*float64(hot)/float64(h.Hot) + (1-h.Ops)*float64(cold)/float64(max(1, h.N-h.Hot))
}

// Sample implements Dist.
func (h Hotspot) Sample(r *rand.Rand, lo, hi int64) int64 {
	hlo, hhi := max(lo, h.Lo), min(hi, h.Lo+h.Hot)
	hot := max(0, hhi-hlo)
	wHot := h.Ops * float64(hot) / float64(h.Hot)
	wCold := (1 - h.Ops) * float64(hi-lo-hot) / float64(max(1, h.N-h.Hot))
	if hot > 0 && r.Float64()*(wHot+wCold) < wHot {
		return hlo + r.Int64N(hot)
	}
	for {
		if x := lo + r.Int64N(hi-lo); x < hlo || x >= hhi || hot == 0 {
			return x
		}
	}
}

// Tenants lays tenants out one after the other: tenant i holds records [Ends[i-1], Ends[i]) (the
// first from 0) and takes Ops[i] of the requests, spread uniformly over its records. Ops need not
// sum to 1: they are shares of their sum.
type Tenants struct {
	Ends []int64
	Ops  []float64
}

// Name implements Dist.
func (Tenants) Name() string { return "tenants" }

// weights are each tenant's share of the requests for records [lo, hi).
func (t Tenants) weights(lo, hi int64) []float64 {
	var sum float64
	for _, o := range t.Ops {
		sum += o
	}
	out := make([]float64, len(t.Ends))
	from := int64(0)
	for i, end := range t.Ends {
		if n := end - from; n > 0 && sum > 0 {
			out[i] = t.Ops[i] / sum * float64(clampLen(lo, hi, from, end)) / float64(n)
		}
		from = end
	}
	return out
}

// Share implements Dist (as weights' sum, without the slice: ledCurve asks it of every block).
func (t Tenants) Share(lo, hi int64) float64 {
	var sum, s float64
	for _, o := range t.Ops {
		sum += o
	}
	from := int64(0)
	for i, end := range t.Ends {
		if n := end - from; n > 0 && sum > 0 {
			s += t.Ops[i] / sum * float64(clampLen(lo, hi, from, end)) / float64(n)
		}
		from = end
	}
	return s
}

// Sample implements Dist: a tenant by its share of [lo, hi), then a record of it uniformly.
func (t Tenants) Sample(r *rand.Rand, lo, hi int64) int64 {
	w := t.weights(lo, hi)
	var sum float64
	for _, x := range w {
		sum += x
	}
	u := r.Float64() * sum
	from := int64(0)
	for i, end := range t.Ends {
		a, b := max(lo, from), min(hi, end)
		if u -= w[i]; b > a && (u < 0 || i == len(t.Ends)-1) {
			return a + r.Int64N(b-a)
		}
		from = end
	}
	return lo + r.Int64N(hi-lo)
}

func clampLen(lo, hi, a, b int64) int64 { return max(0, min(hi, b)-max(lo, a)) }

// gray is go-ycsb's zipfian generator over items ranks as a function of a uniform u (Gray et al.,
// "Quickly generating billion-record synthetic databases", SIGMOD 1994): rank 0 with probability
// 1/ζ(n), rank 1 with 0.5^θ/ζ(n), else n·(ηu − η + 1)^(1/(1−θ)). Monotone in u, so it has an
// inverse, cdf.
type gray struct {
	items             float64
	theta, zetan, eta float64
}

const theta = 0.99 // YCSB's zipfian constant

func newGray(items float64, zetan float64) gray {
	zeta2 := 1 + math.Pow(0.5, theta)
	eta := (1 - math.Pow(2/items, 1-theta)) / (1 - zeta2/zetan)
	return gray{items: items, theta: theta, zetan: zetan, eta: eta}
}

// rank is the rank the generator returns for u.
func (g gray) rank(u float64) int64 {
	uz := u * g.zetan
	switch {
	case uz < 1:
		return 0
	case uz < 1+math.Pow(0.5, g.theta):
		return 1
	}
	return int64(g.items * math.Pow(g.eta*u-g.eta+1, 1/(1-g.theta)))
}

// cdf is P(rank < k).
func (g gray) cdf(k float64) float64 {
	switch {
	case k <= 0:
		return 0
	case k <= 1:
		return 1 / g.zetan
	case k <= 2:
		return (1 + math.Pow(0.5, g.theta)) / g.zetan
	}
	u := (math.Pow(k/g.items, 1-g.theta) - 1 + g.eta) / g.eta
	return math.Min(1, math.Max(u, (1+math.Pow(0.5, g.theta))/g.zetan))
}

// zeta is Σ_{i=1..n} i^−θ: exact up to 10⁴, then the Euler–Maclaurin tail (error < 10⁻¹²).
func zeta(n int64) float64 {
	m := min(n, 10_000)
	var s float64
	for i := int64(1); i <= m; i++ {
		s += math.Pow(float64(i), -theta)
	}
	if n == m {
		return s
	}
	a, b := float64(m), float64(n)
	s += (math.Pow(b, 1-theta) - math.Pow(a, 1-theta)) / (1 - theta)
	s += (math.Pow(b, -theta) - math.Pow(a, -theta)) / 2
	s += theta / 12 * (math.Pow(a, -theta-1) - math.Pow(b, -theta-1))
	return s
}

// Latest favours the newest records (YCSB's "latest": record N−1−rank, rank zipfian over N).
type Latest struct {
	N int64
	g gray
}

// NewLatest returns the latest distribution over n records.
func NewLatest(n int64) Latest { return Latest{N: n, g: newGray(float64(n), zeta(n))} }

// Name implements Dist.
func (Latest) Name() string { return "latest" }

// Share implements Dist.
func (l Latest) Share(lo, hi int64) float64 {
	lo, hi = max(lo, 0), min(hi, l.N)
	if lo >= hi {
		return 0
	}
	// records [lo, hi) are ranks (N−1−hi, N−1−lo], i.e. [N−hi, N−lo).
	return l.g.cdf(float64(l.N-lo)) - l.g.cdf(float64(l.N-hi))
}

// Sample implements Dist: a uniform u over the range's part of the CDF, through the generator.
func (l Latest) Sample(r *rand.Rand, lo, hi int64) int64 {
	a, b := l.g.cdf(float64(l.N-hi)), l.g.cdf(float64(l.N-lo))
	rank := l.g.rank(a + r.Float64()*(b-a))
	return min(max(l.N-1-rank, lo), hi-1)
}

// Zipfian is YCSB's "zipfian" request distribution (go-ycsb's ScrambledZipfian): a zipfian rank over
// 10¹⁰ items, hashed onto the N records. The hottest ranks (those holding most of the mass) are
// hashed one by one; the remaining ranks are so many per record that their mass is spread evenly.
type Zipfian struct {
	N    int64
	idx  []int64   // records of the top ranks, sorted
	cum  []float64 // cum[i]: mass of idx[:i]
	rest float64   // mass of the other ranks, spread evenly
}

// scrambledItems and scrambledZetan are go-ycsb's constants for ScrambledZipfian.
const (
	scrambledItems = 10_000_000_000
	scrambledZetan = 26.46902820178302
)

// NewZipfian returns the scrambled zipfian over n records. A Zipfian is never changed once built,
// so the last few built are shared: building one hashes and sorts a million ranks (a second under
// the race detector), and a calibration or a test suite builds the same ones again and again.
func NewZipfian(n int64) *Zipfian {
	zipfians.Lock()
	defer zipfians.Unlock()
	for _, z := range zipfians.built {
		if z.N == n {
			return z
		}
	}
	z := newZipfian(n)
	zipfians.built = append(zipfians.built, z)
	if len(zipfians.built) > 4 {
		zipfians.built = zipfians.built[1:]
	}
	return z
}

// zipfians are the last Zipfians built (NewZipfian).
var zipfians struct {
	sync.Mutex
	built []*Zipfian
}

func newZipfian(n int64) *Zipfian {
	g := newGray(scrambledItems+1, scrambledZetan)
	top := min(int64(1)<<20, max(4096, 16*n))
	type hit struct {
		idx  int64
		mass float64
	}
	hits := make([]hit, top)
	prev := 0.0
	for k := int64(0); k < top; k++ {
		c := g.cdf(float64(k + 1))
		hits[k] = hit{hash64(k) % n, c - prev}
		prev = c
	}
	slices.SortFunc(hits, func(a, b hit) int { return cmp.Compare(a.idx, b.idx) }) // sort.Slice's order, without reflection
	z := &Zipfian{N: n, idx: make([]int64, top), cum: make([]float64, top+1), rest: 1 - prev}
	for i, h := range hits {
		z.idx[i] = h.idx
		z.cum[i+1] = z.cum[i] + h.mass
	}
	return z
}

// hash64 is go-ycsb's util.Hash64 (FNV-1a of the big-endian bytes, made non-negative), without its
// allocation per call: NewZipfian hashes a million ranks.
func hash64(n int64) int64 {
	h := uint64(14695981039346656037)
	for i := 56; i >= 0; i -= 8 {
		h ^= uint64(byte(uint64(n) >> i))
		h *= 1099511628211
	}
	if r := int64(h); r < 0 {
		return -r
	}
	return int64(h)
}

// Name implements Dist.
func (*Zipfian) Name() string { return "zipfian" }

func (z *Zipfian) topSpan(lo, hi int64) (i, j int) {
	i = sort.Search(len(z.idx), func(k int) bool { return z.idx[k] >= lo })
	j = sort.Search(len(z.idx), func(k int) bool { return z.idx[k] >= hi })
	return i, j
}

// Share implements Dist.
func (z *Zipfian) Share(lo, hi int64) float64 {
	lo, hi = max(lo, 0), min(hi, z.N)
	if lo >= hi {
		return 0
	}
	i, j := z.topSpan(lo, hi)
	return z.cum[j] - z.cum[i] + z.rest*float64(hi-lo)/float64(z.N)
}

// Sample implements Dist.
func (z *Zipfian) Sample(r *rand.Rand, lo, hi int64) int64 {
	i, j := z.topSpan(lo, hi)
	top := z.cum[j] - z.cum[i]
	even := z.rest * float64(hi-lo) / float64(z.N)
	if u := r.Float64() * (top + even); u < top {
		k := sort.Search(j-i, func(k int) bool { return z.cum[i+k+1]-z.cum[i] > u })
		return z.idx[i+min(k, j-i-1)]
	}
	return lo + r.Int64N(hi-lo)
}

// Rate is a request rate over time.
type Rate interface {
	// At is the offered requests per second at elapsed time d.
	At(d time.Duration) float64
}

// Constant is a steady rate.
type Constant float64

// At implements Rate.
func (c Constant) At(time.Duration) float64 { return float64(c) }

// Diurnal swings around Mean by ±Amplitude (a fraction) over Period, starting at the mean and
// rising: a day's traffic compressed into Period.
type Diurnal struct {
	Mean, Amplitude float64
	Period          time.Duration
}

// At implements Rate.
func (d Diurnal) At(t time.Duration) float64 {
	return d.Mean * (1 + d.Amplitude*math.Sin(2*math.Pi*t.Seconds()/d.Period.Seconds()))
}
