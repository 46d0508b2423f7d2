package emudisk

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStream checks that I/O charged through a stream lands in the device's counters in chunk-sized
// operations and shares the budget of the files the device wraps.
func TestStream(t *testing.T) {
	clk := newFakeClock(true)
	d := NewDevice(Options{WriteBytesPerSec: 1 << 20}, clk)
	w := d.WriteStream(256 << 10)
	for range 1 << 10 {
		w.Add(1 << 10) // 1 MiB in 1-KiB records: four full chunks
	}
	if st := d.Stats(); st.WriteBytes != 1<<20 || st.WriteOps != 4 || st.Syncs != 0 {
		t.Fatalf("after 1 MiB in 256-KiB chunks: %+v, want 4 writes of 1 MiB in all", st)
	}
	w.Add(100)
	w.Sync()
	st := d.Stats()
	if st.WriteBytes != 1<<20+100 || st.WriteOps != 6 || st.Syncs != 1 || st.ReadBytes != 0 {
		t.Fatalf("after a sync: %+v, want 1 MiB + 100 bytes in 5 writes and a sync", st)
	}
	// At 1 MiB/s less the 10 ms burst: the stream waits as writes through the device do.
	if got, want := clk.total(), time.Second+100*time.Second/(1<<20)-10*time.Millisecond; !near(got, want) {
		t.Fatalf("slept %v, want %v", got, want)
	}
	// A write through the device's filesystem shares the budget the stream spent: no burst is left.
	before := clk.total()
	writeChunks(t, d.Wrap(vfs.NewMem()), "a", 64<<10, 64<<10)
	if got := clk.total() - before; !near(got, 62500*time.Microsecond) {
		t.Fatalf("a 64-KiB write after the stream slept %v, want 62.5ms", got)
	}

	r := d.ReadStream(256 << 10)
	r.Add(300 << 10)
	r.Sync()
	if st := d.Stats(); st.ReadBytes != 300<<10 || st.ReadOps != 2 || st.Syncs != 1 {
		t.Fatalf("a 300-KiB read stream: %+v, want 2 reads of 300 KiB and no further sync", st)
	}

	var none *Device
	s := none.WriteStream(1 << 10)
	s.Add(1 << 20)
	s.Sync()
	if s != nil {
		t.Fatal("a nil device's stream is not nil")
	}
}
