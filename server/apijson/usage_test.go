package apijson

import (
	"testing"

	"github.com/shoaldb/shoal/pb"
)

// A node's usage: measured from its CPU share and disk busy, predicted as it reported, and the hit
// ratio observed on its ranges' measured reads.
func TestNodesUsage(t *testing.T) {
	out := NodesJSON([]*pb.NodeStatus{
		{Desc: &pb.NodeDescriptor{NodeId: 1}, Stats: &pb.NodeStats{CpuPercent: 100, CpuCores: 2, DiskBusy: 0.25,
			PredictedUsage: 0.7, PredictedHitRatio: 0.8, Ranges: []*pb.RangeLoad{{MeasuredReads: 10, MeasuredReadHits: 6},
				{MeasuredReads: 10, MeasuredReadHits: 10}}}},
		{Desc: &pb.NodeDescriptor{NodeId: 2}},
	})
	u := out[0].Usage
	if u == nil || u.Measured != 0.75 || u.Predicted != 0.7 || u.PredictedHit != 0.8 || u.ObservedHit == nil || *u.ObservedHit != 0.8 {
		t.Fatalf("usage %+v", u)
	}
	if out[1].Usage != nil {
		t.Fatal("a node without stats has no usage")
	}
}
