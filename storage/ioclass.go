package storage

import (
	"fmt"
	"runtime"
)

// IterateFor runs fn over an iterator of [lower, upper) of the live engine for reads of src, and
// closes the iterator when fn returns. A scan job's iterator counts its blocks apart (as
// NewIterFor's), and a prefetch's (ReadPrefetch) reads go in the idle I/O class: Pebble reads a
// block on the goroutine that moves the iterator, and file reads carry no caller, so fn runs on this
// goroutine locked to its OS thread, which is marked idle-class for the disk. With an emulated device (Options.Device) that is
// the device's idle class (emudisk.Device.MarkIdle: served only when no foreground read waits); the
// kernel's is left alone, as in-process nodes share the real disk and its idle class would make one
// node's jobs wait for every node's I/O in flight (mq-deadline dispatches an idle request only when
// no other is queued or in flight), and a foreground read of a block such a read is loading with
// them. Without one, on Linux, the thread goes in the kernel's idle class (ioprio_set
// IOPRIO_CLASS_IDLE, best-effort: a failure is counted in Stats.IOPrioErrors). The mark is undone,
// and the thread unlocked, before IterateFor returns, so neither a locked thread nor a marked one
// outlives the call.
//
// fn must use the iterator on this goroutine only and not keep it: reads made elsewhere are the
// foreground's, and the iterator is closed when fn returns.
//
// A job's run (ReadJobs) stays in the foreground's class: a read that waits in the idle class holds
// up every reader of the block or table it is loading (Pebble shares a load among its readers), and
// runs read from disk on demand the data the foreground reads too, so with demand reads the
// foreground's p99 rose from tens of milliseconds to seconds. A prefetch reads at a planned rate
// within the disk's spare budget, so it seldom waits.
func (e *Engine) IterateFor(lower, upper []byte, src ReadSource, fn func(*Iterator) error) (err error) {
	if src == ReadPrefetch {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if e.device != nil {
			defer e.device.MarkIdle()()
		} else {
			defer e.kernelIdle()()
		}
	}
	it, err := e.NewIterFor(lower, upper, src)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("engine iterator close: %w", cerr)
		}
	}()
	return fn(it)
}

// kernelIdle puts the calling thread, which the caller holds locked, in the kernel's idle I/O class
// and returns how to put it back; failures are counted, not returned (the read goes on).
func (e *Engine) kernelIdle() (restore func()) {
	back, err := setThreadIdleIO()
	if err != nil {
		e.ioprioErrors.Add(1)
	}
	return func() {
		if err := back(); err != nil {
			e.ioprioErrors.Add(1)
		}
	}
}
