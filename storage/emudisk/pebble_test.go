package emudisk

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPebbleRoundTrip opens Pebble on a wrapped OS filesystem with every feature on (generous limits:
// the test checks behaviour, not speed), writes, flushes, reads back with a cold block cache, reopens
// (WAL and MANIFEST read back through the device) and reads again.
func TestPebbleRoundTrip(t *testing.T) {
	dir := t.TempDir()
	d := NewDevice(Options{NoPageCache: true, ReadBytesPerSec: 1 << 30, WriteBytesPerSec: 1 << 30,
		IOPS: 1_000_000, Latency: time.Microsecond}, nil)
	fs := d.Wrap(vfs.Default)
	open := func() *pebble.DB {
		cache := pebble.NewCache(8 << 20)
		defer cache.Unref()
		db, err := pebble.Open(dir, &pebble.Options{FS: fs, Cache: cache, Logger: quiet{}})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "key%06d", i) }
	val := func(i int) []byte { return fmt.Appendf(nil, "value-%d-%0200d", i, i) }
	check := func(db *pebble.DB, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			v, closer, err := db.Get(key(i))
			if err != nil {
				t.Fatalf("get %s: %v", key(i), err)
			}
			if string(v) != string(val(i)) {
				t.Fatalf("get %s = %q", key(i), v)
			}
			closer.Close()
		}
	}

	db := open()
	const n = 2000
	b := db.NewBatch()
	for i := 0; i < n; i++ {
		b.Set(key(i), val(i), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// Unflushed writes too: they come back from the WAL after the reopen.
	if err := db.Set(key(n), val(n), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	check(db, n+1)
	afterWrite := d.Stats()
	if afterWrite.WriteBytes < n*200 || afterWrite.Syncs == 0 || afterWrite.ReadBytes == 0 {
		t.Fatalf("stats after write+flush+read: %+v", afterWrite)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = open()
	check(db, n+1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st := d.Stats()
	if st.ReadBytes <= afterWrite.ReadBytes || st.Fadvises == 0 || st.FadviseErrors != 0 {
		t.Fatalf("stats after reopen: %+v", st)
	}
	if st.Latency != time.Duration(st.ReadOps+st.WriteOps)*time.Microsecond {
		t.Fatalf("latency %v for %d ops", st.Latency, st.ReadOps+st.WriteOps)
	}
	t.Logf("device stats: %+v", st)
}

type quiet struct{}

func (quiet) Infof(string, ...any)      {}
func (quiet) Errorf(f string, a ...any) { fmt.Printf(f+"\n", a...) }
func (quiet) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
