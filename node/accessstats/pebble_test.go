package accessstats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shoaldb/shoal/plan/usage"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// The histograms, against Pebble's own block cache: a compacted store of 20 000 records of 1 000 B
// (≈ 5 000 data blocks, a room of ≈ 200 for them) read by uniform, zipfian (s = 1.1, hot keys
// scattered), zipf-clustered and hotspot (80 % of the reads on 20 % of the keys) gets, 1 in 4
// measured and placed, as a node does, every key (rich) or at most 15 a heartbeat (a busy node's
// budget); the prediction in the cache's room for data blocks (the room less the tables' index and
// filter bytes) against the share of the measured reads that hit. Within 5 points each; on this
// machine within 2.8 (the hotspot's, rich), 1.3 on average. With one tail exponent a range, fitted
// where the hot region ends and to chance, the hotspot's was 7.6 points high, uniform reads' 2.3:
// 2.6 on average. Under the race detector only the busy node's budget runs.
func TestHistogramAgainstPebbleCache(t *testing.T) {
	if testing.Short() {
		t.Skip("reads a store of 20 MB several times")
	}
	const n, memTable = 20000, 1 << 20
	e, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true, MemTableBytes: memTable,
		CacheBytes: storage.CacheBytesFor(1<<20, memTable), Device: &emudisk.Options{NoPageCache: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	key := func(i int) []byte { return fmt.Appendf(nil, "usage/%08d", i) }
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < n; i += 100 {
		b := e.NewBatch()
		for j := i; j < i+100; j++ {
			v := make([]byte, 1000)
			for k := range v {
				v[k] = byte(rng.Uint32())
			}
			if err := b.Set(storage.UserDataKey(key(j)), v); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.CompactAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	lo, hi := storage.DataSpan(false, nil, nil)
	ifb, err := ReadIndexFilter(e, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	room := float64(e.Stats().BlockCacheCapacity)
	for _, b := range ifb {
		room -= float64(b)
	}
	room /= float64(e.BlockBytes())
	in := Input{BlockBytes: e.BlockBytes(), Bytes: e.ApproximateBytes(lo, hi),
		Offset: func(k []byte) (uint64, error) { return e.Offset(lo, storage.UserDataKey(k)) }}
	perm := rand.New(rand.NewPCG(5, 5)).Perm(n)
	for _, w := range pebbleWorkloads(n, perm) {
		budgets := []int{1024, 15}
		if raceEnabled {
			budgets = budgets[1:] // the thin sample the estimator must not read as skew
		}
		for _, keys := range budgets {
			rng := rand.New(rand.NewPCG(2, uint64(keys)))
			draw := w.draw(rng)
			for range 10000 { // the cache takes the workload's blocks
				e.Get(storage.UserDataKey(key(draw())))
			}
			predicted, observed := pebbleRun(t, e, in, keys, func() []byte { return key(draw()) }, room)
			t.Logf("%s, %d keys placed a heartbeat: predicted %.3f, observed %.3f", w.name, keys, predicted, observed)
			if math.Abs(predicted-observed) > 0.05 {
				t.Errorf("%s, %d keys a heartbeat: predicted %.3f, Pebble's cache served %.3f", w.name, keys, predicted, observed)
			}
		}
	}
}

type pebbleWorkload struct {
	name string
	draw func(*rand.Rand) func() int
}

func pebbleWorkloads(n int, perm []int) []pebbleWorkload {
	zipf := func(rng *rand.Rand) *rand.Zipf { return rand.NewZipf(rng, 1.1, 1, uint64(n-1)) }
	return []pebbleWorkload{
		{"uniform", func(rng *rand.Rand) func() int { return func() int { return rng.IntN(n) } }},
		{"zipfian", func(rng *rand.Rand) func() int { z := zipf(rng); return func() int { return perm[z.Uint64()] } }},
		{"zipf-clustered", func(rng *rand.Rand) func() int { z := zipf(rng); return func() int { return int(z.Uint64()) } }},
		{"hotspot", func(rng *rand.Rand) func() int {
			return func() int {
				if rng.Float64() < 0.8 {
					return rng.IntN(n / 5)
				}
				return n/5 + rng.IntN(n-n/5)
			}
		}},
	}
}

// pebbleRun reads 20 s of 1 000 gets a second, 1 in 4 measured (GetWithStats) and tracked with at
// most keys placed a heartbeat, and returns the prediction for the last report's histogram in room
// blocks and the measured reads' hit ratio.
func pebbleRun(t *testing.T, e *storage.Engine, in Input, keys int, next func() []byte, room float64) (predicted, observed float64) {
	tr := New(Config{Window: 10 * time.Second, SampleEvery: 4, MaxKeys: keys, MaxSlots: 1 << 15})
	now := time.Unix(1000, 0)
	tr.Take(1, in, now)
	var measured, hits int
	var rep Report
	for range 20 {
		for i := range uint64(1000) {
			k := next()
			if !tr.SampleRead(1, i) {
				e.Get(storage.UserDataKey(k))
				continue
			}
			_, _, st, err := e.GetWithStats(storage.UserDataKey(k))
			if err != nil {
				t.Fatal(err)
			}
			tr.PointRead(1, k, st)
			measured++
			if st.Hit() {
				hits++
			}
		}
		now = now.Add(time.Second)
		in.PointReads = 1000
		rep = tr.Take(1, in, now)
	}
	return usage.HitRatio(rep.Hist, room), float64(hits) / float64(measured)
}
