package emudisk

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Idle readers' windows. Under NoPageCache every read is a real read of the host's disk, page by
// page: the engine reads a table's blocks one at a time, and with the kernel's readahead switched off
// each block is a pread and an fadvise of its own. On the small hosts that run several emulated
// nodes these syscalls cost more CPU than the rest of the read (about 60 µs a 4-KiB block on a
// virtual disk), CPU the node's foreground then waits for; a real node reading a table start to end
// gets the kernel's readahead, and its blocks from memory. So an idle-class reader (MarkIdle: the
// scan jobs' prefetches, which read spans start to end) reads a file of its own in windows of
// idleWindowBytes in one real read, and its next blocks from that window. What the device charges is
// unchanged: each ReadAt is charged as before, in the idle class, for its own bytes, when it asks.
// Only files opened read-only (Open: tables, immutable) have windows, and only without a modeled page
// cache; the foreground's reads never use them, so the engine's block cache stays the only cache
// its reads have.

// idleWindowBytes is one window: 32 blocks of 4 KiB.
const idleWindowBytes = 128 << 10

// idleWindowSlots bounds a device's windows (and their memory: 1 MiB): a node's few prefetches read
// a page at a time each, in turns, so each keeps its window while it reads the next page.
const idleWindowSlots = 8

// readWindow is a span of one file read ahead for an idle reader.
type readWindow struct {
	f    *file
	off  int64
	buf  []byte // the bytes of [off, off+len(buf))
	used uint64 // the windows' clock when last read: the least recently read is replaced
}

// idleWindows are a device's windows.
type idleWindows struct {
	mu    sync.Mutex
	clock uint64
	w     [idleWindowSlots]readWindow
	fills atomic.Int64
	hits  atomic.Int64
}

// windowed reports whether f's idle reads go through windows.
func (f *file) windowed() bool { return f.readOnly && f.bypass() && f.pc == nil }

// readIdle serves an idle reader's ReadAt from a window of f, reading a new window when none holds
// [off, off+len(p)); ok false when it could not (a short or failed read: the caller reads directly,
// for the wrapped file's own answer). A window read is dropped from the page cache at once.
func (w *idleWindows) readIdle(f *file, p []byte, off int64) (n int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clock++
	for i := range w.w {
		s := &w.w[i]
		if s.f == f && off >= s.off && off+int64(len(p)) <= s.off+int64(len(s.buf)) {
			s.used = w.clock
			w.hits.Add(1)
			return copy(p, s.buf[off-s.off:]), true
		}
	}
	slot := &w.w[0]
	for i := range w.w {
		if w.w[i].used < slot.used {
			slot = &w.w[i]
		}
	}
	size := max(len(p), idleWindowBytes)
	buf := slot.buf
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	m, err := f.f.ReadAt(buf, off)
	if m < len(p) || (err != nil && err != io.EOF) {
		*slot = readWindow{buf: buf[:0]} // forgotten, its buffer kept
		return 0, false
	}
	f.dropRead(off, m)
	*slot = readWindow{f: f, off: off, buf: buf[:m], used: w.clock}
	w.fills.Add(1)
	return copy(p, buf[:m]), true
}

// forget drops f's windows (f is closing).
func (w *idleWindows) forget(f *file) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.w {
		if w.w[i].f == f {
			w.w[i] = readWindow{buf: w.w[i].buf[:0]}
		}
	}
}

// readAt reads p at off from the wrapped file: an idle reader's through a window when f has them
// (windowed: its pages already dropped), the others' directly and timed (Stats.ReadTime: the host's
// disk as the foreground finds it).
func (f *file) readAt(p []byte, off int64, idle bool) (n int, err error, windowed bool) {
	if idle {
		if f.windowed() {
			if n, ok := f.d.windows.readIdle(f, p, off); ok {
				return n, nil, true
			}
		}
		n, err = f.f.ReadAt(p, off)
		return n, err, false
	}
	began := time.Now()
	n, err = f.f.ReadAt(p, off)
	f.d.readTime.Add(int64(time.Since(began)))
	f.d.timedReads.Add(1)
	return n, err, false
}
