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
