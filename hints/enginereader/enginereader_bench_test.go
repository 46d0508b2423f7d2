package enginereader

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/shoaldb/shoal/storage"
)

// benchEngine is loadEngine's data set reopened with a block cache that holds all of it, so that a
// replay costs only the CPU of the read path (what a follower pays per hint once warm).
func benchEngine(b *testing.B) *storage.Engine {
	dir := b.TempDir()
	loadEngine(b, dir)
	o := engineOptions(false)
	o.CacheBytes = 64 << 20
	eng, err := storage.Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	r := New(eng, nil)
	for i := 0; i < engineKeys; i++ {
		if _, err := r.Get(context.Background(), 1, engineKey(i)); err != nil {
			b.Fatal(err)
		}
	}
	return eng
}

// BenchmarkReplayGet: one replayed point read, all blocks cached (2.4-2.7 µs on a 2-core machine).
// Seeking a range batch's sorted keys with one shared iterator saved ~15 % of that
// (2.0-2.3 µs): not kept, since a follower's replays cost ~30 µs each on average, most of it the
// misses' reads (in a profile of a follower).
func BenchmarkReplayGet(b *testing.B) {
	r := New(benchEngine(b), nil)
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Get(ctx, 1, engineKey(rng.IntN(engineKeys))); err != nil {
			b.Fatal(err)
		}
	}
}
