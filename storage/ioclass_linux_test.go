package storage

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/shoaldb/shoal/storage/emudisk"
)

// TestJobReadsIdleClass: on a real Pebble engine over an emulated disk with no page cache, a scan
// job's prefetch (IterateFor with ReadPrefetch) is charged to the device in its idle class, each one of
// them, its thread's kernel I/O priority untouched (the device is the node's disk); a foreground
// scan's and a job's run's (ReadJobs) are not.
func TestJobReadsIdleClass(t *testing.T) {
	dir := t.TempDir()
	dev := &emudisk.Options{NoPageCache: true, ReadBytesPerSec: 1 << 30, WriteBytesPerSec: 1 << 30}
	o := Options{CreateIfMissing: true, Device: dev, CacheBytes: 4 << 20, MemTableBytes: 1 << 20}
	e, err := Open(dir, o)
	must(t, err)
	b := e.NewBatch()
	for i := 0; i < 4000; i++ {
		must(t, b.Set([]byte(fmt.Sprintf("k%05d", i)), bytes.Repeat([]byte("v"), 500)))
	}
	must(t, b.Commit(true))
	must(t, e.DB().Flush())
	must(t, e.Close())
	e, err = Open(dir, o) // a cold block cache: every block is a device read
	must(t, err)
	defer e.Close()
	// Pebble loads the tables' stats on a goroutine of its own after opening: its reads are the
	// foreground's, and must be done before the scans are counted.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if m := e.DB().Metrics(); m.Table.InitialStatsCollectionComplete && m.Table.PendingStatsCollectionCount == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Pebble's table stats still loading after 10 s")
		}
	}

	runtime.LockOSThread() // the same thread before, in and after the job's scan
	defer runtime.UnlockOSThread()
	prioBefore, prioErr := threadIOPrio()
	scan := func(src ReadSource, lo, hi string, in func()) (reads, idle int64) {
		t.Helper()
		before := e.DeviceStats()
		must(t, e.IterateFor([]byte(lo), []byte(hi), src, func(it *Iterator) error {
			for it.First(); it.Valid(); it.Next() {
			}
			in()
			return it.Error()
		}))
		after := e.DeviceStats()
		return after.ReadOps - before.ReadOps, after.IdleOps - before.IdleOps
	}
	reads, idle := scan(ReadPrefetch, "k00000", "k02000", func() {
		if p, err := threadIOPrio(); prioErr == nil && (err != nil || p != prioBefore) {
			t.Errorf("in a job's scan on an emulated disk the thread's I/O priority is %#x (%v), was %#x", p, err, prioBefore)
		}
	})
	if reads == 0 || idle != reads {
		t.Fatalf("a job's scan: %d device reads, %d of them idle-class; want all", reads, idle)
	}
	for _, c := range []struct {
		src    ReadSource
		lo, hi string
	}{{ReadForeground, "k02000", "k03000"}, {ReadJobs, "k03000", "k04000"}} {
		reads, idle = scan(c.src, c.lo, c.hi, func() {})
		if reads == 0 || idle != 0 {
			t.Fatalf("a scan of source %d: %d device reads, %d of them idle-class; want none", c.src, reads, idle)
		}
	}
}

// TestJobReadsKernelIdleClass: on an engine without an emulated disk, a scan job's prefetch runs on a
// thread in the kernel's idle I/O class (or the failure is counted), and the thread leaves with the
// I/O priority it came with; a foreground scan's thread keeps its own.
func TestJobReadsKernelIdleClass(t *testing.T) {
	e, _ := openNew(t)
	put(t, e, "a", "1", "b", "2")
	runtime.LockOSThread() // the same thread before, in and after the scans
	defer runtime.UnlockOSThread()
	before, err := threadIOPrio()
	if err != nil {
		t.Skipf("ioprio_get: %v", err)
	}
	var in int
	must(t, e.IterateFor(nil, nil, ReadPrefetch, func(it *Iterator) error {
		in, err = threadIOPrio()
		return err
	}))
	if in>>ioprioClassShift != ioprioClassIdle && e.Stats().IOPrioErrors == 0 {
		t.Fatalf("in a job's scan the thread's I/O priority is %#x, not the idle class, and no error was counted", in)
	}
	t.Logf("I/O priority %#x, in a job's scan %#x; ioprio failures %d", before, in, e.Stats().IOPrioErrors)
	if after, err := threadIOPrio(); err != nil || after != before {
		t.Fatalf("after a job's scan the thread's I/O priority is %#x (%v), was %#x", after, err, before)
	}
	must(t, e.IterateFor(nil, nil, ReadForeground, func(it *Iterator) error {
		in, err = threadIOPrio()
		return err
	}))
	if in != before {
		t.Fatalf("in a foreground scan the thread's I/O priority is %#x, was %#x", in, before)
	}
}
