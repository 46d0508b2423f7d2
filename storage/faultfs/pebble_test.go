package faultfs

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// These tests pin down how Pebble (v2) reacts to each fault, which is what the node's behaviour rests
// on (see docs/design/diskfaults.md):
//
//   - a failed WAL write or sync (EIO or ENOSPC) is fatal: the committing goroutine calls
//     Logger.Fatalf("pebble: fatal commit error: ..."), and a Fatalf that returned would make the
//     commit look successful. The engine's logger exits the process (see TestEngineExitsOnWALFault);
//   - a failed MANIFEST sync is fatal too, from a background goroutine;
//   - a failed sstable write or sync (a flush or compaction) is not: Pebble reports a background error
//     and retries at once, again and again, while the WAL keeps taking writes; once the fault clears
//     the flush completes.

// fatalLogger records Pebble's Fatalf calls and ends the calling goroutine with runtime.Goexit, so
// that Pebble does not go on after a fatal error and the test process does not exit.
type fatalLogger struct {
	mu     sync.Mutex
	fatals []string
	errors atomic.Int64
}

func (l *fatalLogger) Infof(string, ...any)  {}
func (l *fatalLogger) Errorf(string, ...any) { l.errors.Add(1) }
func (l *fatalLogger) Fatalf(format string, args ...any) {
	l.mu.Lock()
	l.fatals = append(l.fatals, fmt.Sprintf(format, args...))
	l.mu.Unlock()
	runtime.Goexit()
}

func (l *fatalLogger) Fatals() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.fatals...)
}

type outcome int

const (
	returned outcome = iota // fn returned
	exited                  // fn's goroutine ended without returning (Fatalf)
	blocked                 // fn had not returned after the timeout
)

// call runs fn in a goroutine of its own and reports how it ended.
func call(fn func() error, timeout time.Duration) (outcome, error, <-chan error) {
	done := make(chan error, 1)
	ended := make(chan struct{})
	var ret atomic.Bool
	go func() {
		defer close(ended)
		err := fn()
		ret.Store(true)
		done <- err
	}()
	select {
	case <-ended:
		if ret.Load() {
			return returned, <-done, nil
		}
		return exited, nil, nil
	case <-time.After(timeout):
		return blocked, nil, done
	}
}

func key(i int) []byte { return fmt.Appendf(nil, "key%05d", i) }
func val(i int) []byte { return fmt.Appendf(nil, "value-%d", i) }

func openDB(t *testing.T, fs vfs.FS, l pebble.Logger, el *pebble.EventListener) *pebble.DB {
	t.Helper()
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: l, EventListener: el})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return db
}

func writeSynced(t *testing.T, db *pebble.DB, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := db.Set(key(i), val(i), pebble.Sync); err != nil {
			t.Fatalf("set %s: %v", key(i), err)
		}
	}
}

func checkKeys(t *testing.T, db *pebble.DB, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		v, closer, err := db.Get(key(i))
		if err != nil {
			t.Fatalf("get %s: %v", key(i), err)
		}
		if string(v) != string(val(i)) {
			t.Fatalf("get %s = %q, want %q", key(i), v, val(i))
		}
		closer.Close()
	}
}

// TestPebbleWALFaultIsFatal injects each WAL fault under a synced commit: Pebble calls Fatalf (the
// commit never returns), and a crash image of the disk then opens with every key synced before the
// fault, whether the unsynced tail (a torn record, after a partial write on a full disk) survived or
// not.
func TestPebbleWALFaultIsFatal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(*FS)
		errno  syscall.Errno
	}{
		{"sync", func(fs *FS) { fs.SetFilter(WAL, ""); fs.FailSyncs(true) }, syscall.EIO},
		{"write", func(fs *FS) { fs.SetFilter(WAL, ""); fs.FailWrites(true) }, syscall.EIO},
		{"full", func(fs *FS) { fs.FillDisk(0) }, syscall.ENOSPC},
		{"full-torn", func(fs *FS) { fs.SetFilter(WAL, ""); fs.FillDisk(1000) }, syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			fs := Wrap(mem)
			l := &fatalLogger{}
			db := openDB(t, fs, l, nil)
			const n = 100
			writeSynced(t, db, 0, n)

			tc.inject(fs)
			big := make([]byte, 4000) // larger than the full-torn budget: the WAL record is torn
			how, err, _ := call(func() error { return db.Set([]byte("x"), big, pebble.Sync) }, 10*time.Second)
			if how != exited {
				t.Fatalf("synced commit under a WAL %s fault: outcome %d (err %v), want Fatalf", tc.name, how, err)
			}
			fatals := l.Fatals()
			if len(fatals) != 1 || !strings.Contains(fatals[0], "pebble: fatal commit error") ||
				!strings.Contains(fatals[0], tc.errno.Error()) || !strings.Contains(fatals[0], "injected by faultfs") {
				t.Fatalf("fatal errors %q: want one fatal commit error with %q", fatals, tc.errno.Error())
			}
			st := fs.Stats()
			if st.Injected() == 0 {
				t.Fatalf("no fault injected: %+v", st)
			}
			// Pebble publishes the batch before it reports the error: the failed write is visible to
			// reads of this DB. That is why its Fatalf must not return.
			_, closer, gerr := db.Get([]byte("x"))
			if closer != nil {
				closer.Close()
			}
			t.Logf("fatal: %s; stats %+v; failed write visible to reads before the exit: %v", fatals[0], st, gerr == nil)

			// A crash now: only synced data survives, or everything written (the process died but
			// the OS kept its page cache). Either image opens, holds every synced key, and takes writes.
			for _, pct := range []int{0, 100} {
				crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(1, 2))})
				db2 := openDB(t, Wrap(crashed), &fatalLogger{}, nil)
				checkKeys(t, db2, n)
				_, closer, gerr := db2.Get([]byte("x"))
				if closer != nil {
					closer.Close()
				}
				if gerr == nil && pct == 0 {
					t.Errorf("crash image with synced data only holds the never-synced write")
				}
				writeSynced(t, db2, n, n+10)
				if err := db2.Close(); err != nil {
					t.Fatal(err)
				}
				db3 := openDB(t, crashed, &fatalLogger{}, nil)
				checkKeys(t, db3, n+10)
				if err := db3.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestPebbleManifestSyncFaultIsFatal fails MANIFEST syncs: the next flush (which records its new
// sstable in the MANIFEST) makes Pebble call Fatalf from its background flush goroutine.
func TestPebbleManifestSyncFaultIsFatal(t *testing.T) {
	mem := vfs.NewMem()
	fs := Wrap(mem)
	l := &fatalLogger{}
	db := openDB(t, fs, l, nil)
	writeSynced(t, db, 0, 100)
	fs.SetFilter(Manifest, "")
	fs.FailSyncs(true)
	call(db.Flush, 0) // left blocked: the flush goroutine ends in Fatalf
	deadline := time.Now().Add(10 * time.Second)
	for len(l.Fatals()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f := l.Fatals()
	if len(f) == 0 || !strings.Contains(f[0], "MANIFEST") || !strings.Contains(f[0], "injected by faultfs") {
		t.Fatalf("fatal errors %q: want a MANIFEST sync failure", f)
	}
	t.Logf("fatal: %s", f[0])
}

// TestPebbleSSTFaultRetriesFlush fails sstable creates (full disk) or syncs: a flush does not
// complete and Pebble retries it at once, reporting a background error each time (there is no
// backoff), while synced commits keep succeeding on the WAL. When the fault clears, the flush
// completes and nothing is lost.
func TestPebbleSSTFaultRetriesFlush(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(*FS)
	}{
		{"full", func(fs *FS) { fs.SetFilter(SST, ""); fs.FillDisk(0) }},
		{"sync", func(fs *FS) { fs.SetFilter(SST, ""); fs.FailSyncs(true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			fs := Wrap(mem)
			l := &fatalLogger{}
			var bgErrors atomic.Int64
			db := openDB(t, fs, l, &pebble.EventListener{BackgroundError: func(error) { bgErrors.Add(1) }})
			writeSynced(t, db, 0, 100)
			tc.inject(fs)
			how, _, flushed := call(db.Flush, 300*time.Millisecond)
			if how != blocked {
				t.Fatalf("flush under an sstable %s fault: outcome %d, want blocked", tc.name, how)
			}
			// The flush still blocks: its retries go on until the fault clears, however slowly the
			// host runs them.
			for deadline := time.Now().Add(10 * time.Second); bgErrors.Load() < 2; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d background errors in 10 s: want the flush retried", bgErrors.Load())
				}
			}
			retries := bgErrors.Load()
			writeSynced(t, db, 100, 200) // the WAL still works
			fs.Clear()
			select {
			case err := <-flushed:
				if err != nil {
					t.Fatalf("flush after clear: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("flush did not complete after the fault cleared")
			}
			if len(l.Fatals()) != 0 {
				t.Fatalf("fatal errors: %q", l.Fatals())
			}
			checkKeys(t, db, 200)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openDB(t, mem, l, nil)
			checkKeys(t, db, 200)
			db.Close()
			t.Logf("%d flush attempts failed before the fault cleared (%v)", retries, fs.Stats())
		})
	}
}

// TestPebbleSSTFaultStallsWrites keeps writing while sstable creates fail (a full disk for sstables
// only): commits go on succeeding until the memtables Pebble may hold are full, and then block (a
// write stall), neither failing nor returning, until the fault clears. A node in that state stops
// acknowledging without exiting.
func TestPebbleSSTFaultStallsWrites(t *testing.T) {
	mem := vfs.NewMem()
	fs := Wrap(mem)
	l := &fatalLogger{}
	var stalls atomic.Int64
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: l, MemTableSize: 256 << 10, MemTableStopWritesThreshold: 2,
		EventListener: &pebble.EventListener{BackgroundError: func(error) {}, WriteStallBegin: func(pebble.WriteStallBeginInfo) { stalls.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}
	fs.SetFilter(SST, "")
	fs.FillDisk(0)
	value := make([]byte, 1<<10)
	var written int
	var blockedOn <-chan error
	for i := 0; i < 10_000 && blockedOn == nil; i++ {
		how, err, done := call(func() error { return db.Set(key(i), value, pebble.Sync) }, time.Second)
		switch how {
		case returned:
			if err != nil {
				t.Fatalf("set %d: %v", i, err)
			}
			written++
		case blocked:
			blockedOn = done
		default:
			t.Fatalf("set %d: Fatalf %q", i, l.Fatals())
		}
	}
	if blockedOn == nil {
		t.Fatalf("%d KiB written with no sstable flushed and no commit blocked", written)
	}
	t.Logf("a synced commit blocked after %d KiB were written with flushes failing (%d write stalls)", written, stalls.Load())
	fs.Clear()
	select {
	case err := <-blockedOn:
		if err != nil {
			t.Fatalf("blocked commit after clear: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("commit still blocked 10s after the fault cleared")
	}
	for i := 0; i <= written; i++ {
		v, closer, err := db.Get(key(i))
		if err != nil || len(v) != len(value) {
			t.Fatalf("get %s: %d bytes, %v", key(i), len(v), err)
		}
		closer.Close()
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
