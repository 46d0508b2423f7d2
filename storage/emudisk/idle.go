package emudisk

import (
	"sync"
	"time"
)

// The idle class: operations the device serves only when no foreground operation waits, as Linux
// serves a thread of IOPRIO_CLASS_IDLE. File reads carry no caller (vfs.File.ReadAt has no context),
// but an engine reads on the goroutine that asked, so a caller that wants its reads served in the idle
// class locks its goroutine to its OS thread and marks that thread (MarkIdle); charge looks the
// calling thread up.
//
// Invariant: an idle operation takes its tokens only when every bucket it draws from holds at least
// idleReserve of its burst (so is out of debt), whatever the operation's size: a foreground operation
// arriving after it finds the reserve less that one operation, and the most it can owe because of idle
// operations is the part of one operation beyond the reserve. The threshold does not grow with the
// size: idle readers polling for tokens would otherwise keep a larger read (an index block) waiting
// behind their smaller ones for as long as they read, and a foreground read sharing its block load
// (Pebble's read handles) with it.

// idleReserve is the share of a bucket's burst an idle operation needs banked before it starts: half
// of the 10 ms bank (5 ms of the disk), so a foreground miss arriving right after an idle block read
// (a fraction of that) passes without waiting.
const idleReserve = 0.5

// idleThreads are the OS threads marked idle-class, by thread id, with how many marks each holds.
type idleThreads struct {
	mu sync.Mutex
	m  map[int]int
}

// MarkIdle makes the operations charged on the calling OS thread idle-class until undo is called.
// The caller must hold its goroutine locked to the thread (runtime.LockOSThread) from before MarkIdle
// until after undo, and call undo on that same thread: charge tells callers apart by thread id. Marks
// nest. Where thread ids are unknown (off Linux), and on a nil device, it does nothing.
func (d *Device) MarkIdle() (undo func()) {
	tid, ok := threadID()
	if d == nil || !ok {
		return func() {}
	}
	d.idle.mu.Lock()
	if d.idle.m == nil {
		d.idle.m = map[int]int{}
	}
	d.idle.m[tid]++
	d.idleMarked.Add(1)
	d.idle.mu.Unlock()
	return func() {
		d.idle.mu.Lock()
		if d.idle.m[tid]--; d.idle.m[tid] <= 0 {
			delete(d.idle.m, tid)
		}
		d.idleMarked.Add(-1)
		d.idle.mu.Unlock()
	}
}

// callerIdle reports whether the calling thread is marked idle-class. Without any mark it costs an
// atomic load; with one, a gettid and a map lookup.
func (d *Device) callerIdle() bool {
	if d.idleMarked.Load() == 0 {
		return false
	}
	tid, ok := threadID()
	if !ok {
		return false
	}
	d.idle.mu.Lock()
	defer d.idle.mu.Unlock()
	return d.idle.m[tid] > 0
}

// chargeIdle charges one idle-class operation: it waits, in steps the clock may oversleep, until the
// buckets hold their reserve (tryIdle), then pays any part of it beyond what they held like a
// foreground caller, and the latency. It returns its total wait.
func (d *Device) chargeIdle(kind op, n int64) time.Duration {
	d.idleOps.Add(1)
	var waited time.Duration
	for {
		wait, debt := d.tryIdle(kind, n)
		if wait == 0 {
			waited += debt
			if debt > 0 {
				d.clock.Sleep(debt)
			}
			break
		}
		d.clock.Sleep(wait)
		waited += wait
	}
	d.idleWait.Add(int64(waited))
	for cur := d.idleWaitMax.Load(); int64(waited) > cur && !d.idleWaitMax.CompareAndSwap(cur, int64(waited)); {
		cur = d.idleWaitMax.Load()
	}
	d.latency.Add(int64(d.opts.Latency))
	if d.opts.Latency > 0 {
		d.clock.Sleep(d.opts.Latency)
	}
	return waited + d.opts.Latency
}

// tryIdle takes an idle operation's tokens if every bucket it draws from holds its reserve now, and
// returns the wait its own size beyond what the bucket held costs (debt); otherwise it takes nothing
// and returns how long until they could (wait > 0).
func (d *Device) tryIdle(kind op, n int64) (wait, debt time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	bw := d.bandwidth(kind)
	wait = d.iops.idleWait(now)
	if bw != nil {
		wait = max(wait, bw.idleWait(now))
	}
	if wait > 0 {
		return wait, 0
	}
	debt = d.iops.take(now, 1)
	if bw != nil {
		debt = max(debt, bw.take(now, float64(n)))
	}
	return 0, debt
}

// bandwidth is the bucket an operation of kind draws bytes from (nil for a sync).
func (d *Device) bandwidth(kind op) *bucket {
	switch kind {
	case opRead:
		return &d.readBytes
	case opWrite:
		return &d.writeBytes
	}
	return nil
}

// idleWait is how long, from now, until the bucket holds its reserve: 0 when an idle operation may
// take its tokens now. It refills the bucket to now.
func (b *bucket) idleWait(now time.Time) time.Duration {
	if b.rate <= 0 {
		return 0
	}
	b.refill(now)
	need := idleReserve * b.burst
	if b.tokens >= need {
		return 0
	}
	// At least a microsecond: a shortfall of a fraction of a token must still be waited for.
	return max(time.Duration((need-b.tokens)/b.rate*float64(time.Second)), time.Microsecond)
}
