// Package faultfs is a Pebble vfs.FS wrapper that injects disk faults at run time, for tests of how a
// node behaves when its disk fails:
//
//   - write errors: Write and WriteAt fail with EIO and write nothing;
//   - sync errors: Sync, SyncData and SyncTo fail with EIO (the data may or may not be on disk, as
//     after a real failed fsync);
//   - a full disk: once a byte budget is used up, writes fail with ENOSPC (a write that does not fit
//     writes the part that does, as write(2) does), and so do Create, ReuseForWrite and Preallocate;
//     GetDiskUsage reports the budget left as the available space.
//
// Faults can be limited to files of some kinds (WAL, sstable, MANIFEST, directory, other) and to
// paths with a given suffix. Every switch is atomic and applies to files already open, so a test can
// turn faults on and off under a running engine. Injected faults are counted; Clear turns them all off.
//
// Off (the zero switches) it changes nothing: every call passes through to the wrapped filesystem.
// It must never be used outside tests.
package faultfs

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Kind is a set of file kinds (a bit mask).
type Kind uint32

// File kinds, by Pebble's file names.
const (
	WAL      Kind = 1 << iota // NNNNNN.log
	SST                       // NNNNNN.sst
	Manifest                  // MANIFEST-NNNNNN
	Dir                       // directories opened with OpenDir (for syncing)
	Other                     // everything else: OPTIONS, markers, blob files, temporary files
	// All is every kind.
	All = WAL | SST | Manifest | Dir | Other
)

// String names the kinds in k.
func (k Kind) String() string {
	if k == All {
		return "all"
	}
	var parts []string
	for _, n := range []struct {
		k Kind
		s string
	}{{WAL, "wal"}, {SST, "sst"}, {Manifest, "manifest"}, {Dir, "dir"}, {Other, "other"}} {
		if k&n.k != 0 {
			parts = append(parts, n.s)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// KindOf classifies a file path by its base name.
func KindOf(path string) Kind {
	base := path
	if i := strings.LastIndexAny(base, `/\`); i >= 0 {
		base = base[i+1:]
	}
	switch {
	case strings.HasSuffix(base, ".log"):
		return WAL
	case strings.HasSuffix(base, ".sst"):
		return SST
	case strings.HasPrefix(base, "MANIFEST-"):
		return Manifest
	}
	return Other
}

// ErrInjected is matched (errors.Is) by every error this package injects.
var ErrInjected = errors.New("faultfs: injected fault")

// Error is an injected fault. errors.Is matches it against ErrInjected and against its Errno
// (syscall.EIO or syscall.ENOSPC).
type Error struct {
	Op    string // write, sync, create, preallocate
	Path  string
	Errno syscall.Errno
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: %v (injected by faultfs)", e.Op, e.Path, e.Errno)
}

// Unwrap returns the errno and ErrInjected.
func (e *Error) Unwrap() []error { return []error{e.Errno, ErrInjected} }

// Stats count what an FS injected (and how much it let through) since it was wrapped.
type Stats struct {
	// WriteErrors, SyncErrors and NoSpaceErrors count injected faults.
	WriteErrors   int64
	SyncErrors    int64
	NoSpaceErrors int64
	// BytesWritten counts bytes written through to the wrapped filesystem; Syncs the syncs that were
	// passed through.
	BytesWritten int64
	Syncs        int64
}

// Injected is the total number of injected faults.
func (s Stats) Injected() int64 { return s.WriteErrors + s.SyncErrors + s.NoSpaceErrors }

// FS wraps a vfs.FS: files it opens inject the faults that are switched on; metadata operations pass
// through (except Create and ReuseForWrite on a full disk).
type FS struct {
	vfs.FS

	failWrites atomic.Bool
	failSyncs  atomic.Bool
	// budget is the bytes that may still be written before ENOSPC; math.MaxInt64: no limit.
	budget atomic.Int64
	// kinds restricts faults to these kinds (0: all); suffix, if set, to paths with that suffix.
	kinds  atomic.Uint32
	suffix atomic.Pointer[string]

	writeErrors, syncErrors, noSpaceErrors atomic.Int64
	bytesWritten, syncs                    atomic.Int64
}

var _ vfs.FS = (*FS)(nil)

// Wrap returns fs with fault injection, every fault off.
func Wrap(fs vfs.FS) *FS {
	f := &FS{FS: fs}
	f.budget.Store(math.MaxInt64)
	return f
}

// Unwrap returns the wrapped filesystem.
func (fs *FS) Unwrap() vfs.FS { return fs.FS }

// FailWrites switches write errors (EIO on Write and WriteAt) on or off.
func (fs *FS) FailWrites(on bool) { fs.failWrites.Store(on) }

// FailSyncs switches sync errors (EIO on Sync, SyncData and SyncTo) on or off.
func (fs *FS) FailSyncs(on bool) { fs.failSyncs.Store(on) }

// FillDisk makes the disk full after n more bytes are written to files that match the filter:
// further writes, creates and preallocations fail with ENOSPC. n = 0: full now.
func (fs *FS) FillDisk(n int64) {
	if n < 0 {
		n = 0
	}
	fs.budget.Store(n)
}

// SetFilter limits faults to files of the given kinds (0: every kind) whose path ends with suffix
// ("": any path). It applies to files already open.
func (fs *FS) SetFilter(kinds Kind, suffix string) {
	fs.kinds.Store(uint32(kinds))
	fs.suffix.Store(&suffix)
}

// Clear switches every fault off and removes the filter (the counters are kept).
func (fs *FS) Clear() {
	fs.failWrites.Store(false)
	fs.failSyncs.Store(false)
	fs.budget.Store(math.MaxInt64)
	fs.SetFilter(0, "")
}

// Stats reads the counters.
func (fs *FS) Stats() Stats {
	return Stats{
		WriteErrors: fs.writeErrors.Load(), SyncErrors: fs.syncErrors.Load(), NoSpaceErrors: fs.noSpaceErrors.Load(),
		BytesWritten: fs.bytesWritten.Load(), Syncs: fs.syncs.Load(),
	}
}

// matches reports whether faults apply to a file of kind k at path.
func (fs *FS) matches(path string, k Kind) bool {
	if ks := Kind(fs.kinds.Load()); ks != 0 && ks&k == 0 {
		return false
	}
	if s := fs.suffix.Load(); s != nil && *s != "" && !strings.HasSuffix(path, *s) {
		return false
	}
	return true
}

func (fs *FS) full() bool { return fs.budget.Load() <= 0 }

// take reserves up to n bytes of the budget and returns how many were granted.
func (fs *FS) take(n int64) int64 {
	for {
		b := fs.budget.Load()
		if b == math.MaxInt64 {
			return n
		}
		got := min(b, n)
		if got <= 0 {
			return 0
		}
		if fs.budget.CompareAndSwap(b, b-got) {
			return got
		}
	}
}

// give returns n unwritten bytes to the budget (unless the limit was lifted meanwhile).
func (fs *FS) give(n int64) {
	for {
		b := fs.budget.Load()
		if b == math.MaxInt64 || fs.budget.CompareAndSwap(b, b+n) {
			return
		}
	}
}

func (fs *FS) noSpace(op, path string) error {
	fs.noSpaceErrors.Add(1)
	return &Error{Op: op, Path: path, Errno: syscall.ENOSPC}
}

func (fs *FS) wrap(f vfs.File, err error, name string, k Kind) (vfs.File, error) {
	if err != nil || f == nil {
		return f, err
	}
	return &file{File: f, fs: fs, name: name, kind: k}, nil
}

// Create creates name, or fails with ENOSPC on a full disk.
func (fs *FS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	k := KindOf(name)
	if fs.full() && fs.matches(name, k) {
		return nil, fs.noSpace("create", name)
	}
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, err, name, k)
}

// Open opens name through the fault injector.
func (fs *FS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.Open(name, opts...)
	return fs.wrap(f, err, name, KindOf(name))
}

// OpenReadWrite opens name for reading and writing through the fault injector.
func (fs *FS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, category, opts...)
	return fs.wrap(f, err, name, KindOf(name))
}

// OpenDir opens a directory (for syncing) through the fault injector.
func (fs *FS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	return fs.wrap(f, err, name, Dir)
}

// ReuseForWrite reuses a file for writing, or fails with ENOSPC on a full disk.
func (fs *FS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	k := KindOf(newname)
	if fs.full() && fs.matches(newname, k) {
		return nil, fs.noSpace("create", newname)
	}
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, err, newname, k)
}

// GetDiskUsage reports the wrapped filesystem's usage, with the available space capped by the budget
// of a full-disk fault.
func (fs *FS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	u, err := fs.FS.GetDiskUsage(path)
	if err != nil {
		return u, err
	}
	if b := uint64(max(fs.budget.Load(), 0)); b < u.AvailBytes {
		u.UsedBytes += u.AvailBytes - b
		u.AvailBytes = b
	}
	return u, nil
}

// file is a vfs.File that injects the faults of its FS.
type file struct {
	vfs.File
	fs   *FS
	name string
	kind Kind
}

var (
	_ vfs.File    = (*file)(nil)
	_ io.ReaderAt = (*file)(nil)
	_ io.WriterAt = (*file)(nil)
)

// write injects the write faults, then writes what it may through w.
func (f *file) write(p []byte, w func([]byte) (int, error)) (int, error) {
	if !f.fs.matches(f.name, f.kind) {
		n, err := w(p)
		f.fs.bytesWritten.Add(int64(n))
		return n, err
	}
	if f.fs.failWrites.Load() {
		f.fs.writeErrors.Add(1)
		return 0, &Error{Op: "write", Path: f.name, Errno: syscall.EIO}
	}
	granted := f.fs.take(int64(len(p)))
	var n int
	var err error
	if granted > 0 {
		n, err = w(p[:granted])
		f.fs.bytesWritten.Add(int64(n))
		if int64(n) < granted {
			f.fs.give(granted - int64(n))
		}
	}
	if err == nil && n < len(p) {
		err = f.fs.noSpace("write", f.name)
	}
	return n, err
}

// Write appends p, or fails (EIO, or ENOSPC after a partial write).
func (f *file) Write(p []byte) (int, error) { return f.write(p, f.File.Write) }

// WriteAt writes p at off, or fails (EIO, or ENOSPC after a partial write).
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	return f.write(p, func(b []byte) (int, error) { return f.File.WriteAt(b, off) })
}

func (f *file) syncFault() error {
	if f.fs.failSyncs.Load() && f.fs.matches(f.name, f.kind) {
		f.fs.syncErrors.Add(1)
		return &Error{Op: "sync", Path: f.name, Errno: syscall.EIO}
	}
	f.fs.syncs.Add(1)
	return nil
}

// Sync syncs, or fails with EIO.
func (f *file) Sync() error {
	if err := f.syncFault(); err != nil {
		return err
	}
	return f.File.Sync()
}

// SyncData syncs the data, or fails with EIO.
func (f *file) SyncData() error {
	if err := f.syncFault(); err != nil {
		return err
	}
	return f.File.SyncData()
}

// SyncTo syncs a prefix, or fails with EIO.
func (f *file) SyncTo(length int64) (bool, error) {
	if err := f.syncFault(); err != nil {
		return false, err
	}
	return f.File.SyncTo(length)
}

// Preallocate allocates, or fails with ENOSPC on a full disk.
func (f *file) Preallocate(offset, length int64) error {
	if f.fs.full() && f.fs.matches(f.name, f.kind) {
		return f.fs.noSpace("preallocate", f.name)
	}
	return f.File.Preallocate(offset, length)
}
