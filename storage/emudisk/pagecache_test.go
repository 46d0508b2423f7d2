package emudisk

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The model itself: pages enter when touched, the least recently used leave first, and removing or
// renaming a file takes its pages along.
func TestPageCacheModel(t *testing.T) {
	ps := int64(pageSize)
	c := newPageCache(4 * ps)
	a := c.opened("a", &file{})
	b := c.opened("b", &file{})
	steps := []struct {
		f        *pcFile
		off, n   int64
		hit      bool
		resident int
	}{
		{a, 0, 2 * ps, false, 2},     // a0 a1 enter
		{a, 100, 10, true, 2},        // inside a0: a hit
		{b, ps / 2, ps, false, 4},    // b0 b1 enter (the read straddles them)
		{a, 0, 1, true, 4},           // a0 the most recent: a0 b1 b0 a1 (least recent last)
		{b, 2 * ps, 1, false, 4},     // b2 enters and a1, the least recent, leaves
		{a, ps, 1, false, 4},         // a1 again: a miss; b0 leaves (oldest now)
		{b, ps, 1, true, 4},          // b1 is still there
		{b, 0, 1, false, 4},          // b0 is not
		{a, 0, 2 * ps, false, 4},     // a0 was evicted by b0's return
		{b, 3 * ps, 0, true, 4},      // an empty read is free
		{a, 5*ps - 1, 2, false, 4},   // two pages, a4 and a5
		{a, 4 * ps, 2 * ps, true, 4}, // both there now
	}
	for i, s := range steps {
		hit, _ := c.access(s.f, s.off, s.n)
		if hit != s.hit || c.resident() != s.resident {
			t.Fatalf("step %d (%s [%d, +%d)): hit %v resident %d, want %v %d", i, s.f.name, s.off, s.n, hit, c.resident(), s.hit, s.resident)
		}
	}
	c.remove("a") // a holds all four pages now
	if c.resident() != 0 {
		t.Fatalf("after removing a: %d pages", c.resident())
	}
	if hit, _ := c.access(a, 4*ps, 1); hit || c.resident() != 0 {
		t.Errorf("a removed file's open handle: hit %v, %d pages (want a miss that caches nothing)", hit, c.resident())
	}
	c.access(b, 0, 1)
	c.rename("b", "c")
	cf := c.opened("c", &file{})
	if cf != b {
		t.Fatal("rename did not carry the file's model")
	}
	if hit, _ := c.access(cf, 0, 1); !hit {
		t.Error("renamed file lost its pages")
	}
	c.opened("dir/x", &file{})
	x := c.files["dir/x"]
	c.access(x, 0, 1)
	c.opened("dirx", &file{})
	c.access(c.files["dirx"], 0, 1)
	c.removeTree("dir")
	if c.files["dir/x"] != nil || c.files["dirx"] == nil {
		t.Errorf("removeTree(dir): dir/x kept %v, dirx dropped %v", c.files["dir/x"] != nil, c.files["dirx"] == nil)
	}
}

// Through a device: a read of pages the modeled cache holds costs no operation, written pages are
// cached, a file larger than the cache misses again, and without NoPageCache there is no model.
func TestPageCacheCharges(t *testing.T) {
	ps := pageSize
	d := NewDevice(Options{NoPageCache: true, IOPS: 100, PageCacheBytes: 8 * int64(ps)}, newFakeClock(false))
	fs := d.Wrap(vfs.NewMem())
	writeChunks(t, fs, "w", 4*ps, ps) // 4 pages written: cached
	r, err := fs.Open("w")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	read := func(f vfs.File, off int) {
		t.Helper()
		if _, err := f.ReadAt(buf, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	read(r, 0)
	read(r, 3*ps+5)
	if st := d.Stats(); st.ReadOps != 0 || st.PageCacheHits != 2 || st.PageCacheMisses != 0 {
		t.Fatalf("reads of written pages: %+v", st)
	}
	r.Close()
	writeChunks(t, fs, "big", 16*ps, ps) // twice the cache: only its last 8 pages stay
	big, err := fs.Open("big")
	if err != nil {
		t.Fatal(err)
	}
	read(big, 15*ps)
	read(big, 0)
	read(big, 0)
	if st := d.Stats(); st.ReadOps != 1 || st.PageCacheHits != 4 || st.PageCacheMisses != 1 {
		t.Fatalf("after the big file: %+v (want one device read, for its evicted first page)", st)
	}
	read(big, 0)
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("big"); err != nil {
		t.Fatal(err)
	}
	if n := d.pc.resident(); n != 0 { // big had pushed out all of w's pages
		t.Errorf("%d pages resident after removing the only file that had any", n)
	}
	if d.pc.files["big"] != nil {
		t.Error("a removed file is still in the model")
	}
	for _, o := range []Options{{PageCacheBytes: 1 << 20}, {NoPageCache: true}} {
		if NewDevice(o, nil).pc != nil {
			t.Errorf("%+v has a modeled page cache", o)
		}
	}
}
