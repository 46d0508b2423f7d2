package accessstats

import (
	"container/list"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shoaldb/shoal/plan/usage"
	"github.com/shoaldb/shoal/storage"
)

// lru is a simulated LRU cache of blocks.
type lru struct {
	room int
	ll   *list.List
	at   map[int]*list.Element
}

func (c *lru) read(b int) bool {
	if e, ok := c.at[b]; ok {
		c.ll.MoveToFront(e)
		return true
	}
	c.at[b] = c.ll.PushFront(b)
	if c.ll.Len() > c.room {
		delete(c.at, c.ll.Remove(c.ll.Back()).(int))
	}
	return false
}

// multiLevel's histogram predicts, by Che's approximation, the hit ratio a simulated LRU cache has
// on the blocks point reads load in a two-level store: keys of 4 to a block, a share f of them
// rewritten into upper blocks of 4 rewritten keys each; a get loads the newest version's block, a
// sampled read (one in 4) every version's. The histogram it corrects is the one the tracker builds:
// the range's reads spread over the blocks of every level (the bytes it places keys by). Left
// uncorrected, that histogram misses the blocks' rates by the levels' split.
func TestMultiLevelAgainstLRU(t *testing.T) {
	const (
		blocks  = 2000 // bottom level
		perBlk  = 4
		every   = 4
		reads   = 600000
		sampled = 1.0 / every
	)
	keys := blocks * perBlk
	for _, c := range []struct {
		name string
		s    float64 // zipf exponent of the keys' popularity (0: uniform)
		f    float64
		room int
	}{
		{"uniform, 25 % rewritten", 0, 0.25, 400},
		{"uniform, 10 % rewritten", 0, 0.10, 400},
		{"zipfian 1.1, 25 % rewritten", 1.1, 0.25, 300},
		{"zipfian 0.8, 50 % rewritten", 0.8, 0.5, 600},
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		pop := make([]float64, keys) // each key's share of the reads, keys in random order
		sum := 0.0
		for i, k := range rng.Perm(keys) {
			pop[k] = math.Pow(float64(i+1), -c.s)
			sum += pop[k]
		}
		cdf := make([]float64, keys)
		acc := 0.0
		for k := range pop {
			pop[k] /= sum
			acc += pop[k]
			cdf[k] = acc
		}
		upper := make([]int, keys) // a rewritten key's upper block (blocks numbered after the bottom's), else -1
		next := 0
		for _, k := range rng.Perm(keys) {
			upper[k] = -1
			if rng.Float64() < c.f {
				upper[k] = blocks + next/perBlk
				next++
			}
		}
		share := float64(next) / float64(keys) // the upper level's bytes per byte of the bottom's
		cache := &lru{room: c.room, ll: list.New(), at: map[int]*list.Element{}}
		var loads, hits, gets, getHits, samples, sampleHits int
		for i := range reads {
			k := min(sortSearch(cdf, rng.Float64()), keys-1)
			var bs []int
			switch {
			case upper[k] < 0:
				bs = []int{k / perBlk}
			case i%every == 0:
				bs = []int{upper[k], k / perBlk}
			default:
				bs = []int{upper[k]}
			}
			all := true
			for j, b := range bs {
				hit := cache.read(b)
				all = all && hit
				if i >= reads/4 { // after the warm-up
					loads++
					if hit {
						hits++
					}
					if j == 0 {
						gets++
						if hit {
							getHits++
						}
					}
				}
			}
			if i >= reads/4 && i%every == 0 {
				samples++
				if all {
					sampleHits++
				}
			}
		}
		// The tracker's histogram: reads placed over the bytes of both levels, each bottom block's
		// rate spread over 1 + share slots.
		var h usage.Histogram
		for b := 0; b < blocks; b++ {
			r := 0.0
			for k := b * perBlk; k < (b+1)*perBlk; k++ {
				r += pop[k]
			}
			h = append(h, usage.Bucket{Rate: r / (1 + share), Blocks: 1 + share})
		}
		observed := float64(hits) / float64(loads)
		got := usage.HitRatioLRU(multiLevel(h, share, sampled), float64(c.room))
		flat := usage.HitRatioLRU(h, float64(c.room))
		// What a sampled read sees (every level's block cached), as bench/usage predicts it.
		asSampled := got - math.Min(share, 1)*got*(1-got)
		t.Logf("%s: simulated %.3f, predicted %.3f, uncorrected %.3f; the gets' %.3f; the sampled reads' (every block cached) %.3f, predicted %.3f",
			c.name, observed, got, flat, float64(getHits)/float64(gets), float64(sampleHits)/float64(samples), asSampled)
		if math.Abs(got-observed) > 0.02 {
			t.Errorf("%s: predicted %.3f, simulated LRU %.3f (uncorrected %.3f)", c.name, got, observed, flat)
		}
	}
}

func sortSearch(cdf []float64, u float64) int {
	lo, hi := 0, len(cdf)
	for lo < hi {
		m := (lo + hi) / 2
		if cdf[m] < u {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// multiLevel keeps a compacted range's histogram and conserves the reads of the others: every get
// once, every sampled read of a rewritten key twice.
func TestMultiLevelReads(t *testing.T) {
	h := usage.Histogram{{Rate: 10, Blocks: 100}, {Rate: 1, Blocks: 900}}
	if got := multiLevel(h, 0, 0.25); len(got) != 2 || got[0] != h[0] {
		t.Fatalf("compacted: %v", got)
	}
	for _, upper := range []float64{0.25, 1, 2} {
		m := multiLevel(h, upper, 0.25)
		var reads, blocks float64
		for _, b := range m {
			reads += b.Rate * b.Blocks
			blocks += b.Blocks
		}
		f := math.Min(upper, 1)
		if want := 1900 * (1 + f*0.25); math.Abs(reads-want) > 1e-6 || math.Abs(blocks-1000) > 1e-6 {
			t.Errorf("upper %.2f: %.1f reads over %.1f blocks, want %.1f over 1000", upper, reads, blocks, want)
		}
	}
}

// UpperShare: the bytes above the deepest level per byte of it.
func TestUpperShare(t *testing.T) {
	for _, c := range []struct {
		ts   []storage.TableInfo
		want float64
	}{
		{nil, 0},
		{[]storage.TableInfo{{Level: 6, Size: 100}, {Level: 6, Size: 300}}, 0},
		{[]storage.TableInfo{{Level: 0, Size: 50}, {Level: 0, Size: 50}, {Level: 5, Size: 100}, {Level: 6, Size: 400}}, 0.5},
	} {
		if got := UpperShare(c.ts); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%+v: %.3f, want %.3f", c.ts, got, c.want)
		}
	}
}
