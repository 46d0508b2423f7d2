package accessstats

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoaldb/shoal/storage"
)

// propsSum is the index and filter bytes of e's physical tables overlapping [lo, hi).
func propsSum(t *testing.T, e *storage.Engine, lo, hi []byte) uint64 {
	t.Helper()
	m, err := ReadIndexFilter(e, lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, b := range m {
		sum += b
	}
	return sum
}

// fill writes keys prefix000000.. of 100 bytes and flushes them into a table.
func fill(t *testing.T, e *storage.Engine, prefix string, n int) {
	t.Helper()
	b := e.NewBatch()
	for i := 0; i < n; i++ {
		if err := b.Set(fmt.Appendf(nil, "%s%06d", prefix, i), make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if err := e.DB().Flush(); err != nil { // the engine flushes on its own only when its memtable is full
		t.Fatal(err)
	}
}

// IndexFilter counts the tables of the spans asked for, reads new tables' properties at most once
// every Every (estimating them at the known tables' bytes per byte until then) and forgets tables
// compacted away.
func TestIndexFilterBytes(t *testing.T) {
	db, err := storage.Open(t.TempDir(), storage.Options{CreateIfMissing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fill(t, db, "a", 5000)
	fill(t, db, "b", 5000)
	f := IndexFilter{Every: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	a := []Span{{Lo: []byte("a"), Hi: []byte("b")}}
	got, err := f.Bytes(db, a, t0)
	if want := propsSum(t, db, []byte("a"), []byte("b")); err != nil || got != want || want == 0 {
		t.Fatalf("span a: %d bytes (%v), its table has %d", got, err, want)
	}
	if got, _ := f.Bytes(db, nil, t0); got != 0 {
		t.Fatalf("no span: %d bytes", got)
	}
	// b's table is new to the memo and properties were read a second ago: it counts at a's bytes per
	// table byte (both tables hold the same rows), then exactly once Every has passed.
	ab := []Span{{Lo: []byte("a"), Hi: []byte("c")}}
	exact := propsSum(t, db, []byte("a"), []byte("c"))
	got, _ = f.Bytes(db, ab, t0.Add(time.Second))
	if len(f.known) != 1 || float64(got) < 0.9*float64(exact) || float64(got) > 1.1*float64(exact) {
		t.Fatalf("a and b before b's properties are read: %d bytes, %d tables known; want an estimate near %d, 1 known", got, len(f.known), exact)
	}
	if got, _ = f.Bytes(db, ab, t0.Add(11*time.Second)); got != exact || len(f.known) != 2 {
		t.Fatalf("a and b after Every: %d bytes, %d tables known; want %d, 2", got, len(f.known), exact)
	}
	// Compacted into new tables: the old ones are forgotten, the new ones read at the next chance.
	if err := db.DB().Compact(t.Context(), []byte("a"), []byte("c"), false); err != nil {
		t.Fatal(err)
	}
	f.Bytes(db, ab, t0.Add(12*time.Second))
	if len(f.known) != 0 {
		t.Fatalf("%d compacted tables remembered", len(f.known))
	}
	exact = propsSum(t, db, []byte("a"), []byte("c"))
	if got, _ = f.Bytes(db, ab, t0.Add(30*time.Second)); got != exact {
		t.Fatalf("after the compaction: %d bytes, want %d", got, exact)
	}
	// Compacted, the span's tables lie in one level; a fifth of a rewritten into a table above it
	// is a share of that table's size per byte of the level below.
	if u := f.Upper(ab[0].Lo); u != 0 {
		t.Fatalf("compacted span: upper share %.3f", u)
	}
	fill(t, db, "a", 2000)
	f.Bytes(db, ab, t0.Add(31*time.Second))
	ts, err := db.Tables([]byte("a"), []byte("c"), false)
	if err != nil {
		t.Fatal(err)
	}
	if u, want := f.Upper(ab[0].Lo), UpperShare(ts); u != want || u < 0.1 || u > 0.3 {
		t.Fatalf("a fifth of a rewritten above: upper share %.3f, its tables' %.3f", u, want)
	}
	if u := f.Upper([]byte("b")); u != 0 {
		t.Fatalf("a span not asked for: %.3f", u)
	}
}

// Estimate: known tables count their bytes, others the known bytes per table byte; virtual tables
// are always estimated.
func TestIndexFilterEstimate(t *testing.T) {
	ts := []storage.TableInfo{{Num: 1, Size: 1000}, {Num: 2, Size: 3000}, {Num: 3, Size: 500, Virtual: true}}
	if got := Estimate(ts, map[uint64]uint64{1: 10, 3: 999}); got != 10+30+5 {
		t.Fatalf("estimate %d, want 45", got)
	}
	if got := Estimate(ts, nil); got != 0 {
		t.Fatalf("nothing known: %d", got)
	}
	spans := []Span{{Lo: []byte("c"), Hi: []byte("e")}}
	tables := []storage.TableInfo{{Num: 1, Smallest: []byte("a"), Largest: []byte("c")}, {Num: 2, Smallest: []byte("e"), Largest: []byte("f")},
		{Num: 3, Smallest: []byte("d"), Largest: []byte("d")}}
	if got := Overlapping(tables, spans); len(got) != 2 || got[0].Num != 1 || got[1].Num != 3 {
		t.Fatalf("overlapping [c, e): %+v", got)
	}
}
