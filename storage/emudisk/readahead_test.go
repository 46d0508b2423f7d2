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

// floorClock is a single caller's timeline on a machine whose sleeps last at least floor (a
// time.Sleep under a millisecond takes ~1.2 ms here): the time a reader spends on the device is
// counted on it, never measured, so the test does not depend on the machine's speed.
type floorClock struct {
	now   time.Time
	floor time.Duration
}

func (c *floorClock) Now() time.Time        { return c.now }
func (c *floorClock) Sleep(d time.Duration) { c.now = c.now.Add(max(d, c.floor)) }

// TestReadAheadUnder checks that a sequential reader of a directory's files (a backup reading its
// checkpoint) gets the rate its device is configured for, on a clock whose every sleep lasts at
// least 1.2 ms, while a reader of the same file outside the directory takes an operation per 4-KiB
// read and is bound by that floor; and that undo ends the readahead for files opened afterwards.
func TestReadAheadUnder(t *testing.T) {
	const (
		kib, size, chunk = 1 << 10, 16 << 20, 4 << 10
		window           = 256 * kib
		bw               = 64 << 20
		latency          = 200 * time.Microsecond
		floor            = 1200 * time.Microsecond
	)
	clock := &floorClock{now: time.Unix(1_000_000, 0), floor: floor}
	d := NewDevice(Options{NoPageCache: true, ReadBytesPerSec: bw, WriteBytesPerSec: bw, IOPS: 2000,
		Latency: latency}, clock)
	mem := vfs.NewMem()
	fs := d.Wrap(mem)
	for _, dir := range []string{"ck", "ck2", "db"} {
		if err := mem.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := mem.Create(dir+"/t.sst", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	undo := d.ReadAheadUnder("ck/", window)
	// scan reads name start to end in 4-KiB reads and returns the device's operations and the
	// time the reader spent, both counted.
	scan := func(name string) (ops int64, took time.Duration) {
		f, err := fs.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		before, start := d.Stats().ReadOps, clock.Now()
		buf := make([]byte, chunk)
		for off := int64(0); off < size; off += chunk {
			if _, err := f.ReadAt(buf, off); err != nil {
				t.Fatal(err)
			}
		}
		return d.Stats().ReadOps - before, clock.Now().Sub(start)
	}
	rate := func(took time.Duration) float64 { return float64(size) / took.Seconds() }
	// The device's own rate for one sequential reader of 256-KiB windows is its bandwidth: the
	// budget refills while the reader sleeps its latency, and 2 000 IOPS do not bind. (The burst
	// the idle device banked, 10 ms of it, adds 6 % over 16 MiB.)
	want := float64(bw)

	ops, took := scan("ck/t.sst")
	if ops != size/window {
		t.Errorf("read ahead: %d operations, want %d windows", ops, size/window)
	}
	if got := rate(took); got < 0.9*want || got > 1.1*want {
		t.Errorf("read ahead: %.1f MiB/s, want the device's %.1f MiB/s within 10 %%", got/(1<<20), want/(1<<20))
	}
	ops, took = scan("db/t.sst")
	if ops != size/chunk {
		t.Errorf("outside the directory: %d operations, want one per read (%d)", ops, size/chunk)
	}
	if got, bound := rate(took), float64(chunk)/floor.Seconds(); got > bound*1.01 {
		t.Errorf("outside the directory: %.2f MiB/s, above the floor's bound %.2f", got/(1<<20), bound/(1<<20))
	}
	undo()
	if ops, _ := scan("ck/t.sst"); ops != size/chunk {
		t.Errorf("after undo: %d operations, want one per read (%d)", ops, size/chunk)
	}
	if w := d.readaheadFor("ck2/t.sst"); w != 0 {
		t.Errorf("a sibling directory sharing the prefix got a window of %d", w)
	}
}
