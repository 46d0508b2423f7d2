package mergeplan

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// Set is what the planner knows of one sorted run's keys: how many there are, and what a union with
// another run of the same kind holds. KeySet is exact; Sketch is a HyperLogLog estimate.
type Set interface {
	// Len is the number of distinct keys (an estimate for a Sketch).
	Len() float64
	// Union is the set of keys in either; other must be of the same kind.
	Union(other Set) Set
}

// KeySet is an exact set of 64-bit key hashes, sorted and without duplicates.
type KeySet []uint64

// Keys builds a KeySet from hashes in any order, with duplicates.
func Keys(h ...uint64) KeySet {
	s := slices.Clone(h)
	slices.Sort(s)
	return KeySet(slices.Compact(s))
}

// Len implements Set.
func (s KeySet) Len() float64 { return float64(len(s)) }

// Union implements Set by a merge of the two sorted slices.
func (s KeySet) Union(other Set) Set {
	o, ok := other.(KeySet)
	if !ok {
		panic(fmt.Sprintf("mergeplan: union of a KeySet with a %T", other))
	}
	out := make(KeySet, 0, max(len(s), len(o)))
	i, j := 0, 0
	for i < len(s) && j < len(o) {
		switch {
		case s[i] < o[j]:
			out = append(out, s[i])
			i++
		case s[i] > o[j]:
			out = append(out, o[j])
			j++
		default:
			out = append(out, s[i])
			i++
			j++
		}
	}
	out = append(out, s[i:]...)
	return append(out, o[j:]...)
}

// HashKey maps a key to the 64-bit hash both KeySet and Sketch take: FNV-1a, then a 64-bit finalizer so
// that the low and high bits HyperLogLog splits the hash into are both well mixed.
func HashKey(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	return h ^ h>>33
}

// SketchPrecision is the number of index bits of a Sketch: 2^14 one-byte registers (16 KiB per run),
// a standard error of 1.04/sqrt(2^14) ≈ 0.8 %.
const SketchPrecision = 14

// Sketch is a HyperLogLog sketch (Flajolet et al. 2007) of a run's key hashes. Its union is the
// register-wise maximum, so SmallestOutput can estimate the size of a merge without doing it — the
// estimate the research uses for that heuristic.
type Sketch struct {
	reg []uint8
}

// NewSketch returns an empty sketch.
func NewSketch() *Sketch { return &Sketch{reg: make([]uint8, 1<<SketchPrecision)} }

// Add records one key hash.
func (s *Sketch) Add(h uint64) {
	idx := h >> (64 - SketchPrecision)
	rest := h<<SketchPrecision | 1<<(SketchPrecision-1) // the guard bit bounds the rank
	if r := uint8(bits.LeadingZeros64(rest) + 1); r > s.reg[idx] {
		s.reg[idx] = r
	}
}

// SketchOf is the sketch of an exact set: what a planner with sketches instead of key sets would see.
func SketchOf(keys KeySet) *Sketch {
	s := NewSketch()
	for _, h := range keys {
		s.Add(h)
	}
	return s
}

// Len implements Set: the raw HyperLogLog estimate, with linear counting while registers are empty.
func (s *Sketch) Len() float64 {
	m := float64(len(s.reg))
	sum, zeros := 0.0, 0
	for _, r := range s.reg {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	est := 0.7213 / (1 + 1.079/m) * m * m / sum
	if est <= 2.5*m && zeros > 0 {
		return m * math.Log(m/float64(zeros))
	}
	return est
}

// Union implements Set.
func (s *Sketch) Union(other Set) Set {
	o, ok := other.(*Sketch)
	if !ok {
		panic(fmt.Sprintf("mergeplan: union of a Sketch with a %T", other))
	}
	out := &Sketch{reg: slices.Clone(s.reg)}
	for i, r := range o.reg {
		if r > out.reg[i] {
			out.reg[i] = r
		}
	}
	return out
}
