package storage

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/shoaldb/shoal/storage/emudisk"
)

// A sampled read reports the blocks it loaded: from disk once, then from the cache; its value and
// absence agree with Get; a key's offset grows with the key.
func TestGetWithStats(t *testing.T) {
	e := compactedRecords(t)
	k := UserDataKey([]byte("k01000"))
	v, found, first, err := e.GetWithStats(k)
	if err != nil || !found || len(v) != 100 {
		t.Fatalf("get: %v %v %d", err, found, len(v))
	}
	_, _, second, _ := e.GetWithStats(k)
	if first.Bytes == 0 || second.Bytes == 0 || !second.Hit() {
		t.Fatalf("first read %+v, second %+v: the second must load its blocks from the cache", first, second)
	}
	if _, found, _, err := e.GetWithStats(UserDataKey([]byte("k01000x"))); err != nil || found {
		t.Fatalf("absent key: found %v, %v", found, err)
	}
	lo := UserDataKey(nil)
	a, _ := e.Offset(lo, UserDataKey([]byte("k00100")))
	z, _ := e.Offset(lo, UserDataKey([]byte("k01900")))
	if z <= a {
		t.Fatalf("offsets %d, %d: a later key must lie further", a, z)
	}
	if e.BlockBytes() != 4096 || e.CacheBytes() != DefaultCacheBytes {
		t.Fatalf("block %d, cache %d", e.BlockBytes(), e.CacheBytes())
	}
}

// The room for blocks a node reports is the cache less the memtables Pebble reserves in it: reads
// over more data than the cache fill it to that room and no further.
func TestBlockCacheCapacityIsTheRoomForBlocks(t *testing.T) {
	const cache, memtable = 4 << 20, 1 << 20
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true, CacheBytes: cache, MemTableBytes: memtable})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	val := make([]byte, 1000)
	const n = 12000 // 12 MB: three times the cache
	key := func(i int) []byte { return append([]byte{prefixUser}, fmt.Sprintf("k%06d", i)...) }
	for i := range n {
		binary.LittleEndian.PutUint64(val, uint64(i)*0x9e3779b97f4a7c15) // distinct blocks
		b := e.NewBatch()
		if err := b.Set(key(i), val); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.db.Flush(); err != nil {
		t.Fatal(err)
	}
	room := e.Stats().BlockCacheCapacity
	if room == 0 || room > cache-memtable {
		t.Fatalf("room for blocks %d of a %d cache beside %d memtables: want at most one memtable's less", room, cache, memtable)
	}
	for i := range n {
		if _, _, err := e.Get(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	held := uint64(e.db.Metrics().BlockCache.Size)
	if held > room+room/20 || held < room*3/4 {
		t.Fatalf("cache holds %d bytes of blocks after reading 3x its size; reported room %d", held, room)
	}
}

func TestBlockRoomBytes(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want int64
	}{
		{Options{}, DefaultCacheBytes - 2*DefaultMemTableBytes},
		{Options{CacheBytes: 4 << 20, MemTableBytes: 1 << 20}, 2 << 20},
		{Options{CacheBytes: 2 << 20, MemTableBytes: 1 << 20}, 0},
		{Options{CacheBytes: 1 << 20, MemTableBytes: 1 << 20}, 0},
	} {
		if got := tc.o.BlockRoomBytes(); got != tc.want {
			t.Errorf("cache %d, memtables %d: room %d, want %d", tc.o.CacheBytes, tc.o.MemTableBytes, got, tc.want)
		}
	}
}

// Tables lists the tables of a span by level, with their index and filter bytes only when asked.
func TestTables(t *testing.T) {
	e := compactedRecords(t)
	lo, hi := DataSpan(false, nil, nil)
	plain, err := e.Tables(lo, hi, false)
	if err != nil || len(plain) == 0 {
		t.Fatalf("tables: %v, %v", plain, err)
	}
	withProps, err := e.Tables(lo, hi, true)
	if err != nil || len(withProps) != len(plain) {
		t.Fatalf("tables with properties: %d, %v; without: %d", len(withProps), err, len(plain))
	}
	for i, ti := range withProps {
		if ti.Level != 6 || ti.Size == 0 || !ti.HasProps || ti.IndexFilterBytes == 0 || plain[i].HasProps {
			t.Fatalf("table %+v (without properties %+v): want level 6, a size, index and filter bytes only when asked", ti, plain[i])
		}
	}
	if none, err := e.Tables(UserDataKey([]byte("z")), UserDataKey([]byte("zz")), false); err != nil || len(none) != 0 {
		t.Fatalf("a span without data: %v, %v", none, err)
	}
}

// compactedRecords is an engine holding records k00000…k01999 of 100 bytes, compacted.
func compactedRecords(t *testing.T) *Engine {
	t.Helper()
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	b := e.NewBatch()
	for i := range 2000 {
		if err := b.Set(UserDataKey(fmt.Appendf(nil, "k%05d", i)), make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if err := e.CompactAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	return e
}

// A key's offset is estimated once while the tables stay the same — an estimate reads a table's
// properties from disk — and anew once they change.
func TestOffsetRemembered(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true, Device: &emudisk.Options{NoPageCache: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	put := func(prefix string, n int) {
		b := e.NewBatch()
		for i := range n {
			if err := b.Set(UserDataKey(fmt.Appendf(nil, "%s%05d", prefix, i)), make([]byte, 100)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(false); err != nil {
			t.Fatal(err)
		}
	}
	put("k", 2000)
	if err := e.CompactAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	lo, k := UserDataKey(nil), UserDataKey([]byte("k01000"))
	r0 := e.DeviceStats().ReadOps
	first, err := e.Offset(lo, k)
	r1 := e.DeviceStats().ReadOps
	again, _ := e.Offset(lo, k)
	if r2 := e.DeviceStats().ReadOps; r1 == r0 || r2 != r1 || again != first || first == 0 {
		t.Fatalf("offset %d (%v) with %d device reads, again %d with %d: want it read once, then remembered", first, err, r1-r0, again, r2-r1)
	}
	put("a", 2000) // keys before k, in a new table
	if err := e.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	if after, _ := e.Offset(lo, k); after <= first {
		t.Fatalf("offset %d after a table of keys before it was flushed, %d before: want it estimated anew", after, first)
	}
}
