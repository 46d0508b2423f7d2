package emudisk

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestReadahead checks the modeled readahead's accounting: which reads cost an operation of their
// own, which fetch a window, which are free, and the bytes each window is charged for.
func TestReadahead(t *testing.T) {
	const kib = 1 << 10
	type read struct{ off, n int64 }
	seqReads := func(size, chunk int64) []read {
		var rs []read
		for off := int64(0); off < size; off += chunk {
			rs = append(rs, read{off, min(chunk, size-off)})
		}
		return rs
	}
	for _, tc := range []struct {
		name      string
		ra        int64
		size      int64
		seqOpen   bool
		prefetch  *read // Prefetch called before the reads
		reads     []read
		ops, hits int64
		bytes     int64
	}{
		{name: "random file reads one operation each", ra: 256 * kib, size: 1 << 20,
			reads: seqReads(256*kib, 4*kib), ops: 64, bytes: 256 * kib},
		{name: "prefetch fetches one window, reads inside are free", ra: 256 * kib, size: 1 << 20,
			prefetch: &read{0, 256 * kib}, reads: seqReads(256*kib, 4*kib), ops: 1, hits: 64, bytes: 256 * kib},
		{name: "prefetch is clipped to the readahead size", ra: 64 * kib, size: 1 << 20,
			prefetch: &read{0, 256 * kib}, reads: seqReads(128*kib, 4*kib), ops: 1 + 16, hits: 16, bytes: 128 * kib},
		{name: "sequential file reads in windows", ra: 256 * kib, size: 1 << 20, seqOpen: true,
			reads: seqReads(1<<20, 4*kib), ops: 4, hits: 252, bytes: 1 << 20},
		{name: "last window is clipped at the end of the file", ra: 256 * kib, size: 300 * kib, seqOpen: true,
			reads: seqReads(300*kib, 4*kib), ops: 2, hits: 73, bytes: 300 * kib},
		{name: "a read larger than the window is one operation", ra: 64 * kib, size: 1 << 20, seqOpen: true,
			reads: []read{{0, 100 * kib}, {100 * kib, 4 * kib}}, ops: 2, bytes: 100*kib + 64*kib},
		{name: "off: a sequential file reads one operation per read", ra: 0, size: 1 << 20, seqOpen: true,
			prefetch: &read{0, 256 * kib}, reads: seqReads(64*kib, 4*kib), ops: 16, bytes: 64 * kib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDevice(Options{NoPageCache: true, ReadaheadBytes: tc.ra}, newFakeClock(false))
			fs := d.Wrap(vfs.NewMem())
			w, err := fs.Create("f", vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(make([]byte, tc.size)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			var opts []vfs.OpenOption
			if tc.seqOpen {
				opts = append(opts, vfs.SequentialReadsOption)
			}
			f, err := fs.Open("f", opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			before := d.Stats()
			if tc.prefetch != nil {
				if err := f.Prefetch(tc.prefetch.off, tc.prefetch.n); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range tc.reads {
				if _, err := f.ReadAt(make([]byte, r.n), r.off); err != nil {
					t.Fatalf("read %d@%d: %v", r.n, r.off, err)
				}
			}
			st := d.Stats()
			ops, bytes, hits := st.ReadOps-before.ReadOps, st.ReadBytes-before.ReadBytes, st.ReadaheadHits-before.ReadaheadHits
			if ops != tc.ops || hits != tc.hits || bytes != tc.bytes {
				t.Fatalf("ops %d hits %d bytes %d, want %d, %d, %d", ops, hits, bytes, tc.ops, tc.hits, tc.bytes)
			}
		})
	}
}

// TestReadaheadPebbleScan scans a Pebble table with a cold block cache and checks that the modeled
// readahead turns its block-by-block reads into a few large ones, as the kernel's readahead would:
// what streaming a range's snapshot or a compaction costs the device.
func TestReadaheadPebbleScan(t *testing.T) {
	scanOps := func(ra int64) (ops, rows int64) {
		dir := t.TempDir()
		d := NewDevice(Options{NoPageCache: true, ReadaheadBytes: ra, Latency: time.Microsecond}, nil)
		fs := d.Wrap(vfs.Default)
		open := func() *pebble.DB {
			cache := pebble.NewCache(1 << 20)
			defer cache.Unref()
			db, err := pebble.Open(dir, &pebble.Options{FS: fs, Cache: cache, Logger: quiet{}})
			if err != nil {
				t.Fatal(err)
			}
			return db
		}
		db := open()
		b := db.NewBatch()
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 8000; i++ {
			v := make([]byte, 250) // incompressible, as the scenarios' values are
			for j := range v {
				v[j] = byte(rng.Uint32())
			}
			b.Set(fmt.Appendf(nil, "key%06d", i), v, nil)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db = open() // a cold block cache
		defer db.Close()
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		before := d.Stats().ReadOps
		for it.First(); it.Valid(); it.Next() {
			rows++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		return d.Stats().ReadOps - before, rows
	}
	off, rowsOff := scanOps(0)
	on, rowsOn := scanOps(256 << 10)
	if rowsOff != 8000 || rowsOn != 8000 {
		t.Fatalf("scanned %d and %d rows, want 8000", rowsOff, rowsOn)
	}
	t.Logf("read operations of a cold 2 MB scan: %d without readahead, %d with 256 KiB", off, on)
	if off < 100 || on*5 > off {
		t.Fatalf("read operations: %d without readahead, %d with: want at least 5x fewer with", off, on)
	}
}
