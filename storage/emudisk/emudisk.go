// Package emudisk gives one node's storage engine its own emulated disk, so that several nodes in one
// process (or on one small machine) behave like separate servers. It is a Pebble vfs.FS wrapper that
// owns two things:
//
//   - page-cache bypass (Options.NoPageCache): every byte read from a file is dropped from the OS page
//     cache right after the read (posix_fadvise DONTNEED on the read's pages, kernel readahead switched
//     off with FADV_RANDOM, Pebble's Prefetch made a no-op), and written data is dropped once it is
//     synced, so the engine's block cache is the node's only cache and a cold cache is really cold
//     (or, with Options.PageCacheBytes, the pages a page cache of that size would hold are kept and
//     the rest dropped: a node with a bounded page cache of its own);
//   - a per-device I/O budget: token buckets for read bytes/s, write bytes/s and operations/s (reads,
//     writes and syncs share the IOPS bucket), plus a fixed latency added to every operation. A caller
//     sleeps until its tokens are there, so a compaction or a backup on one node slows that node only;
//   - an idle class (MarkIdle): operations on a marked OS thread are served only when no foreground
//     operation waits for the budget, as Linux serves an IOPRIO_CLASS_IDLE thread.
//
// It must never change what a file holds or what an operation returns: it only delays calls and
// drops clean cached pages, and every error comes from the wrapped filesystem. It never throttles
// metadata operations (create, rename, link, remove, list, stat, lock). It is off unless a caller wraps
// a filesystem with it (storage.Options.Device).
package emudisk

import (
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options describe one emulated device. A zero rate or latency means unlimited (no delay).
type Options struct {
	// NoPageCache keeps file data out of the OS page cache (see the package comment).
	NoPageCache bool `json:"no_page_cache"`
	// ReadBytesPerSec and WriteBytesPerSec are the device's bandwidth per direction.
	ReadBytesPerSec  int64 `json:"read_bytes_per_sec"`
	WriteBytesPerSec int64 `json:"write_bytes_per_sec"`
	// IOPS is the device's operation rate: every Read/ReadAt, Write/WriteAt and sync is one operation.
	IOPS int `json:"iops"`
	// Latency is added to every operation (after any wait for tokens).
	Latency time.Duration `json:"latency_ns"`
	// ReadaheadBytes models the kernel's readahead for sequential reads: a read of a file opened for
	// sequential reads (Pebble does so for compactions, and for an iterator after a run of
	// consecutive block reads) and a Prefetch hint fetch up to this many bytes in one operation, and
	// later reads inside that window cost nothing more (they would hit the pages the readahead
	// brought in). 0: off, every read is one operation of its own bytes.
	ReadaheadBytes int64 `json:"readahead_bytes,omitempty"`
	// PageCacheBytes, with NoPageCache, gives the device a modeled page cache of this size instead
	// of none: the pages a kernel with that much cache would hold for this node (read, read ahead or
	// written; least recently used evicted first) stay cached for real and their reads cost the
	// device nothing. A node of its own has a page cache bounded by its memory; NoPageCache alone
	// models one with none. 0: none.
	PageCacheBytes int64 `json:"page_cache_bytes,omitempty"`
}

// Enabled reports whether the options change anything (page cache bypass, a limit or a latency).
func (o Options) Enabled() bool {
	return o.NoPageCache || o.ReadBytesPerSec > 0 || o.WriteBytesPerSec > 0 || o.IOPS > 0 || o.Latency > 0
}

// Stats are a device's counters since it was created.
type Stats struct {
	ReadBytes  int64 `json:"read_bytes"`
	WriteBytes int64 `json:"write_bytes"`
	ReadOps    int64 `json:"read_ops"`
	// ReadaheadOps counts the read operations that fetched a readahead window (included in ReadOps);
	// ReadaheadHits the reads served from a window without an operation of their own.
	ReadaheadOps  int64 `json:"readahead_ops,omitempty"`
	ReadaheadHits int64 `json:"readahead_hits,omitempty"`
	// WriteOps counts writes and syncs; Syncs counts the syncs alone.
	WriteOps int64 `json:"write_ops"`
	Syncs    int64 `json:"syncs"`
	// Throttled is the total time callers waited for bandwidth or IOPS tokens; Latency the total
	// added latency. Both are summed over callers, so they can exceed wall-clock time.
	Throttled time.Duration `json:"throttled_ns"`
	Latency   time.Duration `json:"latency_ns"`
	// IdleOps counts the operations charged in the idle class (MarkIdle; included in ReadOps and
	// WriteOps); IdleWait the total time they waited for the foreground and for their tokens (not in
	// Throttled, which counts the foreground's queueing alone).
	IdleOps  int64         `json:"idle_ops,omitempty"`
	IdleWait time.Duration `json:"idle_wait_ns,omitempty"`
	// IdleWaitMax is the longest wait of one idle operation.
	IdleWaitMax time.Duration `json:"idle_wait_max_ns,omitempty"`
	// IdleWindowFills counts the real reads of idle readers' windows (window.go), IdleWindowHits the
	// idle reads served from one (each still charged in IdleOps).
	IdleWindowFills int64 `json:"idle_window_fills,omitempty"`
	IdleWindowHits  int64 `json:"idle_window_hits,omitempty"`
	// ReadTime is the total time the wrapped files took to answer the reads not in the idle class
	// (the foreground's, compactions'), TimedReads their count: the host's own disk and its
	// syscalls as those readers find them, before the device's wait.
	ReadTime   time.Duration `json:"read_time_ns,omitempty"`
	TimedReads int64         `json:"timed_reads,omitempty"`
	// Fadvises counts posix_fadvise calls made to drop or keep pages out of the page cache;
	// FadviseErrors the ones that failed (they are otherwise ignored: the bypass is best-effort).
	Fadvises      int64 `json:"fadvises"`
	FadviseErrors int64 `json:"fadvise_errors"`
	// PageCacheHits counts the reads the modeled page cache served (Options.PageCacheBytes; not in
	// ReadOps); PageCacheMisses the reads it did not hold, charged as without it (a read of their
	// own, or free inside a readahead window whose pages the model has since evicted).
	PageCacheHits   int64 `json:"page_cache_hits,omitempty"`
	PageCacheMisses int64 `json:"page_cache_misses,omitempty"`
}

// Add returns the sum of two sets of counters (for reports over several nodes or restarts).
func (s Stats) Add(o Stats) Stats {
	return Stats{
		ReadBytes: s.ReadBytes + o.ReadBytes, WriteBytes: s.WriteBytes + o.WriteBytes,
		ReadOps: s.ReadOps + o.ReadOps, WriteOps: s.WriteOps + o.WriteOps, Syncs: s.Syncs + o.Syncs,
		Throttled: s.Throttled + o.Throttled, Latency: s.Latency + o.Latency,
		Fadvises: s.Fadvises + o.Fadvises, FadviseErrors: s.FadviseErrors + o.FadviseErrors,
		ReadaheadOps: s.ReadaheadOps + o.ReadaheadOps, ReadaheadHits: s.ReadaheadHits + o.ReadaheadHits,
		PageCacheHits: s.PageCacheHits + o.PageCacheHits, PageCacheMisses: s.PageCacheMisses + o.PageCacheMisses,
		IdleOps: s.IdleOps + o.IdleOps, IdleWait: s.IdleWait + o.IdleWait, IdleWaitMax: max(s.IdleWaitMax, o.IdleWaitMax),
		IdleWindowFills: s.IdleWindowFills + o.IdleWindowFills, IdleWindowHits: s.IdleWindowHits + o.IdleWindowHits,
		ReadTime: s.ReadTime + o.ReadTime, TimedReads: s.TimedReads + o.TimedReads,
	}
}

// Clock is the time source of a device: Now for refilling the buckets, Sleep for making callers
// wait. Tests inject a fake one to check the requested waits without depending on wall-clock speed.
type Clock interface {
	Now() time.Time
	Sleep(time.Duration)
}

type realClock struct{}

func (realClock) Now() time.Time        { return time.Now() }
func (realClock) Sleep(d time.Duration) { time.Sleep(d) }

// burstWindow is how much idle time a bucket banks: after being idle a device serves this much
// work (e.g. 10 ms of its bandwidth) without waiting, like a real device's queue absorbing a burst.
const burstWindow = 10 * time.Millisecond

// Device is one emulated disk: its budget, its clock and its counters. Every filesystem wrapped with
// the same Device shares its budget.
type Device struct {
	opts  Options
	clock Clock

	mu                          sync.Mutex
	readBytes, writeBytes, iops bucket

	readBytesN, writeBytesN, readOps, writeOps, syncs atomic.Int64
	throttled, latency                                atomic.Int64
	fadvises, fadviseErrors                           atomic.Int64
	readaheadOps, readaheadHits                       atomic.Int64
	pageCacheHits, pageCacheMisses                    atomic.Int64
	unthrottled                                       atomic.Bool
	idleOps, idleWait, idleWaitMax                    atomic.Int64
	// idle holds the threads marked idle-class (MarkIdle); idleMarked counts their marks, so that
	// charge looks its caller up only while some thread is marked.
	idle       idleThreads
	idleMarked atomic.Int64
	// windows are the idle readers' read-ahead windows (window.go); readTime and timedReads the
	// other reads' time at the wrapped file, and their count.
	windows              idleWindows
	readTime, timedReads atomic.Int64
	// pc is the modeled page cache (Options.PageCacheBytes with NoPageCache), nil without one.
	pc *pageCache
	// raDirs maps a directory to the readahead window of the files opened under it (ReadAheadUnder).
	raDirs struct {
		sync.Mutex
		m map[string]int64
	}
}

// NewDevice returns a device with the given options; clock nil means the real clock.
func NewDevice(o Options, clock Clock) *Device {
	if clock == nil {
		clock = realClock{}
	}
	d := &Device{
		opts:       o,
		clock:      clock,
		readBytes:  newBucket(float64(o.ReadBytesPerSec)),
		writeBytes: newBucket(float64(o.WriteBytesPerSec)),
		iops:       newBucket(float64(o.IOPS)),
	}
	if o.NoPageCache && o.PageCacheBytes > 0 {
		d.pc = newPageCache(o.PageCacheBytes)
	}
	return d
}

// SetUnthrottled lifts the device's budget and latency (true) or restores them (false). While lifted,
// operations are counted but never wait; the page-cache bypass stays. Benchmarks load their data this
// way (`--fast-load`): the load is set-up, not measurement, and on a disk of a few hundred IOPS it
// would take most of a run's time.
func (d *Device) SetUnthrottled(on bool) { d.unthrottled.Store(on) }

// ReadAheadUnder makes every file opened under dir, until undo is called, a sequential reader's: a
// read its current window does not cover fetches a new window of window bytes in one operation charged
// for them, and the reads inside it are free (Options.ReadaheadBytes, for these files alone). A caller
// that reads a directory's tables start to end (a backup reading its checkpoint) gets the kernel's
// readahead a real disk gives it, while the engine's own files, read at random, keep one operation
// per read. Files already open stay as they are. A nil device does nothing.
func (d *Device) ReadAheadUnder(dir string, window int64) (undo func()) {
	if d == nil || window <= 0 {
		return func() {}
	}
	dir = filepath.Clean(dir)
	d.raDirs.Lock()
	defer d.raDirs.Unlock()
	if d.raDirs.m == nil {
		d.raDirs.m = map[string]int64{}
	}
	d.raDirs.m[dir] = window
	return func() {
		d.raDirs.Lock()
		delete(d.raDirs.m, dir)
		d.raDirs.Unlock()
	}
}

// readaheadFor returns the readahead window ReadAheadUnder set for a file named name (0: none).
func (d *Device) readaheadFor(name string) int64 {
	d.raDirs.Lock()
	defer d.raDirs.Unlock()
	if len(d.raDirs.m) == 0 {
		return 0
	}
	name = filepath.Clean(name)
	for dir, w := range d.raDirs.m {
		if strings.HasPrefix(name, dir+string(filepath.Separator)) {
			return w
		}
	}
	return 0
}

// Options returns the device's options.
func (d *Device) Options() Options { return d.opts }

// Stats returns the device's counters.
func (d *Device) Stats() Stats {
	return Stats{
		ReadBytes: d.readBytesN.Load(), WriteBytes: d.writeBytesN.Load(),
		ReadOps: d.readOps.Load(), WriteOps: d.writeOps.Load(), Syncs: d.syncs.Load(),
		Throttled: time.Duration(d.throttled.Load()), Latency: time.Duration(d.latency.Load()),
		Fadvises: d.fadvises.Load(), FadviseErrors: d.fadviseErrors.Load(),
		ReadaheadOps: d.readaheadOps.Load(), ReadaheadHits: d.readaheadHits.Load(),
		PageCacheHits: d.pageCacheHits.Load(), PageCacheMisses: d.pageCacheMisses.Load(),
		IdleOps: d.idleOps.Load(), IdleWait: time.Duration(d.idleWait.Load()),
		IdleWaitMax:     time.Duration(d.idleWaitMax.Load()),
		IdleWindowFills: d.windows.fills.Load(), IdleWindowHits: d.windows.hits.Load(),
		ReadTime: time.Duration(d.readTime.Load()), TimedReads: d.timedReads.Load(),
	}
}

// Wrap returns fs with every file's I/O going through a new device with options o.
func Wrap(fs vfs.FS, o Options) vfs.FS { return NewDevice(o, nil).Wrap(fs) }

// Wrap returns fs with every file's I/O going through d.
func (d *Device) Wrap(fs vfs.FS) vfs.FS { return &emuFS{FS: fs, d: d} }

// DeviceOf returns the device of fs, or of the first emulated filesystem that fs wraps, or nil.
func DeviceOf(fs vfs.FS) *Device {
	for fs != nil {
		if e, ok := fs.(*emuFS); ok {
			return e.d
		}
		fs = fs.Unwrap()
	}
	return nil
}

// op is one operation of n bytes in one direction.
type op int

const (
	opRead op = iota
	opWrite
	opSync
)

// charge takes the tokens of one operation and makes the caller wait for them plus the device's
// latency. It returns the wait it requested. An operation on a thread marked idle-class (MarkIdle)
// waits instead until no foreground operation does (chargeIdle).
func (d *Device) charge(kind op, n int64) time.Duration { return d.chargeAs(kind, n, d.callerIdle()) }

// chargeAs is charge for a caller already known to be idle-class or not.
func (d *Device) chargeAs(kind op, n int64, idle bool) time.Duration {
	if n < 0 {
		n = 0
	}
	switch kind {
	case opRead:
		d.readOps.Add(1)
		d.readBytesN.Add(n)
	case opWrite:
		d.writeOps.Add(1)
		d.writeBytesN.Add(n)
	case opSync:
		d.writeOps.Add(1)
		d.syncs.Add(1)
	}
	if d.unthrottled.Load() {
		return 0
	}
	if idle {
		return d.chargeIdle(kind, n)
	}
	d.mu.Lock()
	now := d.clock.Now()
	wait := d.iops.take(now, 1)
	var bw time.Duration
	if b := d.bandwidth(kind); b != nil {
		bw = b.take(now, float64(n))
	}
	d.mu.Unlock()
	// The operation is done when both its bandwidth and its IOPS share are there.
	wait = max(wait, bw)
	d.throttled.Add(int64(wait))
	d.latency.Add(int64(d.opts.Latency))
	if total := wait + d.opts.Latency; total > 0 {
		d.clock.Sleep(total)
		return total
	}
	return 0
}

// refill adds the tokens accrued since the last refill, up to the burst (a new bucket starts full).
func (b *bucket) refill(now time.Time) {
	if b.last.IsZero() {
		b.last, b.tokens = now, b.burst
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.rate)
		b.last = now
	}
}

// bucket is a token bucket that lends: take always succeeds and returns how long the caller must
// wait until the tokens it took would have accrued, so concurrent callers queue in arrival order
// and a request larger than the burst is served at the rate instead of never.
type bucket struct {
	rate   float64 // tokens per second; 0 = unlimited
	burst  float64 // most tokens banked while idle
	tokens float64 // may go negative: debt owed by callers already told to wait
	last   time.Time
}

func newBucket(rate float64) bucket {
	if rate <= 0 {
		return bucket{}
	}
	return bucket{rate: rate, burst: max(1, rate*burstWindow.Seconds())}
}

// take takes n tokens at time now and returns the wait until they are paid for.
func (b *bucket) take(now time.Time, n float64) time.Duration {
	if b.rate <= 0 {
		return 0
	}
	b.refill(now)
	b.tokens -= n
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}
