package storage

import (
	"fmt"
	"runtime"
)

// IterateFor runs fn over an iterator of [lower, upper) of the live engine for reads of src, and
// closes the iterator when fn returns. A scan job's iterator (ReadJobs) counts its blocks apart (as
// NewIterFor's), and its reads go in the idle I/O class: Pebble reads a block on the goroutine that
// moves the iterator, and file reads carry no caller, so fn runs on this goroutine locked to its OS
// thread, which is marked idle-class for the engine's emulated device (emudisk.Device.MarkIdle: served
// only when no foreground read waits) and, on Linux, for the kernel (ioprio_set IOPRIO_CLASS_IDLE,
// best-effort: a failure is counted in Stats.IOPrioErrors). Both are undone, and the thread unlocked,
// before IterateFor returns, so neither a locked thread nor a marked one outlives the call.
//
// fn must use the iterator on this goroutine only and not keep it: reads made elsewhere are the
// foreground's, and the iterator is closed when fn returns.
func (e *Engine) IterateFor(lower, upper []byte, src ReadSource, fn func(*Iterator) error) (err error) {
	if src == ReadJobs {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		restore, perr := setThreadIdleIO()
		if perr != nil {
			e.ioprioErrors.Add(1)
		}
		defer func() {
			if rerr := restore(); rerr != nil {
				e.ioprioErrors.Add(1)
			}
		}()
		defer e.device.MarkIdle()()
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
