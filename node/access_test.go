package node

import (
	"math"
	"testing"

	"github.com/shoaldb/shoal/pb"
	"github.com/shoaldb/shoal/plan/usage"
)

// A node's predicted usage counts its leaders' reads split by the hit ratio of their merged
// histograms in its cache, their scanned blocks, and every replica's writes.
func TestPredictUsage(t *testing.T) {
	st := &pb.NodeStats{BlockCacheCapacity: 1000 * 4096, BlockBytes: 4096, Ranges: []*pb.RangeLoad{
		{RangeId: 1, Leader: true, ReadQps: 110, ScanQps: 10, ScanBlocksQps: 40, WriteQps: 5,
			HistRates: []float64{0.05}, HistBlocks: []float64{2000}},
		{RangeId: 2, WriteQps: 7, ReadQps: 50}, // a follower: its writes only
	}}
	m := usage.Model{Version: 1, HitCost: 1e-4, MissCost: 1e-2, Write: 1e-3, Scan: 1e-3}
	u, hit := predictUsage(st, m)
	if math.Abs(hit-0.5) > 1e-6 {
		t.Fatalf("hit ratio %.4f: 1000 blocks of cache over 2000 read alike hit half the time", hit)
	}
	want := 100*0.5*1e-4 + 100*0.5*1e-2 + 12*1e-3 + 40*1e-3
	if math.Abs(u-want) > 1e-9 {
		t.Fatalf("usage %.4f, want %.4f", u, want)
	}
}

// The room for data blocks is the cache's room less the index and filter blocks: a node whose
// index and filter blocks take 500 of its 1 000 blocks holds a quarter of 2 000 blocks read alike.
func TestPredictUsageLeavesOutIndexFilter(t *testing.T) {
	st := &pb.NodeStats{BlockCacheCapacity: 1000 * 4096, BlockBytes: 4096, IndexFilterBytes: 500 * 4096, Ranges: []*pb.RangeLoad{
		{RangeId: 1, Leader: true, ReadQps: 100, HistRates: []float64{0.05}, HistBlocks: []float64{2000}},
	}}
	if _, hit := predictUsage(st, usage.Default); math.Abs(hit-0.25) > 1e-6 {
		t.Fatalf("hit ratio %.4f, want 0.25", hit)
	}
	for _, c := range []struct {
		index uint64
		want  float64
	}{{0, 1000}, {4 * 4096, 996}, {1000 * 4096, 0}, {2000 * 4096, 0}} {
		st.IndexFilterBytes = c.index
		if got := DataBlockRoom(st); got != c.want {
			t.Errorf("index and filter %d B of a room of 1 000 blocks: %.0f blocks for data, want %.0f", c.index, got, c.want)
		}
	}
}

// HeardLoad: the leaders' point reads and scanned blocks, every replica's writes, the leaders'
// histograms.
func TestHeardLoad(t *testing.T) {
	st := &pb.NodeStats{BlockCacheCapacity: 4096 * 10, BlockBytes: 4096, Ranges: []*pb.RangeLoad{
		{Leader: true, ReadQps: 100, ScanQps: 10, ScanBlocksQps: 30, WriteQps: 5, HistRates: []float64{1}, HistBlocks: []float64{90}},
		{ReadQps: 70, WriteQps: 7, HistRates: []float64{3}, HistBlocks: []float64{1}},
	}}
	l, h, room := HeardLoad(st)
	if l.Reads != 90 || l.Scans != 30 || l.Writes != 12 || len(h) != 1 || room != 10 {
		t.Fatalf("load %+v, histogram %v, room %.0f", l, h, room)
	}
}
