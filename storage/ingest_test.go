package storage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/shoaldb/shoal/storage/emudisk"
)

// TestIngestSpan: an ingest replaces exactly its span (old keys inside it gone, keys outside kept),
// survives a reopen, and lands below L0 when nothing in the memtable or L0 overlaps it.
func TestIngestSpan(t *testing.T) {
	e, dir := openNew(t)
	b := e.NewBatch()
	for i := 0; i < 100; i++ {
		if err := b.Set(fmt.Appendf(nil, "k%03d", i), []byte("old")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if err := e.DB().Flush(); err != nil {
		t.Fatal(err)
	}
	// Replace [k040, k060) with every other key, new values.
	i := 40
	next := func() ([]byte, []byte, bool) {
		if i >= 60 {
			return nil, nil, false
		}
		k := fmt.Appendf(nil, "k%03d", i)
		i += 2
		return k, []byte("new"), true
	}
	if err := e.IngestSpan(context.Background(), []byte("k040"), []byte("k060"), next); err != nil {
		t.Fatal(err)
	}
	check := func(e *Engine) {
		t.Helper()
		for i := 0; i < 100; i++ {
			v, found, err := e.Get(fmt.Appendf(nil, "k%03d", i))
			if err != nil {
				t.Fatal(err)
			}
			want, wantFound := "old", true
			if i >= 40 && i < 60 {
				want, wantFound = "new", i%2 == 0
			}
			if found != wantFound || (found && string(v) != want) {
				t.Fatalf("k%03d = %q (found %v), want %q (found %v)", i, v, found, want, wantFound)
			}
		}
	}
	check(e)
	st := e.IngestStats()
	if st.Ingests != 1 || st.Bytes == 0 {
		t.Fatalf("ingest stats %+v", st)
	}
	// The span overlaps the flushed L0 table here, so no claim on the level; a span that overlaps
	// nothing goes below L0.
	j := 0
	if err := e.IngestSpan(context.Background(), []byte("x"), []byte("y"), func() ([]byte, []byte, bool) {
		j++
		return fmt.Appendf(nil, "x%03d", j), []byte("v"), j <= 50
	}); err != nil {
		t.Fatal(err)
	}
	if st2 := e.IngestStats(); st2.L0Bytes != st.L0Bytes {
		t.Fatalf("a span overlapping nothing went to L0: %+v (before %+v)", st2, st)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	check(e2)
	if v, found, err := e2.Get([]byte("x050")); err != nil || !found || string(v) != "v" {
		t.Fatalf("x050 after reopen: %q %v %v", v, found, err)
	}
}

// TestIngestSpanWritesInLargeChunks: an ingested table reaches the disk in a few large writes, not
// one per block (counted on an emulated device, which charges every write call).
func TestIngestSpanWritesInLargeChunks(t *testing.T) {
	e, err := Open(t.TempDir(), Options{CreateIfMissing: true, Device: &emudisk.Options{NoPageCache: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	before := e.DeviceStats()
	i := 0
	val := make([]byte, 1000)
	rng := rand.New(rand.NewPCG(1, 2))
	if err := e.IngestSpan(context.Background(), []byte("a"), []byte("b"), func() ([]byte, []byte, bool) {
		i++
		for j := range val {
			val[j] = byte(rng.Uint32()) // incompressible
		}
		return fmt.Appendf(nil, "a%06d", i), val, i <= 2000 // ~2 MB
	}); err != nil {
		t.Fatal(err)
	}
	st := e.DeviceStats()
	writes, bytes := st.WriteOps-before.WriteOps, st.WriteBytes-before.WriteBytes
	t.Logf("ingest of %d bytes: %d write operations", bytes, writes)
	if bytes < 2_000_000 || writes > 30 {
		t.Fatalf("ingest wrote %d bytes in %d operations: want >= 2 MB in at most 30", bytes, writes)
	}
}
