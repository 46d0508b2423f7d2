package emudisk

import (
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// emuFS wraps a vfs.FS: files it opens go through its device; metadata operations pass through.
type emuFS struct {
	vfs.FS
	d *Device
}

var _ vfs.FS = (*emuFS)(nil)

// Unwrap returns the wrapped filesystem.
func (fs *emuFS) Unwrap() vfs.FS { return fs.FS }

func (fs *emuFS) wrap(name string, f vfs.File, err error, dir bool) (vfs.File, error) {
	if err != nil || f == nil {
		return f, err
	}
	ef := &file{f: f, d: fs.d, fd: f.Fd(), dir: dir, raBytes: fs.d.opts.ReadaheadBytes}
	ef.lowDirty.Store(math.MaxInt64)
	if w := fs.d.readaheadFor(name); w > 0 && !dir {
		ef.seq, ef.raBytes = true, w // every read is a sequential reader's (ReadAheadUnder)
	}
	if !dir && fs.d.pc != nil {
		ef.pc = fs.d.pc.opened(name, ef)
	}
	if !dir && fs.d.opts.NoPageCache {
		// No kernel readahead: a read brings in only the pages it asks for, which it then drops.
		ef.fadvise(0, 0, fadvRandom)
	}
	return ef, nil
}

// Create creates name through the device.
func (fs *emuFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.d.pc != nil {
		fs.d.pc.remove(name) // a created file starts empty
	}
	f, err := fs.FS.Create(name, category)
	return fs.wrap(name, f, err, false)
}

// Open opens name through the device. With NoPageCache the readahead hints (SequentialReadsOption,
// RandomReadsOption) are not passed to the kernel: the file always reads without kernel readahead.
// A file opened for sequential reads gets the device's modeled readahead instead (ReadaheadBytes).
func (fs *emuFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	seq := false
	for _, o := range opts {
		if o == vfs.SequentialReadsOption {
			seq = true
		}
	}
	if fs.d.opts.NoPageCache {
		opts = nil
	}
	f, err := fs.FS.Open(name, opts...)
	ef, err := fs.wrap(name, f, err, false)
	if err == nil {
		ef.(*file).seq = ef.(*file).seq || seq
		ef.(*file).readOnly = true
	}
	return ef, err
}

// OpenReadWrite opens name for reading and writing through the device.
func (fs *emuFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if fs.d.opts.NoPageCache {
		opts = nil
	}
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.wrap(name, f, err, false)
}

// OpenDir opens a directory (for syncing) through the device.
func (fs *emuFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(name, f, err, true)
}

// ReuseForWrite reuses a file for writing through the device.
func (fs *emuFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	if err == nil && fs.d.pc != nil {
		fs.d.pc.rename(oldname, newname)
	}
	return fs.wrap(newname, f, err, false)
}

// Remove removes name; the modeled page cache forgets its pages.
func (fs *emuFS) Remove(name string) error {
	err := fs.FS.Remove(name)
	if err == nil && fs.d.pc != nil {
		fs.d.pc.remove(name)
	}
	return err
}

// RemoveAll removes name and what it holds; the modeled page cache forgets their pages.
func (fs *emuFS) RemoveAll(name string) error {
	err := fs.FS.RemoveAll(name)
	if err == nil && fs.d.pc != nil {
		fs.d.pc.removeTree(name)
	}
	return err
}

// Rename renames oldname; the modeled page cache moves its pages with it.
func (fs *emuFS) Rename(oldname, newname string) error {
	err := fs.FS.Rename(oldname, newname)
	if err == nil && fs.d.pc != nil {
		fs.d.pc.rename(oldname, newname)
	}
	return err
}

// file is a vfs.File on an emulated device. Each data operation is done first and then charged (the
// caller waits for its tokens and the device latency), so results and errors are the wrapped file's.
type file struct {
	f   vfs.File
	d   *Device
	fd  uintptr // vfs.InvalidFd when the file has no OS descriptor (e.g. vfs.MemFS)
	dir bool

	// pos is the file offset of the next Read or Write (they share it, as on an *os.File; vfs.File
	// has no Seek, so it starts at 0). lowDirty is the lowest offset written since the written pages
	// were last dropped (MaxInt64: none).
	pos      atomic.Int64
	lowDirty atomic.Int64

	// seq: opened for sequential reads, so every read outside the readahead window starts a new one.
	// raBytes is the file's readahead window: Options.ReadaheadBytes, or its directory's
	// (Device.ReadAheadUnder).
	// ra is the window [lo, hi) the last readahead fetched (see Options.ReadaheadBytes); size is the
	// file's size once sized (-1 if Stat failed), to clip windows at the end of the file.
	seq     bool
	raBytes int64
	ra      struct {
		sync.Mutex
		lo, hi, size int64
		sized        bool
	}
	// pc is the file in the device's modeled page cache (Options.PageCacheBytes), nil without one.
	pc *pcFile
	// readOnly: opened with Open, so never written through this handle (window.go).
	readOnly bool
}

var _ vfs.File = (*file)(nil)

func (f *file) bypass() bool { return f.d.opts.NoPageCache && !f.dir && f.fd != vfs.InvalidFd }

// fadvise calls posix_fadvise on the file's descriptor, when it has one, and counts the call.
func (f *file) fadvise(off, n int64, advice int) {
	if f.fd == vfs.InvalidFd {
		return
	}
	f.d.fadvises.Add(1)
	if err := fadvise(f.fd, off, n, advice); err != nil {
		f.d.fadviseErrors.Add(1)
	}
}

// cache runs [off, off+n) through the modeled page cache: it reports whether every page was
// resident, and leaves them all resident (most recently used); the pages that makes the model
// evict are dropped from the real page cache.
func (f *file) cache(off, n int64) bool {
	hit, ev := f.d.pc.access(f.pc, off, n)
	for _, e := range ev {
		if e.f.bypass() {
			e.f.fadvise(e.idx*int64(pageSize), int64(pageSize), fadvDontNeed)
		}
	}
	return hit
}

// cachedRead is a read of [off, off+n) through the modeled page cache, counted: true when the
// cache held it all (the device is not charged). Without a model it drops the pages read instead
// and is false.
func (f *file) cachedRead(off int64, n int) bool {
	if f.pc == nil {
		f.dropRead(off, n)
		return false
	}
	if f.cache(off, int64(n)) {
		f.d.pageCacheHits.Add(1)
		return true
	}
	f.d.pageCacheMisses.Add(1)
	return false
}

// dropRead drops the pages of [off, off+n) from the page cache. The range is widened to whole pages:
// the kernel keeps a partially covered page, and a block read rarely starts or ends on a page edge.
func (f *file) dropRead(off int64, n int) {
	if n <= 0 || !f.bypass() {
		return
	}
	ps := int64(pageSize)
	start := off &^ (ps - 1)
	end := (off + int64(n) + ps - 1) &^ (ps - 1)
	f.fadvise(start, end-start, fadvDontNeed)
}

// noteWrite records that [off, …) was written, to drop it once it is synced.
func (f *file) noteWrite(off, n int64) {
	if f.pc != nil {
		f.cache(off, n) // a kernel caches what it writes; the model drops it when it evicts it
		return
	}
	for {
		cur := f.lowDirty.Load()
		if off >= cur || f.lowDirty.CompareAndSwap(cur, off) {
			return
		}
	}
}

// dropWritten drops the pages written since the last drop, from the lowest written page to the end
// of the file. After a full sync they are clean, so the kernel can drop them; dirty pages (after
// Close without a sync) are queued for writeback and stay until it completes.
func (f *file) dropWritten() {
	if !f.bypass() || f.pc != nil {
		return
	}
	low := f.lowDirty.Swap(math.MaxInt64)
	if low == math.MaxInt64 {
		return
	}
	f.fadvise(low&^(int64(pageSize)-1), 0, fadvDontNeed)
}

// Read reads sequentially, then drops the pages read and charges one read.
func (f *file) Read(p []byte) (int, error) {
	n, err := f.f.Read(p)
	off := f.pos.Add(int64(n)) - int64(n)
	if !f.cachedRead(off, n) {
		f.d.charge(opRead, int64(n))
	}
	return n, err
}

// ReadAt reads at off, then drops the pages read and charges one read, unless the read falls in the
// readahead window or starts a new one (see Options.ReadaheadBytes).
func (f *file) ReadAt(p []byte, off int64) (int, error) {
	idle := f.d.callerIdle()
	n, err, windowed := f.readAt(p, off, idle)
	if !windowed && f.cachedRead(off, n) {
		return n, err
	}
	window := int64(0)
	if f.seq {
		window = max(int64(n), f.raBytes)
	}
	if !f.readahead(off, int64(n), window) {
		f.d.chargeAs(opRead, int64(n), idle)
	}
	return n, err
}

// readahead charges [off, off+n) to the modeled readahead and reports whether it did: free when the
// window already covers it; when it does not and window > 0, one operation fetches a new window of
// that many bytes from off (at least n, at most to the end of the file).
func (f *file) readahead(off, n, window int64) bool {
	if f.raBytes <= 0 || f.dir {
		return false
	}
	f.ra.Lock()
	if f.ra.hi > f.ra.lo && off >= f.ra.lo && off+n <= f.ra.hi {
		f.ra.Unlock()
		f.d.readaheadHits.Add(1)
		return true
	}
	if window <= 0 {
		f.ra.Unlock()
		return false
	}
	if !f.ra.sized {
		f.ra.size = -1
		if st, err := f.f.Stat(); err == nil {
			f.ra.size = st.Size()
		}
		f.ra.sized = true
	}
	hi := off + max(n, window)
	if f.ra.size >= 0 {
		hi = max(min(hi, f.ra.size), off+n)
	}
	f.ra.lo, f.ra.hi = off, hi
	f.ra.Unlock()
	if f.pc != nil {
		f.cache(off, hi-off) // the window's pages are in the page cache now
	}
	f.d.readaheadOps.Add(1)
	f.d.charge(opRead, hi-off)
	return true
}

// Write appends, then charges one write of the bytes written.
func (f *file) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	off := f.pos.Add(int64(n)) - int64(n)
	if n > 0 {
		f.noteWrite(off, int64(n))
	}
	f.d.charge(opWrite, int64(n))
	return n, err
}

// WriteAt writes at off, then charges one write of the bytes written.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	if n > 0 {
		f.noteWrite(off, int64(n))
	}
	f.d.charge(opWrite, int64(n))
	return n, err
}

// Sync syncs, drops the synced pages and charges one operation.
func (f *file) Sync() error {
	err := f.f.Sync()
	if err == nil {
		f.dropWritten()
	}
	f.d.charge(opSync, 0)
	return err
}

// SyncData syncs the data, drops the synced pages and charges one operation.
func (f *file) SyncData() error {
	err := f.f.SyncData()
	if err == nil {
		f.dropWritten()
	}
	f.d.charge(opSync, 0)
	return err
}

// SyncTo syncs a prefix (possibly asynchronously) and charges one operation; pages are dropped only
// when the whole file was synced.
func (f *file) SyncTo(length int64) (bool, error) {
	full, err := f.f.SyncTo(length)
	if err == nil && full {
		f.dropWritten()
	}
	f.d.charge(opSync, 0)
	return full, err
}

// Prefetch, under NoPageCache, is the modeled readahead when ReadaheadBytes is set (one operation
// fetches [offset, offset+min(length, ReadaheadBytes)) and the reads inside it are then free) and a
// no-op otherwise: passed to the kernel it would fill the page cache. Without NoPageCache it passes
// through, uncharged (it is a hint, not a read the caller waits for).
func (f *file) Prefetch(offset, length int64) error {
	if f.d.opts.NoPageCache {
		if ra := f.raBytes; ra > 0 && length > 0 {
			w := min(length, ra)
			f.readahead(offset, w, w)
		}
		return nil
	}
	return f.f.Prefetch(offset, length)
}

// Preallocate passes through, uncharged (it allocates, it does not transfer data).
func (f *file) Preallocate(offset, length int64) error { return f.f.Preallocate(offset, length) }

// Stat passes through.
func (f *file) Stat() (vfs.FileInfo, error) { return f.f.Stat() }

// Fd is the wrapped file's descriptor (vfs.InvalidFd if it has none).
func (f *file) Fd() uintptr { return f.fd }

// Close drops whatever written pages are still cached (best-effort) and closes the file.
func (f *file) Close() error {
	f.dropWritten()
	if f.readOnly {
		f.d.windows.forget(f)
	}
	if f.pc != nil {
		f.d.pc.closed(f.pc, f)
	}
	return f.f.Close()
}

var (
	_ io.ReaderAt = (*file)(nil)
	_ io.WriterAt = (*file)(nil)
)

var pageSize = os.Getpagesize()
