package usage

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/storage/emudisk"
)

// A device's busy share is its operations against its IOPS or its bytes against its bandwidth,
// whichever is higher, at most 1.
func TestBusy(t *testing.T) {
	o := emudisk.Options{IOPS: 100, ReadBytesPerSec: 1000, WriteBytesPerSec: 1000}
	a := emudisk.Stats{}
	if u := busy(o, a, emudisk.Stats{ReadOps: 50, ReadBytes: 100}, 1); u != 0.5 {
		t.Fatalf("50 ops of 100: %.2f", u)
	}
	if u := busy(o, a, emudisk.Stats{ReadOps: 10, WriteBytes: 1600}, 2); u != 0.8 {
		t.Fatalf("800 B/s of 1000: %.2f", u)
	}
	if u := busy(o, a, emudisk.Stats{ReadOps: 1000}, 1); u != 1 {
		t.Fatalf("10× the IOPS: %.2f, want 1", u)
	}
}

// A node's load from its heartbeat: its leaders' point reads and scanned blocks, every replica's
// writes, its leaders' histograms and its cache in blocks.
func TestNodeLoad(t *testing.T) {
	st := &pb.NodeStats{BlockCacheCapacity: 4096 * 10, BlockBytes: 4096, Ranges: []*pb.RangeLoad{
		{Leader: true, ReadQps: 100, ScanQps: 10, ScanBlocksQps: 30, WriteQps: 5, HistRates: []float64{1}, HistBlocks: []float64{90}},
		{ReadQps: 70, WriteQps: 7, HistRates: []float64{3}, HistBlocks: []float64{1}},
	}}
	l, h, cache := nodeLoad(st)
	if l.Reads != 90 || l.Scans != 30 || l.Writes != 12 || len(h) != 1 || cache != 10 {
		t.Fatalf("load %+v, histogram %v, cache %.0f", l, h, cache)
	}
	s := sumHeard([]heard{{stats: []*pb.NodeStats{st}}, {stats: []*pb.NodeStats{{}}}})
	if math.Abs(s.load.Reads-45) > 1e-9 {
		t.Fatalf("two readings, one idle: %.1f reads/s, want their mean 45", s.load.Reads)
	}
}

// Ranges belong to the tenant whose prefix starts them.
func TestTenantOf(t *testing.T) {
	for start, want := range map[string]string{"hot/00000000": "hot", "cold/00001000": "cold", "": "", "hotter": ""} {
		if got := tenantOf(&pb.RangeDescriptor{StartKey: []byte(start)}); got != want {
			t.Errorf("%q: %q, want %q", start, got, want)
		}
	}
}

// The pacer hands out rate slots a second.
func TestPacer(t *testing.T) {
	wait := pacer(200)
	start := time.Now()
	for range 41 {
		if err := wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d < 190*time.Millisecond || d > 2*time.Second {
		t.Fatalf("41 slots at 200/s took %v, want about 200 ms", d)
	}
}
