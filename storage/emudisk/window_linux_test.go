package emudisk

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestIdleWindows: an idle reader reading a table start to end in blocks gets the bytes the file
// holds from one real read a window, each block still charged in the idle class for its own bytes;
// a foreground reader of the same file reads directly (timed), and a file opened for writing has no
// windows.
func TestIdleWindows(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 300<<10) // two whole windows and part of a third
	rand.New(rand.NewSource(1)).Read(data)
	if err := os.WriteFile(filepath.Join(dir, "t.sst"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDevice(Options{NoPageCache: true, ReadBytesPerSec: 1 << 30}, newFakeClock(true))
	fs := d.Wrap(vfs.Default)
	f, err := fs.Open(filepath.Join(dir, "t.sst"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const block = 4 << 10
	got := make([]byte, 0, len(data))
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer d.MarkIdle()()
		p := make([]byte, block)
		for off := 0; off < len(data); off += block {
			n, err := f.ReadAt(p, int64(off))
			if err != nil || n != block {
				t.Errorf("idle read at %d: %d, %v", off, n, err)
				return
			}
			got = append(got, p[:n]...)
		}
	}()
	<-done
	if !bytes.Equal(got, data) {
		t.Fatal("the idle reader read other bytes than the file's")
	}
	st := d.Stats()
	blocks := int64(len(data) / block)
	if st.IdleWindowFills != 3 || st.IdleWindowHits != blocks-3 || st.IdleOps != blocks || st.ReadBytes != int64(len(data)) || st.TimedReads != 0 {
		t.Fatalf("stats %+v: want 3 windows, %d idle reads of %d bytes", st, blocks, len(data))
	}
	p := make([]byte, block)
	if n, err := f.ReadAt(p, block); err != nil || n != block || !bytes.Equal(p, data[block:2*block]) {
		t.Fatalf("foreground read: %d, %v", n, err)
	}
	if st := d.Stats(); st.TimedReads != 1 || st.IdleWindowHits != blocks-3 {
		t.Fatalf("a foreground read went through a window: %+v", st)
	}
	w, err := fs.OpenReadWrite(filepath.Join(dir, "t.sst"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.(*file).windowed() || !f.(*file).windowed() {
		t.Fatal("windows on a file open for writing, or none on one open for reading")
	}
}
