package enginereader

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shoaldb/shoal/hints"
	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// Pebble reserves each memtable's size out of the block cache, so the memtable is kept small here
// (with 4 MiB memtables, a 1 MiB cache kept only about a third of the hot set).
const (
	engineKeys     = 16384   // 1 KiB values: 16 MiB of data
	engineCache    = 2 << 20 // 8× smaller than the data
	engineMemtable = 256 << 10
	engineValue    = 1024
	hotEvery       = 160 // the hot set: every 160th key (~100 keys, ~100 distinct data blocks)
	scanStart      = 8000
	scanRows       = 40
	engineRange    = 5
	engineLeader   = 1
)

func engineKey(i int) []byte { return []byte(fmt.Sprintf("user%08d", i)) }

func engineOptions(create bool) storage.Options {
	return storage.Options{CreateIfMissing: create, CacheBytes: engineCache, MemTableBytes: engineMemtable,
		Device: &emudisk.Options{NoPageCache: true}}
}

// loadEngine writes the data set into a new store in dir, compacts it into sstables and closes it.
func loadEngine(t testing.TB, dir string) {
	t.Helper()
	eng, err := storage.Open(dir, engineOptions(true))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, engineValue)
	for i := 0; i < engineKeys; {
		b := eng.NewBatch()
		for j := 0; j < 256 && i < engineKeys; j, i = j+1, i+1 {
			for k := range val {
				val[k] = byte(rng.Uint32())
			}
			if err := b.Set(storage.UserDataKey(engineKey(i)), val); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if err := eng.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	if err := eng.DB().Compact(context.Background(), []byte{0}, []byte{0xff}, false); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
}

type hotSet struct {
	points [][]byte
	scan   [][]byte // the rows of the hot scan
}

func theHotSet() hotSet {
	var h hotSet
	for i := hotEvery / 2; i < engineKeys; i += hotEvery {
		h.points = append(h.points, engineKey(i))
	}
	for i := scanStart; i < scanStart+scanRows; i++ {
		h.scan = append(h.scan, engineKey(i))
	}
	return h
}

// readPass reads keys through the engine's ordinary point-read path (what a leader's Get does) and
// returns the block-cache hit ratio of the pass and the bytes it read from the emulated device.
func readPass(t *testing.T, eng *storage.Engine, keys [][]byte) (hitRatio float64, deviceBytes int64) {
	t.Helper()
	s0, d0 := eng.Stats(), eng.DeviceStats()
	for _, k := range keys {
		if _, ok, err := eng.Get(storage.UserDataKey(k)); err != nil || !ok {
			t.Fatalf("get %s: %v %v", k, ok, err)
		}
	}
	s1, d1 := eng.Stats(), eng.DeviceStats()
	hits, misses := s1.BlockCacheHits-s0.BlockCacheHits, s1.BlockCacheMisses-s0.BlockCacheMisses
	return float64(hits) / float64(hits+misses), d1.ReadBytes - d0.ReadBytes
}

// A node that only receives hints — captured on a leader, shipped, replayed through the EngineReader
// on a real Pebble engine whose block cache is 8× smaller than its data and whose disk has no page
// cache — serves the hot keys from its block cache afterwards; without hints the same reads miss.
func TestHintsWarmARealEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 8 MiB into a real engine")
	}
	dir := t.TempDir()
	loadEngine(t, dir)
	hot := theHotSet()
	all := append(append([][]byte(nil), hot.points...), hot.scan...)

	// Without hints: a freshly opened engine (cold cache) reads the hot set from disk.
	cold, err := storage.Open(dir, engineOptions(false))
	if err != nil {
		t.Fatal(err)
	}
	coldRatio, coldBytes := readPass(t, cold, all)
	if err := cold.Close(); err != nil {
		t.Fatal(err)
	}

	// With hints: the same cold start, then the follower only receives hints from a leader.
	eng, err := storage.Open(dir, engineOptions(false))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	follower, err := hints.New(hints.Config{NodeID: 2, Peers: func(uint64) []uint64 { return nil },
		Applier: hints.ApplierConfig{WarmthWindow: 1}}, sendFunc(nil), New(eng, nil))
	if err != nil {
		t.Fatal(err)
	}
	follower.Start()
	defer follower.Close()
	deliver := sendFunc(func(b *pb.HintBatch) { follower.Receive(b) })
	leader, err := hints.New(hints.Config{NodeID: engineLeader, Peers: func(uint64) []uint64 { return []uint64{2} },
		Shipper: hints.ShipperConfig{FlushInterval: time.Hour}}, deliver, New(eng, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	leader.Start()

	round := func(n int) hints.Warmth {
		for r := 0; r < 3; r++ { // each read served three times in the window: summarized
			for _, k := range hot.points {
				leader.Record(engineRange, k)
			}
			leader.RecordScan(engineRange, hot.scan[0], nil, scanRows, false)
		}
		leader.Flush()
		want := uint64(n * (len(hot.points) + 1))
		eventually(t, 30*time.Second, "the follower replays the round", func() bool { return follower.Metrics().Applied == want })
		return follower.Warmth(engineRange)
	}
	first := round(1)
	second := round(2)
	warmRatio, warmBytes := readPass(t, eng, all)

	t.Logf("hot set %d keys + a %d-row scan; cold: hit ratio %.2f, %d KiB from disk; after hints: %.2f, %d KiB",
		len(hot.points), scanRows, coldRatio, coldBytes>>10, warmRatio, warmBytes>>10)
	t.Logf("replay warmth: first round %v; second round %v", first, second)
	// Cold, every read still finds the table's index and filter blocks cached after the first one
	// (about two hits per data-block miss), so the cold ratio is near 2/3; the disk bytes show the misses.
	if coldRatio > 0.75 || coldBytes < int64(len(all))*engineValue/2 {
		t.Fatalf("cold pass hit ratio %.2f with %d bytes read: the setup is not cold", coldRatio, coldBytes)
	}
	if warmRatio < 0.9 {
		t.Fatalf("after hints the hot set's hit ratio is %.2f (cold %.2f), want ≥ 0.9", warmRatio, coldRatio)
	}
	if warmBytes > coldBytes/10 {
		t.Fatalf("after hints the hot set still read %d bytes from disk (cold %d)", warmBytes, coldBytes)
	}
	// The follower's own warmth measure tells the same story: the first round's replays missed, the
	// second round's hit, and a warm-before-transfer check passes.
	if !(first.HitRatio < 0.6) || second.HitRatio < 0.9 {
		t.Fatalf("replay hit ratio first %.2f second %.2f", first.HitRatio, second.HitRatio)
	}
	if _, err := follower.WaitWarm(context.Background(), engineRange, hints.WarmCriteria{MinHitRatio: 0.9, MinReplays: 50, MaxApplyLag: 5 * time.Second}, time.Second); err != nil {
		t.Fatal(err)
	}
	if m := follower.Metrics(); m.ReplayCacheHit == 0 || m.ReplayCacheMiss == 0 {
		t.Fatalf("replay stats not reported: %+v", m)
	}
}

func TestEngineReaderSpans(t *testing.T) {
	dir := t.TempDir()
	eng, err := storage.Open(dir, storage.Options{CreateIfMissing: true, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	b := eng.NewBatch()
	for i := 0; i < 100; i++ {
		b.Set(storage.UserDataKey(engineKey(i)), []byte("v"))
		b.Set(storage.MetaDataKey(engineKey(i)), []byte("m"))
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := eng.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	spans := map[uint64][3][]byte{
		1: {engineKey(0), engineKey(50), []byte("meta")},
		2: {engineKey(50), nil, nil},
	}
	r := New(eng, func(id uint64) ([]byte, []byte, bool, bool) {
		s, ok := spans[id]
		return s[0], s[1], s[2] != nil, ok
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		rangeID uint64
		do      func(uint64) (hints.ReplayStats, error)
		err     error
		touches bool
	}{
		{"get in span", 2, func(id uint64) (hints.ReplayStats, error) { return r.Get(ctx, id, engineKey(60)) }, nil, true},
		{"get in the meta keyspace", 1, func(id uint64) (hints.ReplayStats, error) { return r.Get(ctx, id, engineKey(10)) }, nil, true},
		{"get outside the span", 2, func(id uint64) (hints.ReplayStats, error) { return r.Get(ctx, id, engineKey(10)) }, hints.ErrNoReplica, false},
		{"no replica", 3, func(id uint64) (hints.ReplayStats, error) { return r.Get(ctx, id, engineKey(10)) }, hints.ErrNoReplica, false},
		{"scan clamped into the span", 1, func(id uint64) (hints.ReplayStats, error) {
			return r.Scan(ctx, id, nil, engineKey(99), 1000, false)
		}, nil, true},
		{"reverse scan", 2, func(id uint64) (hints.ReplayStats, error) { return r.Scan(ctx, id, engineKey(50), nil, 5, true) }, nil, true},
		{"scan entirely outside the span", 1, func(id uint64) (hints.ReplayStats, error) {
			return r.Scan(ctx, id, engineKey(60), engineKey(70), 10, false)
		}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := tc.do(tc.rangeID)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if touched := st.CacheHit+st.CacheMiss > 0; touched != tc.touches {
				t.Fatalf("stats %+v: touched blocks %v, want %v", st, touched, tc.touches)
			}
		})
	}
	// Replays never write: the engine's contents are unchanged.
	it, err := eng.NewIter([]byte{0}, []byte{0xff})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	it.Close()
	if n != 200 {
		t.Fatalf("%d keys after replays, want 200", n)
	}
}

// sendFunc is a hints.Sender that hands every batch to a function (nil: drops them).
type sendFunc func(b *pb.HintBatch)

func (f sendFunc) Send(_ context.Context, _ uint64, b *pb.HintBatch) error {
	if f != nil {
		f(b)
	}
	return nil
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
