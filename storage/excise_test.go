package storage

import (
	"context"
	"fmt"
	"testing"
)

// TestExciseSpan: an excise removes exactly its span — flushed keys and ones still in the memtable —
// survives a reopen, leaves the tables that straddle it virtual instead of rewriting them (no
// compaction runs), and the neighbours' cached blocks stay cached.
func TestExciseSpan(t *testing.T) {
	dir := t.TempDir()
	e, err := Open(dir, Options{CreateIfMissing: true, CacheBytes: 32 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	key := func(i int) []byte { return fmt.Appendf(nil, "k%05d", i) }
	val := make([]byte, 200)
	b := e.NewBatch()
	for i := 0; i < 3000; i++ {
		if err := b.Set(key(i), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if err := e.CompactAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, e, string(key(1500)), "unflushed") // in the memtable: the excise must flush and drop it
	readAll := func(lo, hi int) {
		t.Helper()
		for i := lo; i < hi; i++ {
			if _, found, err := e.Get(key(i)); err != nil || !found {
				t.Fatalf("%s: found %v, err %v", key(i), found, err)
			}
		}
	}
	readAll(0, 1000)
	readAll(2000, 3000)
	compactions := e.DB().Metrics().Compact.Count
	missesBefore := e.Stats().BlockCacheMisses

	if err := e.ExciseSpan(context.Background(), key(1000), key(2000)); err != nil {
		t.Fatal(err)
	}
	if got := e.Excises(); got != 1 {
		t.Fatalf("Excises() = %d, want 1", got)
	}
	// With the span in the memtable Pebble queues the excise behind it, applied at the next flush.
	if err := e.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	m := e.DB().Metrics()
	if m.Compact.Count != compactions {
		t.Fatalf("the excise ran %d compactions", m.Compact.Count-compactions)
	}
	if m.NumVirtual() == 0 {
		t.Fatal("no virtual table: the straddling table was rewritten or dropped")
	}
	readAll(0, 1000)
	readAll(2000, 3000)
	// A virtual table reads its backing file's data blocks, cached under the backing file: the
	// misses allowed are each virtual table's index and filter block (~100 data blocks are re-read).
	if d := e.Stats().BlockCacheMisses - missesBefore; d > 2*int64(m.NumVirtual()) {
		t.Fatalf("re-reading the neighbours after the excise missed the cache %d times", d)
	}
	check := func(e *Engine) {
		t.Helper()
		for i := 0; i < 3000; i++ {
			_, found, err := e.Get(key(i))
			if err != nil {
				t.Fatal(err)
			}
			if want := i < 1000 || i >= 2000; found != want {
				t.Fatalf("%s found %v, want %v", key(i), found, want)
			}
		}
		it, err := e.NewIter(key(1000), key(2000))
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		if it.First() {
			t.Fatalf("a scan of the excised span found %s", it.Key())
		}
	}
	check(e)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e, err = Open(dir, Options{CacheBytes: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	check(e)
}
