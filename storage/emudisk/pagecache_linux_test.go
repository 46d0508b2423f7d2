//go:build linux

package emudisk

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// resident returns how many of the file's pages are in the page cache, by mincore on a mapping of it
// (the mapping itself faults nothing in).
func resident(t *testing.T, path string) (int, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	defer unix.Munmap(mem)
	vec := make([]byte, (len(mem)+pageSize-1)/pageSize)
	// x/sys has no Mincore wrapper: call it directly.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		if errors.Is(e, unix.ENOSYS) || errors.Is(e, unix.EINVAL) {
			t.Skipf("mincore unsupported: %v", e)
		}
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, len(vec)
}

// evict drops the file's pages with a plain fadvise, and skips the test if the filesystem keeps them
// (tmpfs, some overlay setups): there the page cache cannot be bypassed at all.
func evict(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Skipf("fadvise: %v", err)
	}
	if n, _ := resident(t, path); n != 0 {
		t.Skipf("filesystem keeps %d pages cached after FADV_DONTNEED; cannot test the bypass here", n)
	}
}

// readThrough reads the whole file through a wrapped FS: odd-sized ReadAt calls at unaligned offsets
// (like SST block reads), then a sequential Read pass (like a WAL replay or a backup copy).
func readThrough(t *testing.T, fs vfs.FS, path string, want []byte) {
	t.Helper()
	f, err := fs.Open(path, vfs.SequentialReadsOption)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(want))
	const block = 4000 + 96 // not a page multiple
	for off := 0; off < len(want); off += block {
		end := min(off+block, len(want))
		if _, err := f.ReadAt(got[off:end], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("ReadAt returned different bytes")
	}
	all, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(all, want) {
		t.Fatalf("Read returned different bytes (%d, %v)", len(all), err)
	}
}

// TestNoPageCache: a file read through a NoPageCache device has none of its pages cached afterwards,
// while the same reads through a plain device (the control) leave them cached.
func TestNoPageCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "000001.sst")
	data := make([]byte, 1<<20+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(path)
	f.Sync()
	f.Close()

	// Control: reading through a device without the bypass caches the file.
	evict(t, path)
	plain := NewDevice(Options{}, nil)
	readThrough(t, plain.Wrap(vfs.Default), path, data)
	if n, total := resident(t, path); n < total/2 {
		t.Skipf("plain reads left only %d/%d pages cached: this system does not cache reads, nothing to test", n, total)
	}

	evict(t, path)
	d := NewDevice(Options{NoPageCache: true}, nil)
	readThrough(t, d.Wrap(vfs.Default), path, data)
	if n, total := resident(t, path); n != 0 {
		t.Fatalf("%d/%d pages resident after reading through the NoPageCache device", n, total)
	}
	st := d.Stats()
	if st.Fadvises == 0 || st.FadviseErrors != 0 || st.ReadBytes != 2*int64(len(data)) {
		t.Fatalf("stats %+v", st)
	}
}

// TestNoPageCacheWrites: data written and synced through a NoPageCache device is not left cached.
func TestNoPageCacheWrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "000002.sst")
	d := NewDevice(Options{NoPageCache: true}, nil)
	fs := d.Wrap(vfs.Default)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	for i := 0; i < 16; i++ {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Is this a filesystem where dropping works at all?
	n, total := resident(t, path)
	if n != 0 {
		evict(t, path) // skips if the filesystem keeps pages regardless
		t.Fatalf("%d/%d written pages still cached after Sync", n, total)
	}
}

// TestModeledPageCacheKeepsItsPages: with a modeled page cache the real one holds what the model
// holds: reading a file four times the model's size leaves the model's last pages resident, and the
// rest dropped.
func TestModeledPageCacheKeepsItsPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "000003.sst")
	const pages = 256
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, pages*pageSize), 0o644); err != nil {
		t.Fatal(err)
	}
	if w, err := os.Open(path); err == nil { // clean, so that it can be evicted
		w.Sync()
		w.Close()
	}
	evict(t, path)
	d := NewDevice(Options{NoPageCache: true, PageCacheBytes: pages / 4 * int64(pageSize)}, nil)
	f, err := d.Wrap(vfs.Default).Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, pageSize)
	for i := 0; i < pages; i++ {
		if _, err := f.ReadAt(buf, int64(i*pageSize)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := resident(t, path); n < pages/4-8 || n > pages/4 {
		t.Fatalf("%d pages resident, want the model's %d", n, pages/4)
	}
	if st := d.Stats(); st.ReadOps != pages || st.PageCacheMisses != pages || st.PageCacheHits != 0 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := f.ReadAt(buf, int64((pages-1)*pageSize)); err != nil { // the last page: a hit
		t.Fatal(err)
	}
	if st := d.Stats(); st.ReadOps != pages || st.PageCacheHits != 1 {
		t.Fatalf("stats after a cached read %+v", st)
	}
}
