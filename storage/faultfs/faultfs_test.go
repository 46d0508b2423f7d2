package faultfs

import (
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestKindOf(t *testing.T) {
	for path, want := range map[string]Kind{
		"/d/000012.log": WAL, "000012.sst": SST, "/d/MANIFEST-000001": Manifest,
		"/d/OPTIONS-000003": Other, "/d/marker.manifest.000001.MANIFEST-000001": Other, "/d/000004.blob": Other,
	} {
		if got := KindOf(path); got != want {
			t.Errorf("KindOf(%q) = %v, want %v", path, got, want)
		}
	}
	if s := (WAL | Manifest).String(); s != "wal|manifest" {
		t.Errorf("(WAL|Manifest).String() = %q", s)
	}
}

func mustCreate(t *testing.T, fs vfs.FS, name string) vfs.File {
	t.Helper()
	f, err := fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return f
}

func isInjected(err error, errno syscall.Errno) bool {
	var fe *Error
	return errors.Is(err, ErrInjected) && errors.Is(err, errno) && errors.As(err, &fe) && fe.Errno == errno
}

// TestWriteAndSyncFaults switches write and sync errors on and off, with and without filters, on
// files that are already open, and checks the counters.
func TestWriteAndSyncFaults(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	fs := Wrap(mem)
	wal := mustCreate(t, fs, "d/000001.log")
	sst := mustCreate(t, fs, "d/000002.sst")
	dir, err := fs.OpenDir("d")
	if err != nil {
		t.Fatal(err)
	}
	ok := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: unexpected error %v", what, err)
		}
	}
	fail := func(what string, err error, errno syscall.Errno) {
		t.Helper()
		if !isInjected(err, errno) {
			t.Fatalf("%s: error %v, want an injected %v", what, err, errno)
		}
	}
	write := func(f vfs.File) error { _, err := f.Write([]byte("abc")); return err }
	writeAt := func(f vfs.File) error { _, err := f.WriteAt([]byte("xyz"), 100); return err }
	syncTo := func(f vfs.File) error { _, err := f.SyncTo(3); return err }

	// Off: everything passes through.
	ok("write", write(wal))
	ok("sync", wal.Sync())

	fs.FailWrites(true)
	fail("wal write", write(wal), syscall.EIO)
	fail("sst writeAt", writeAt(sst), syscall.EIO)
	ok("sync with write errors on", wal.Sync())

	fs.SetFilter(SST, "")
	ok("wal write, sst filter", write(wal))
	fail("sst write, sst filter", write(sst), syscall.EIO)
	fs.SetFilter(0, "000001.log")
	fail("wal write, suffix filter", write(wal), syscall.EIO)
	ok("sst write, suffix filter", write(sst))

	fs.Clear()
	fs.FailSyncs(true)
	ok("write with sync errors on", write(wal))
	fail("sync", wal.Sync(), syscall.EIO)
	fail("syncdata", sst.SyncData(), syscall.EIO)
	fail("syncto", syncTo(wal), syscall.EIO)
	fail("dir sync", dir.Sync(), syscall.EIO)
	fs.SetFilter(Dir, "")
	ok("wal sync, dir filter", wal.Sync())
	fail("dir sync, dir filter", dir.Sync(), syscall.EIO)

	fs.Clear()
	ok("write after clear", write(sst))
	ok("sync after clear", sst.Sync())
	ok("dir sync after clear", dir.Sync())

	st := fs.Stats()
	if st.WriteErrors != 4 || st.SyncErrors != 5 || st.NoSpaceErrors != 0 || st.Injected() != 9 {
		t.Fatalf("stats %+v: want 4 write errors, 5 sync errors", st)
	}
	if st.BytesWritten != 5*3 {
		t.Fatalf("stats %+v: want 15 bytes written", st)
	}
	// The failed writes wrote nothing.
	for name, want := range map[string]string{"d/000001.log": "abcabcabc", "d/000002.sst": "abcabc"} {
		f, err := mem.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != want {
			t.Errorf("%s holds %q, want %q", name, b, want)
		}
	}
}

// TestDiskFull checks the byte budget: a write that does not fit writes what fits and fails with
// ENOSPC, and so do creates and preallocations once the budget is used up, until Clear.
func TestDiskFull(t *testing.T) {
	mem := vfs.NewMem()
	mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30})
	fs := Wrap(mem)
	f := mustCreate(t, fs, "000001.log")
	fs.FillDisk(10)
	if u, err := fs.GetDiskUsage("/"); err != nil || u.AvailBytes != 10 || u.UsedBytes != 2<<30-10 {
		t.Fatalf("disk usage with 10 bytes left: %+v, %v", u, err)
	}
	if n, err := f.Write([]byte("123456")); n != 6 || err != nil {
		t.Fatalf("write 6 of 10: %d, %v", n, err)
	}
	n, err := f.Write([]byte("abcdef"))
	if n != 4 || !isInjected(err, syscall.ENOSPC) {
		t.Fatalf("write 6 with 4 left: %d, %v; want 4 and an injected ENOSPC", n, err)
	}
	if _, err := f.Write([]byte("x")); !isInjected(err, syscall.ENOSPC) {
		t.Fatalf("write when full: %v", err)
	}
	if _, err := fs.Create("000002.sst", vfs.WriteCategoryUnspecified); !isInjected(err, syscall.ENOSPC) {
		t.Fatalf("create when full: %v", err)
	}
	if _, err := fs.ReuseForWrite("000001.log", "000003.log", vfs.WriteCategoryUnspecified); !isInjected(err, syscall.ENOSPC) {
		t.Fatalf("reuse when full: %v", err)
	}
	if err := f.Preallocate(0, 1<<20); !isInjected(err, syscall.ENOSPC) {
		t.Fatalf("preallocate when full: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("sync when full: %v", err)
	}
	// A filter exempts other files.
	fs.SetFilter(SST, "")
	if _, err := f.Write([]byte("!")); err != nil {
		t.Fatalf("wal write when full with an sst filter: %v", err)
	}
	fs.Clear()
	if _, err := f.Write([]byte("ghi")); err != nil {
		t.Fatalf("write after clear: %v", err)
	}
	if st := fs.Stats(); st.NoSpaceErrors != 5 || st.BytesWritten != 14 {
		t.Fatalf("stats %+v: want 5 ENOSPC, 14 bytes written", st)
	}
	r, _ := mem.Open("000001.log")
	b, _ := io.ReadAll(r)
	if string(b) != "123456abcd!ghi" {
		t.Fatalf("file holds %q", b)
	}
}
