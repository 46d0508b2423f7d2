package storage

import (
	"fmt"
	"testing"
)

// A sampled read reports the blocks it loaded: from disk once, then from the cache; its value and
// absence agree with Get; a key's offset grows with the key.
func TestGetWithStats(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
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
